package outbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The marks file: one JSON object per line, appended; the first line is
// the header. docs/FORMAT.md ("The outbox's marks") documents it.
const marksVersion = 1

// header is the marks file's first line: what the sink is, how far its
// batches got when the file was last compacted, and the positions whose
// outputs earlier runs delivered (suppress).
type header struct {
	Version  int          `json:"outbox"`
	Sink     string       `json:"sink"`             // "file" or "sink"
	Format   string       `json:"format,omitempty"` // a file sink's line format
	Batch    int64        `json:"batch"`            // the last batch's number
	Size     int64        `json:"size"`             // a file sink's size after it
	Suppress []suppressed `json:"suppress,omitempty"`
}

// suppressed lists the offsets of an epoch and key of a feed whose
// inputs an earlier run recorded whole (and whose outputs the outbox
// delivered from its recording) without a commit covering them: a later
// run that reads them again delivers no output of theirs.
type suppressed struct {
	Feed    string  `json:"feed"`
	Key     string  `json:"key"`
	Epoch   int64   `json:"epoch"`
	Offsets []int64 `json:"offsets"`
	// Timers: the offsets of the inputs after which an earlier run
	// recorded a timer's outputs whole, once per such timer: a later
	// run's timer after one of them is not delivered, as many times.
	Timers []int64 `json:"timers,omitempty"`
}

// runMark names a run's recording: its path (absolute) and META's
// creation instant.
type runMark struct {
	Path    string    `json:"path"`
	Created time.Time `json:"created"`
}

// commitMark: the feed's source of run Run committed key through the
// item of seq Seq, at epoch and offset (engine.Observer.Committed).
type commitMark struct {
	Run    int    `json:"run"`
	Feed   string `json:"feed"`
	Key    string `json:"key"`
	Seq    int64  `json:"seq"`
	Epoch  int64  `json:"epoch"`
	Offset int64  `json:"offset"`
}

// uncommittedMark: in run Run, the source of Feed commits nothing: its
// outputs were delivered once recorded, and its positions are read again
// by any run (no suppression).
type uncommittedMark struct {
	Run  int    `json:"run"`
	Feed string `json:"feed"`
}

// batchMark: batch N is about to be delivered: for each entry, the OUTPUT
// rows of its run's stream and item class after the class's last entry,
// through Row. Size is a file sink's size before it.
type batchMark struct {
	N    int64   `json:"n"`
	Size int64   `json:"size"`
	To   []entry `json:"to"`
}

// entry is one (run, stream, class) of a batch and the row it delivers
// through.
type entry struct {
	Run    int    `json:"run"`
	Stream string `json:"stream"`
	class
	Row int64 `json:"row"`
}

// class is what makes an output deliverable: its input's feed and
// position key (committed by the source), or Free: a cycle without a
// source position, deliverable once recorded.
type class struct {
	Feed string `json:"feed,omitempty"`
	Key  string `json:"key,omitempty"`
	Free bool   `json:"free,omitempty"`
}

// line is any line of the marks file.
type line struct {
	Header *header     `json:"-"`
	Run    *runMark    `json:"run,omitempty"`
	Commit *commitMark `json:"commit,omitempty"`
	Batch  *batchMark  `json:"batch,omitempty"`
	// Uncommitted: a feed whose source commits nothing.
	Uncommitted *uncommittedMark `json:"uncommitted,omitempty"`
}

// MarksError is a marks file line that cannot be read: not the torn last
// line a crash leaves, which is dropped. Line counts from 1 (the header).
// It wraps ErrMarks. It is not changed once returned: safe for concurrent
// use.
type MarksError struct {
	Path string
	Line int
	Err  error
}

func (e *MarksError) Error() string {
	return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
}

func (e *MarksError) Unwrap() error { return e.Err }

// marks is what the marks file says.
type marks struct {
	head  header
	runs  []runMark
	lines []line // after the header, in order (runs, commits, batches)
}

// readMarks reads the marks file at path; ok false when there is none. A
// last line without its line break is a write a crash cut: dropped.
func readMarks(path string) (m marks, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i < len(b)-1 {
		b = b[:i+1] // a torn last line
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	n := 0
	for sc.Scan() {
		n++
		if n == 1 {
			if err := strictUnmarshal(sc.Bytes(), &m.head); err != nil || m.head.Version != marksVersion {
				if err == nil {
					err = fmt.Errorf("%w: version %d, want %d", ErrMarks, m.head.Version, marksVersion)
				}
				return m, false, &MarksError{path, n, err}
			}
			if m.head.Batch < 0 || m.head.Size < 0 {
				return m, false, &MarksError{path, n, fmt.Errorf("%w: a negative batch number or size", ErrMarks)}
			}
			continue
		}
		var l line
		if err := strictUnmarshal(sc.Bytes(), &l); err != nil {
			return m, false, &MarksError{path, n, err}
		}
		if err := l.check(len(m.runs)); err != nil {
			return m, false, &MarksError{path, n, err}
		}
		if l.Run != nil {
			m.runs = append(m.runs, *l.Run)
		}
		m.lines = append(m.lines, l)
	}
	if err := sc.Err(); err != nil { // a line too long
		return m, false, &MarksError{path, n + 1, fmt.Errorf("%w: %v", ErrMarks, err)}
	}
	if n == 0 {
		return m, false, &MarksError{path, 1, fmt.Errorf("%w: no header", ErrMarks)}
	}
	return m, true, nil
}

// check reports what makes l, a line after the header, not a line of
// marks that named runs runs before it: not exactly one kind, a run not
// named, a batch not numbered from 1 or of a negative size.
func (l *line) check(runs int) error {
	kinds := 0
	for _, set := range []bool{l.Run != nil, l.Commit != nil, l.Batch != nil, l.Uncommitted != nil} {
		if set {
			kinds++
		}
	}
	named := func(run int) bool { return run >= 0 && run < runs }
	switch {
	case kinds != 1:
		return fmt.Errorf("%w: a line of no known kind, or of several", ErrMarks)
	case l.Commit != nil && !named(l.Commit.Run), l.Uncommitted != nil && !named(l.Uncommitted.Run):
		return fmt.Errorf("%w: a line of a run not named", ErrMarks)
	case l.Batch != nil && (l.Batch.N < 1 || l.Batch.Size < 0):
		return fmt.Errorf("%w: batch %d of size %d: batches are numbered from 1, sizes not negative", ErrMarks, l.Batch.N, l.Batch.Size)
	}
	if l.Batch != nil {
		for _, e := range l.Batch.To {
			if !named(e.Run) {
				return fmt.Errorf("%w: a batch of a run not named", ErrMarks)
			}
		}
	}
	return nil
}

// strictUnmarshal decodes one JSON value, refusing unknown fields.
func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMarks, err)
	}
	if d.More() {
		return fmt.Errorf("%w: more than one value on a line", ErrMarks)
	}
	return nil
}

// writeFile writes b to path whole or not at all: a temporary file beside
// it, synced, renamed over it, the directory synced.
func writeFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644) // as the files beside it: CreateTemp makes it 0600
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// encodeLine is v as one marks line.
func encodeLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // strings, numbers and instants only
		panic(err)
	}
	return append(b, '\n')
}
