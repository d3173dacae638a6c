package csvstore

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"iter"
	"os"
	"sync"

	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// Store is a CSV recording: one file, a header line, one row per line.
//
// A Store from Create appends (Append, Sync) and reads what it has written
// so far; a Store from Open reads the file as it was when opened (the
// complete lines then; a last line without '\n' is the torn Problem) and
// refuses Append with store.ErrReadOnly.
//
// Store is safe for concurrent use: any number of goroutines may read
// (Rows, Stream, Journal, Problems ...) while one goroutine appends; Append
// calls are serialised. Each iterator is used by one goroutine.
type Store struct {
	path     string
	lock     *store.FileLock // Create: the exclusive lock of the file, held until Close
	f        *os.File        // nil for NewReader
	r        io.ReaderAt     // f, or NewReader's reader
	readOnly bool

	wmu    sync.Mutex // writer state
	enc    *encoder
	size   int64 // bytes written, header included
	meta   store.Meta
	rows   int64
	werr   error // a failed write: the file may end with a partial line
	closed bool

	vmu  sync.Mutex
	view *view // Open: the view of the file; Create: the last computed one

	jmu     sync.Mutex
	cursors map[string]*cursor
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Syncer   = (*Store)(nil)
	_ store.Verifier = (*Store)(nil)
)

// view is what a scan of the file found.
type view struct {
	end      int64 // bytes of the header and the complete lines
	size     int64 // bytes scanned: end and the torn last line
	meta     store.Meta
	procs    []string
	problems []store.Problem
	torn     *store.Problem
}

// perm is the permissions of a new recording file (before umask).
const perm os.FileMode = 0o644

// Create creates a new recording at path and writes its header. It takes
// the file's exclusive lock (store.Lock) first and holds it until Close: a
// file another writer holds is refused at once with an error wrapping
// store.ErrLocked. It refuses a file that already holds bytes (an error
// wrapping store.ErrHoldsRecording naming the path) and never truncates
// one.
func Create(path string) (*Store, error) {
	lock, err := store.Lock(path, perm)
	if err != nil {
		return nil, fmt.Errorf("csvstore: create: %w", err)
	}
	fail := func(f *os.File, err error) (*Store, error) {
		if f != nil {
			f.Close()
		}
		lock.Unlock()
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, perm)
	if err != nil {
		return fail(nil, fmt.Errorf("csvstore: create: %w", err))
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(f, fmt.Errorf("csvstore: create: %w", err))
	}
	if fi.Size() > 0 {
		return fail(f, &store.FileError{Op: "csvstore: create", Path: path, Err: fmt.Errorf("%w (%d bytes)", store.ErrHoldsRecording, fi.Size())})
	}
	if _, err := f.Write(headerLine); err != nil {
		return fail(f, &store.FileError{Op: "csvstore: create", Path: path, Err: err})
	}
	return &Store{path: path, lock: lock, f: f, r: f, enc: newEncoder(), size: int64(len(headerLine))}, nil
}

// Open opens the recording at path for reading. It scans the file once,
// streaming, to check it (Problems) and to find its META row. A file that
// does not begin with the header, or whose META row is of another format,
// is refused with an error wrapping store.ErrFormat naming the path.
func Open(path string) (*Store, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("csvstore: open: %w", err)
	}
	v, err := scan(f, path, -1)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Store{path: path, f: f, r: f, readOnly: true, view: v}, nil
}

// NewReader reads the recording in the first size bytes of r, as Open
// reads a file: a recording embedded in a program or held in memory. name
// stands for the path in errors and Problems. The Store is read-only; its
// Close does not close r.
func NewReader(r io.ReaderAt, size int64, name string) (*Store, error) {
	v, err := scan(io.NewSectionReader(r, 0, size), name, size)
	if err != nil {
		return nil, err
	}
	return &Store{path: name, r: io.NewSectionReader(r, 0, size), readOnly: true, view: v}, nil
}

// Path returns the file's path.
func (s *Store) Path() string { return s.path }

