package torture

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// row is one row of a recording as the oracle's own reader sees it: the
// thirteen columns of docs/FORMAT.md, read without the store package, so
// that the oracle does not share the checker it checks. A plain value.
type row struct {
	line      int // CSV: the physical line (header 1); SQLite: the rowid
	processor string
	index     int64
	kind      string
	source    string
	seq       int64
	epoch     int64
	key       string
	offset    int64
	n         int64
	payload   []byte
	detail    string
	instant   time.Time // zero when the row has none
}

// recording is what the oracle reads of one recording file. A plain value.
type recording struct {
	path    string
	rows    []row
	torn    bool      // CSV: bytes after the last line break
	streams []string  // META's streams
	created time.Time // META's created instant (zero if it has none)
	bad     []string  // what the reader could not read (a malformed line, an unreadable file)
}

const csvHeader = "processor,index,kind,source,seq,instant,epoch,key,offset,n,payload,detail,reads"

// readRecording reads a CSV or SQLite recording by its first bytes.
func readRecording(path string) (*recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	f.Close()
	if n == 0 {
		return nil, fmt.Errorf("%s: empty file", path)
	}
	if bytes.HasPrefix(head[:n], []byte("SQLite format 3\x00")) {
		return readSQLite(path)
	}
	return readCSV(path)
}

func readCSV(path string) (*recording, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rec := &recording{path: path}
	if i := bytes.LastIndexByte(b, '\n'); i < len(b)-1 {
		rec.torn = true
		b = b[:i+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<27)
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			if sc.Text() != csvHeader {
				return nil, fmt.Errorf("%s: not a CSV recording (header %.40q)", path, sc.Text())
			}
			continue
		}
		r := csv.NewReader(strings.NewReader(sc.Text()))
		r.FieldsPerRecord = 13
		fs, err := r.Read()
		if err != nil {
			rec.bad = append(rec.bad, fmt.Sprintf("line %d: %v", line, err))
			continue
		}
		rw, err := parseRow(line, fs)
		if err != nil {
			rec.bad = append(rec.bad, fmt.Sprintf("line %d: %v", line, err))
			continue
		}
		rec.rows = append(rec.rows, rw)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := rec.meta(); err != nil {
		return nil, err
	}
	return rec, nil
}