// Append writes rows with one write call, all or none of them: every row is
// checked first (store.Validate, store.CheckRowSize: a row whose line would
// be longer than store.MaxRowSize is refused with a *store.SizeError) and
// nothing of the call is written if one fails. Payloads are written in the
// format of the recording's META row (store.PayloadText). After a failed
// write every Append returns that error: the file may end with a partial
// line.
func (s *Store) Append(rows ...store.Entry) error {
	if s.readOnly {
		return &store.FileError{Op: "csvstore: append", Path: s.path, Err: store.ErrReadOnly}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	switch {
	case s.closed:
		return &store.FileError{Op: "csvstore: append", Path: s.path, Err: store.ErrClosed}
	case s.werr != nil:
		return s.werr
	case len(rows) == 0:
		return nil
	}
	meta := s.meta
	if s.rows == 0 && rows[0].Kind == store.KindMeta {
		meta, _ = store.DecodeMeta(rows[0])
	}
	b, err := s.enc.encode(rows, meta.Format)
	if err != nil {
		return &store.FileError{Op: "csvstore: append", Path: s.path, Err: err}
	}
	killpoint.WriteHalf(killpoint.StoreWrite, s.f, b) // tests only: dormant unless armed
	n, err := s.f.Write(b)
	s.size += int64(n)
	if err != nil {
		s.werr = &store.FileError{Op: "csvstore: append", Path: s.path, Err: err}
		return s.werr
	}
	if s.rows == 0 {
		s.meta = meta
	}
	s.rows += int64(len(rows))
	return nil
}

// Sync fsyncs the file. It is a no-op on a Store from Open.
func (s *Store) Sync() error {
	if s.readOnly {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return &store.FileError{Op: "csvstore: sync", Path: s.path, Err: store.ErrClosed}
	}
	if err := s.f.Sync(); err != nil {
		return &store.FileError{Op: "csvstore: sync", Path: s.path, Err: err}
	}
	return nil
}

// Close closes the file. It does not fsync: call Sync first for
// durability. Reads after Close return store.ErrClosed.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	if uerr := s.lock.Unlock(); err == nil {
		err = uerr
	}
	if err != nil {
		return &store.FileError{Op: "csvstore: close", Path: s.path, Err: err}
	}
	return nil
}

// extent returns the bytes readers read and the torn problem to report.
func (s *Store) extent() (end int64, torn *store.Problem, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: store.ErrClosed}
	}
	if s.readOnly {
		return s.view.end, s.view.torn, nil
	}
	return s.size, nil, nil
}

// current returns the view: Open's, or a scan of what a writer wrote.
func (s *Store) current() (*view, error) {
	end, _, err := s.extent()
	if err != nil {
		return nil, err
	}
	s.vmu.Lock()
	defer s.vmu.Unlock()
	if s.view != nil && (s.readOnly || s.view.end == end) {
		return s.view, nil
	}
	v, err := scan(s.r, s.path, end)
	if err != nil {
		return nil, err
	}
	s.view = v
	return v, nil
}

// Meta returns the decoded META row (the zero Meta if there is none).
func (s *Store) Meta() store.Meta {
	if !s.readOnly {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return s.meta
	}
	return s.view.meta
}

// format is the format of the recording's rows ("": store.Format).
func (s *Store) format() string { return s.Meta().Format }

// Processors lists the processors in the order their streams start.
func (s *Store) Processors() []string {
	v, err := s.current()
	if err != nil {
		return nil
	}
	return append([]string(nil), v.procs...)
}

// Problems returns the integrity problems found by Open (for a Store from
// Create: of what has been written so far). A Store that cannot be read (a
// read error, a closed Store) reports an unreadable problem
// (store.Unreadable), never none.
func (s *Store) Problems() []store.Problem {
	v, err := s.current()
	if err != nil {
		return store.Unreadable(s.path, err)
	}
	return append([]store.Problem(nil), v.problems...)
}

// Verify re-reads the file (the bytes Open read, or those written so far)
// and checks it again.
func (s *Store) Verify() []store.Problem {
	end, _, err := s.extent()
	if err == nil && s.readOnly {
		end = s.view.size
	}
	var v *view
	if err == nil {
		v, err = scan(s.r, s.path, end)
	}
	if err != nil {
		return store.Unreadable(s.path, err)
	}
	return v.problems
}

// scan reads the file from its start, streaming, up to limit bytes (-1: to
// its end), checks its header and rows, and returns the view.
func scan(f io.ReaderAt, path string, limit int64) (*view, error) {
	n := limit
	if n < 0 {
		n = 1<<63 - 1
	}
	lr := newLineReader(io.NewSectionReader(f, 0, n), limit, 0, 0)
	line, complete, _, err := lr.next()
	switch {
	case err == io.EOF:
		return nil, &store.FileError{Op: "csvstore: open", Path: path, Err: fmt.Errorf("%w: empty file, no CSV header", store.ErrFormat)}
	case err != nil:
		return nil, &store.FileError{Op: "csvstore: open", Path: path, Err: err}
	case !complete || !bytes.Equal(line, headerLine):
		return nil, &store.FileError{Op: "csvstore: open", Path: path,
			Err: fmt.Errorf("%w: first line is %q, want the header %q", store.ErrFormat, abbrev(line), Header)}
	}
	v := &view{end: lr.off}
	c := store.Checker{File: path}
	dec := getDecoder(store.Format)
	defer putDecoder(dec)
	first := true
	for {
		line, complete, long, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &store.FileError{Op: "csvstore: read", Path: path, Err: err}
		}
		if !complete {
			p := tornProblem(path, line, lr.n)
			v.torn = &p
			v.size = lr.off + int64(len(line))
			c.Report(p)
			break
		}
		v.end = lr.off
		mode := check // the Checker reads the names and numbers only
		if first {
			mode = full // DecodeMeta reads the detail
		}
		e, re := decodeLine(dec, line, long, mode)
		if re != nil {
			first = false
			c.Report(rowProblem(path, re, lr.n))
			continue
		}
		if first && e.Kind == store.KindMeta {
			m, err := store.DecodeMeta(e)
			if err != nil {
				return nil, &store.FileError{Op: "csvstore: open", Path: path, Line: lr.n, Err: err}
			}
			v.meta = m
			dec.fast.format = m.Format
		}
		first = false
		c.Add(e, lr.n)
	}
	if v.torn == nil {
		v.size = v.end
	}
	v.procs = c.Processors()
	v.problems = c.Finish()
	return v, nil
}

func decodeLine(dec *decoder, line []byte, long bool, mode decodeMode) (store.Entry, *RowError) {
	if long {
		return store.Entry{}, &RowError{Reason: fmt.Sprintf("line longer than %d bytes", MaxLine)}
	}
	return dec.decodeAs(line, mode)
}

func rowProblem(path string, re *RowError, line int64) store.Problem {
	return store.Problem{Kind: store.ProblemMalformed, File: path, Processor: re.Processor, Index: re.Index,
		Row: re.Kind, Line: line, Detail: re.Error()}
}

// tornProblem reports the bytes after the last '\n'. They are never
// decoded as a row; the processor, index and kind are read from its first
// fields when they are readable, as a label for the reader, nothing more.
func tornProblem(path string, tail []byte, line int64) store.Problem {
	p := store.Problem{Kind: store.ProblemTorn, File: path, Line: line,
		Detail: fmt.Sprintf("last line has no line terminator: %d bytes set aside", len(tail))}
	r := csv.NewReader(bytes.NewReader(tail[:min(len(tail), 4096)]))
	r.FieldsPerRecord = -1
	fields, _ := r.Read() // a partial record on error: the fields before it
	if len(fields) >= 2 {
		if i, ok := parseInt(fields[1]); ok {
			p.Processor, p.Index = fields[0], i
		}
	}
	if len(fields) >= 3 && store.Kind(fields[2]).Valid() {
		p.Row = store.Kind(fields[2])
	}
	return p
}

func abbrev(b []byte) string {
	if len(b) > 100 {
		return string(b[:97]) + "..."
	}
	return string(b)
}

// lines yields the complete lines of the view after the header, with
// their numbers, then the torn problem if any.
func (s *Store) lines(yield func(line []byte, n int64) bool) (*store.Problem, error) {
	end, torn, err := s.extent()
	if err != nil {
		return nil, err
	}
	lr := newLineReader(io.NewSectionReader(s.r, 0, end), end, 0, 0)
	for {
		line, complete, long, err := lr.next()
		if err == io.EOF {
			return torn, nil
		}
		if err != nil {
			return nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: err}
		}
		if lr.n == 1 {
			continue // the header
		}
		if !complete { // the file shrank under us
			return nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: fmt.Errorf("%w: file shorter than when opened", io.ErrUnexpectedEOF)}
		}
		if long {
			line = nil
		}
		if !yield(line, lr.n) {
			return nil, nil
		}
	}
}

// Rows yields every row in storage order. A line that is not a row yields a
// zero Entry with its *store.Problem (malformed) and iteration goes on; the
// torn last line, if any, is yielded last the same way. An I/O error is
// yielded once and ends the iteration.
func (s *Store) Rows() iter.Seq2[store.Entry, error] { return s.entries("", true) }