// readSQLite reads a SQLite recording. A killed run may leave a hot
// journal (PATH-journal) or a log (PATH-wal) that SQLite must roll back or
// replay before the file reads as what was committed: that needs a
// writable database, so the harness copies the file and those beside it
// into a directory of its own and reads the copy (the evidence stays as
// the run left it).
func readSQLite(path string) (*recording, error) {
	tmp, err := os.MkdirTemp("", "torture-sqlite-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	abs := filepath.Join(tmp, "rec.db")
	for _, suffix := range []string{"", "-journal", "-wal"} {
		if err := copyFile(path+suffix, abs+suffix); err != nil && (suffix == "" || !errors.Is(err, fs.ErrNotExist)) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: "_busy_timeout=10000"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rs, err := db.Query(`SELECT id, processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads FROM rows ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer rs.Close()
	rec := &recording{path: path}
	for rs.Next() {
		var id int64
		fs := make([]string, 13)
		ptrs := []any{&id}
		for i := range fs {
			ptrs = append(ptrs, &fs[i])
		}
		if err := rs.Scan(ptrs...); err != nil {
			rec.bad = append(rec.bad, fmt.Sprintf("row %d: %v", id, err))
			continue
		}
		rw, err := parseRow(int(id), fs)
		if err != nil {
			rec.bad = append(rec.bad, fmt.Sprintf("row %d: %v", id, err))
			continue
		}
		rec.rows = append(rec.rows, rw)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := rec.meta(); err != nil {
		return nil, err
	}
	return rec, nil
}

// parseRow reads the thirteen fields of a row.
func parseRow(line int, fs []string) (row, error) {
	r := row{line: line, processor: fs[0], kind: fs[2], source: fs[3], key: fs[7], detail: fs[11]}
	if fs[5] != "" {
		t, err := time.Parse(time.RFC3339Nano, fs[5])
		if err != nil {
			return r, fmt.Errorf("%s row: instant: %v", r.kind, err)
		}
		r.instant = t
	}
	ints := []struct {
		dst  *int64
		text string
	}{{&r.index, fs[1]}, {&r.seq, fs[4]}, {&r.epoch, fs[6]}, {&r.offset, fs[8]}, {&r.n, fs[9]}}
	for _, x := range ints {
		v, err := strconv.ParseInt(x.text, 10, 64)
		if err != nil {
			return r, fmt.Errorf("%s row: %v", r.kind, err)
		}
		*x.dst = v
	}
	p := fs[10]
	if strings.HasPrefix(p, "~") {
		b, err := base64.StdEncoding.DecodeString(p[1:])
		if err != nil {
			return r, fmt.Errorf("%s row: payload: %v", r.kind, err)
		}
		r.payload = b
	} else {
		r.payload = []byte(p)
	}
	return r, nil
}

// meta reads the streams of the META row.
func (rec *recording) meta() error {
	if len(rec.rows) == 0 || rec.rows[0].kind != "META" {
		return fmt.Errorf("%s: no META row first", rec.path)
	}
	var m struct {
		Apps    map[string]string `json:"apps"`
		Streams []string          `json:"streams"`
		Created time.Time         `json:"created"`
	}
	if err := json.Unmarshal([]byte(rec.rows[0].detail), &m); err != nil {
		rec.bad = append(rec.bad, fmt.Sprintf("META: %v", err))
		return nil
	}
	rec.streams, rec.created = m.Streams, m.Created
	if rec.streams == nil {
		for s := range m.Apps {
			rec.streams = append(rec.streams, s)
		}
	}
	return nil
}

// shape is what the oracle's reader finds wrong with a recording, in the
// problem names of docs/FORMAT.md: torn, unfinished (a stream without
// END), gap (an index missing or a stream not starting with START),
// orphan (a DELIVERY not followed by its input, fewer OUTPUT rows than
// an input's n), missing-stream, malformed. Empty: complete.
func (rec *recording) shape() map[string]int {
	got := map[string]int{}
	if rec.torn {
		got["torn"]++
	}
	if len(rec.bad) > 0 {
		got["malformed"] += len(rec.bad)
	}
	type state struct {
		next    int64
		ended   bool
		rows    int
		outputs int64 // outputs still expected after the last input
		deliv   *row  // a DELIVERY waiting for its input
		failed  bool
	}
	st := map[string]*state{}
	for i := range rec.rows {
		r := &rec.rows[i]
		if r.processor == "" {
			continue
		}
		s := st[r.processor]
		if s == nil {
			s = &state{next: 1}
			st[r.processor] = s
			if r.kind != "START" {
				got["gap"]++
			}
		}
		s.rows++
		if r.index != s.next {
			got["gap"]++
		}
		s.next = r.index + 1
		if s.ended {
			got["orphan"]++
		}
		if s.deliv != nil && !(r.kind == "INLINE" || r.kind == "INDEXED") {
			got["orphan"]++
			s.deliv = nil
		}
		switch r.kind {
		case "DELIVERY":
			s.deliv = r
		case "INLINE", "INDEXED", "TIMER":
			if s.outputs > 0 {
				got["orphan"]++
			}
			s.deliv, s.outputs = nil, r.n
		case "OUTPUT":
			if s.outputs == 0 {
				got["orphan"]++
			} else {
				s.outputs--
			}
		case "END":
			if s.outputs > 0 {
				got["orphan"]++
			}
			s.ended = true
		case "FAILED":
			if !s.failed {
				got["failed"]++ // the stream is not reproducible past it
				s.failed = true
			}
		default:
			if s.outputs > 0 && r.kind != "FAILED" {
				got["orphan"]++
				s.outputs = 0
			}
		}
	}
	for _, name := range rec.streams {
		s := st[name]
		switch {
		case s == nil:
			got["missing-stream"]++
		case !s.ended:
			got["unfinished"]++
			if s.outputs > 0 || s.deliv != nil {
				got["orphan"]++ // the input whose rows the end cut
			}
		}
	}
	if len(rec.streams) == 0 {
		got["missing-stream"]++
	}
	if n := rec.uncovered(); n > 0 {
		got["missing-input"] = n
	}
	return got
}

// input is one input a recording holds: its delivery's place and payload.
type input struct {
	stream  string
	at      time.Time // when it was processed (the input row's instant)
	seq     int64
	epoch   int64
	key     string
	offset  int64
	payload []byte
	outputs [][]byte
}

// inputs lists the recording's positioned inputs (a DELIVERY followed by
// its input row) with their outputs, in storage order.
func (rec *recording) inputs() []input {
	var out []input
	last := map[string]int{} // stream -> index in out of its last input, for its OUTPUT rows
	var deliv = map[string]*row{}
	for i := range rec.rows {
		r := &rec.rows[i]
		switch r.kind {
		case "DELIVERY":
			deliv[r.processor] = r
		case "INLINE", "INDEXED":
			d := deliv[r.processor]
			delete(deliv, r.processor)
			in := input{stream: r.processor, seq: r.seq, payload: r.payload, at: r.instant}
			if d != nil {
				in.epoch, in.key, in.offset = d.epoch, d.key, d.offset
			}
			if r.kind == "INDEXED" {
				in.payload = rec.journal(r.source, r.seq)
			}
			out = append(out, in)
			last[r.processor] = len(out) - 1
		case "TIMER":
			last[r.processor] = -1
		case "OUTPUT":
			if j, ok := last[r.processor]; ok && j >= 0 {
				out[j].outputs = append(out[j].outputs, r.payload)
			}
		}
	}
	return out
}

// journal is the payload of the JOURNAL row (feed, seq), nil if none.
func (rec *recording) journal(feed string, seq int64) []byte {
	for i := range rec.rows {
		if r := &rec.rows[i]; r.kind == "JOURNAL" && r.source == feed && r.seq == seq {
			return r.payload
		}
	}
	return nil
}

// count counts the rows of a kind.
func (rec *recording) count(kind string) int {
	n := 0
	for i := range rec.rows {
		if rec.rows[i].kind == kind {
			n++
		}
	}
	return n
}

// uncovered counts, for a recording of a file feed (positions without a
// key), the sequence numbers no row accounts for (no input row, no
// DROPPED range, no FAILED row) in a processor that takes the feed (its
// worker streams together), up to the highest COMMIT row, or, in a
// recording whose streams all ended, up to the highest sequence number
// any row shows. A COMMIT row claims every item up to it was processed, a
// clean end that every item published was: each must have left a row. (A
// Kafka feed commits per partition: which sequence numbers belong to a
// partition that left no row cannot be known, so it is not counted.)
func (rec *recording) uncovered() int {
	top := map[string]int64{}
	keyed := map[string]bool{}
	ended, streams := map[string]bool{}, map[string]bool{}
	for i := range rec.rows {
		r := &rec.rows[i]
		if r.processor != "" {
			streams[r.processor] = true
			if r.kind == "END" {
				ended[r.processor] = true
			}
		}
		switch r.kind {
		case "COMMIT":
			if r.key != "" {
				keyed[r.source] = true
			} else if r.seq > top[r.source] {
				top[r.source] = r.seq
			}
		case "DELIVERY":
			if r.key != "" {
				keyed[r.source] = true
			}
		}
	}
	clean := len(streams) > 0 && len(ended) == len(streams)
	seen := map[string]map[string]map[int64]bool{} // processor -> feed -> seqs
	mark := func(proc, feed string, from, to int64) {
		base, _, _ := strings.Cut(proc, "#w")
		if seen[base] == nil {
			seen[base] = map[string]map[int64]bool{}
		}
		if seen[base][feed] == nil {
			seen[base][feed] = map[int64]bool{}
		}
		for q := from; q <= to; q++ {
			seen[base][feed][q] = true
		}
	}
	for i := range rec.rows {
		r := &rec.rows[i]
		switch r.kind {
		case "INLINE", "INDEXED", "FAILED":
			if r.source != "" {
				mark(r.processor, r.source, r.seq, r.seq)
				if clean && r.seq > top[r.source] {
					top[r.source] = r.seq
				}
			}
		case "DROPPED":
			last := r.seq + max(r.n, 1) - 1
			mark(r.processor, r.source, r.seq, last)
			if clean && last > top[r.source] {
				top[r.source] = last
			}
		}
	}
	n := 0
	for _, feeds := range seen {
		for feed, seqs := range feeds {
			if keyed[feed] {
				continue
			}
			for q := int64(1); q <= top[feed]; q++ {
				if !seqs[q] {
					n++
				}
			}
		}
	}
	return n
}