// fieldPrefix returns the CSV text of a first field v followed by ','.
func fieldPrefix(v string) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{v, ""})
	w.Flush()
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Stream yields the rows of one processor in storage order (the order of
// their indexes in a recording without problems). Malformed lines of that
// processor and its torn last line are yielded as in Rows.
func (s *Store) Stream(processor string) iter.Seq2[store.Entry, error] {
	return s.entries(processor, false)
}

// entries yields the rows of processor in storage order, or, with all, every
// row, as Rows and Stream say.
func (s *Store) entries(processor string, all bool) iter.Seq2[store.Entry, error] {
	var prefix []byte
	if !all {
		prefix = fieldPrefix(processor)
	}
	return func(yield func(store.Entry, error) bool) {
		dec := getDecoder(s.format())
		defer putDecoder(dec)
		stopped := false
		torn, err := s.lines(func(line []byte, n int64) bool {
			mine := all || bytes.HasPrefix(line, prefix)
			if !mine && (len(line) == 0 || line[0] != '"') {
				return true // another processor's row: not decoded
			}
			e, re := decodeLine(dec, line, line == nil, full)
			switch {
			case re != nil && (mine || re.Processor == processor):
				p := rowProblem(s.path, re, n)
				stopped = !yield(store.Entry{}, &p)
			case re == nil && (all || e.Processor == processor):
				stopped = !yield(e, nil)
			}
			return !stopped
		})
		if stopped {
			return
		}
		if err != nil {
			yield(store.Entry{}, err)
			return
		}
		if torn != nil && (all || torn.Processor == processor && processor != "") {
			p := *torn
			yield(store.Entry{}, &p)
		}
	}
}

// cursor is the position of the journal lookups of one feed.
type cursor struct {
	end  int64 // extent the reader was built for
	lr   *lineReader
	last int64 // seq of the last row found
	dec  *decoder
}

// Journal returns the JOURNAL row of (feed, seq), or an error wrapping
// store.ErrMissingJournal. Each feed has a forward cursor: lookups in
// increasing seq read the file once in all; a lookup of a smaller seq
// starts again from the top; a seq not found after the cursor is looked for
// before it, so journal rows written out of order are found too.
func (s *Store) Journal(feed string, seq int64) (store.Entry, error) {
	end, _, err := s.extent()
	if err != nil {
		return store.Entry{}, err
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.cursors == nil {
		s.cursors = make(map[string]*cursor)
	}
	c := s.cursors[feed]
	if c == nil {
		c = &cursor{dec: getDecoder(s.format())}
		s.cursors[feed] = c
	}
	if c.lr == nil || seq <= c.last || c.end != end {
		start := int64(len(headerLine))
		if c.lr != nil && seq > c.last {
			start = c.lr.off // the extent grew: go on from here
		}
		s.seek(c, start, end)
	}
	hdr := int64(len(headerLine))
	from := c.lr.off
	e, found, err := s.find(c, feed, seq)
	if err == nil && !found {
		if from > hdr {
			// Not after the cursor: look before it.
			s.seek(c, hdr, from)
			e, found, err = s.find(c, feed, seq)
		}
		if err == nil && found {
			s.seek(c, c.lr.off, end)
		} else {
			s.seek(c, from, end)
		}
	}
	if err != nil {
		c.lr = nil
		return store.Entry{}, err
	}
	if !found {
		return store.Entry{}, &store.FileError{Op: "csvstore: journal", Path: s.path, Err: fmt.Errorf("%w: feed %q seq %d", store.ErrMissingJournal, feed, seq)}
	}
	c.last = seq
	return e, nil
}

func (s *Store) seek(c *cursor, off, end int64) {
	c.lr = newLineReader(io.NewSectionReader(s.r, off, end-off), end-off, off, 0)
	c.end = end
}

// find reads lines from the cursor until the JOURNAL row of (feed, seq).
func (s *Store) find(c *cursor, feed string, seq int64) (store.Entry, bool, error) {
	for {
		line, complete, long, err := c.lr.next()
		if err == io.EOF || (err == nil && !complete) {
			return store.Entry{}, false, nil
		}
		if err != nil {
			return store.Entry{}, false, &store.FileError{Op: "csvstore: read", Path: s.path, Err: err}
		}
		if long || !maybeJournal(line) {
			continue
		}
		e, re := c.dec.decodeAs(line, check) // the payload only for the row found
		if re == nil && e.Kind == store.KindJournal && e.Processor == "" && e.Source == feed && e.Seq == seq {
			e, re = c.dec.decode(line)
			return e, re == nil, nil
		}
	}
}

// maybeJournal is a cheap test that a line may be a JOURNAL row: no
// processor, then an index, then the kind.
func maybeJournal(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	if line[0] == '"' {
		return true
	}
	if line[0] != ',' {
		return false
	}
	_, rest, ok := bytes.Cut(line[1:], []byte(","))
	if !ok {
		return false
	}
	return bytes.HasPrefix(rest, []byte("JOURNAL,")) || bytes.HasPrefix(rest, []byte(`"`))
}
