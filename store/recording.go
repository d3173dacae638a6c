package store

import (
	"iter"
	"slices"
	"sync"
)

// Recording is the one checked reader of a recording, over any Backend: it
// decodes META, runs the Checker over the rows the backend yields and
// keeps what a pass found (the view), so that Problems and Processors
// answer from the first pass that reads every row (Rows, Scan, Streams)
// without reading again. It is a Reader; one from Create (CreateBackend)
// is a Writer too.
//
// A Recording from Open reads the recording as it was when opened and
// refuses Append with ErrReadOnly; one from Create reads what it has
// written so far (its view is of the rows written when it was made).
//
// Recording is safe for concurrent use: any number of goroutines may read
// while one appends; Append calls are serialised. Each iterator is used by
// one goroutine.
type Recording struct {
	b        Backend
	path     string
	readOnly bool

	wmu    sync.Mutex
	meta   Meta
	rows   int64 // rows appended
	gen    int64 // Append calls that reached the backend: what a view is of
	closed bool

	vmu  sync.Mutex
	view *view // the last view made, nil before the first
}

// view is what a pass that checked every row found.
type view struct {
	gen      int64
	procs    []string
	problems []Problem
	controls []Control
}

// OpenBackend is the hook of a backend package's Open: the Recording
// reading b, a backend opened for reading the recording at path (path
// names it in Problems and errors). It reads the first row: a META row
// that does not decode (another format or version) is refused with a
// *FileError wrapping ErrFormat, and b is closed.
func OpenBackend(b Backend, path string) (*Recording, error) {
	r := &Recording{b: b, path: path, readOnly: true}
	for row, err := range b.Scan(ScanCheck) {
		if err != nil {
			b.Close()
			return nil, err
		}
		if row.Problem == nil && row.Entry.Kind == KindMeta {
			m, err := DecodeMeta(row.Entry)
			if err != nil {
				b.Close()
				return nil, &FileError{Op: "store: open", Path: path, Line: row.Line, Err: err}
			}
			r.meta = m
		}
		break
	}
	return r, nil
}

// CreateBackend is the hook of a backend package's Create: the Recording
// writing b, a backend created for a new recording at path.
func CreateBackend(b Backend, path string) *Recording {
	return &Recording{b: b, path: path}
}

// Append writes rows to the backend, whole or not at all (Backend.Append).
func (r *Recording) Append(rows ...Entry) error {
	if r.readOnly {
		return &FileError{Op: "store: append", Path: r.path, Err: ErrReadOnly}
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.closed {
		return &FileError{Op: "store: append", Path: r.path, Err: ErrClosed}
	}
	if len(rows) == 0 {
		return nil
	}
	r.gen++
	if err := r.b.Append(rows...); err != nil {
		return err
	}
	if r.rows == 0 && rows[0].Kind == KindMeta {
		r.meta, _ = DecodeMeta(rows[0])
	}
	r.rows += int64(len(rows))
	return nil
}

// Sync forces the rows appended to stable storage (Backend.Sync); a no-op
// on a Recording from Open.
func (r *Recording) Sync() error {
	if r.readOnly {
		return nil
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.closed {
		return &FileError{Op: "store: sync", Path: r.path, Err: ErrClosed}
	}
	return r.b.Sync()
}

// Close closes the backend. It does not sync: call Sync first for
// durability. Reads after Close fail with ErrClosed.
func (r *Recording) Close() error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return r.b.Close()
}

// Meta returns the decoded META row (the zero Meta if there is none).
func (r *Recording) Meta() Meta {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.meta
}

// mark returns what a view made now is of: the Append calls so far.
func (r *Recording) mark() (int64, error) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.closed {
		return 0, &FileError{Op: "store: read", Path: r.path, Err: ErrClosed}
	}
	return r.gen, nil
}

// cached returns the view of gen, if it is made.
func (r *Recording) cached(gen int64) *view {
	r.vmu.Lock()
	defer r.vmu.Unlock()
	if r.view != nil && (r.readOnly || r.view.gen == gen) {
		return r.view
	}
	return nil
}

// current returns the view of the rows readers see: the one made, else
// one made by a checking pass now.
func (r *Recording) current() (*view, error) {
	gen, err := r.mark()
	if err != nil {
		return nil, err
	}
	if v := r.cached(gen); v != nil {
		return v, nil
	}
	return r.pass(gen, ScanCheck|ScanWhole, nil)
}

// Processors lists the processors in the order their streams start.
func (r *Recording) Processors() []string {
	v, err := r.current()
	if err != nil {
		return nil
	}
	return slices.Clone(v.procs)
}

// Controls returns the recording's CONTROL rows that decode, in order
// (see Reader).
func (r *Recording) Controls() []Control {
	v, err := r.current()
	if err != nil {
		return nil
	}
	return slices.Clone(v.controls)
}

// Problems returns the integrity problems of the recording (see Reader). A
// Recording that cannot be read (a read error, a closed one) reports an
// unreadable problem (Unreadable), never none.
func (r *Recording) Problems() []Problem {
	v, err := r.current()
	if err != nil {
		return Unreadable(r.path, err)
	}
	return slices.Clone(v.problems)
}

// pass reads every row the backend yields in mode, hands each to visit
// (nil: none), and checks them as it goes: when it runs to its end it keeps
// and returns the view of gen (nil when visit stopped it). A whole-file
// unreadable problem the backend yields last is not handed to visit: it is
// listed after the Checker's.
func (r *Recording) pass(gen int64, mode ScanMode, visit func(*Row) bool) (*view, error) {
	c := Checker{File: r.path}
	var late []Problem
	first := true
	for row, err := range r.b.Scan(mode) {
		if err != nil {
			return nil, err
		}
		if p := row.Problem; p != nil {
			if p.Kind == ProblemUnreadable {
				late = append(late, *p)
				continue
			}
			c.Report(*p)
		} else {
			if first && row.Entry.Kind == KindMeta {
				if _, err := DecodeMeta(row.Entry); err != nil {
					return nil, &FileError{Op: "store: read", Path: r.path, Line: row.Line, Err: err}
				}
			}
			c.Add(row.Entry, row.Line)
		}
		first = false
		if visit != nil && !visit(row) {
			return nil, nil
		}
	}
	v := &view{gen: gen, procs: c.Processors(), problems: append(c.Finish(), late...), controls: c.Controls()}
	r.vmu.Lock()
	if r.view == nil || !r.readOnly {
		r.view = v
	}
	r.vmu.Unlock()
	return v, nil
}

// each yields every row the backend yields in mode to visit, checking
// them as it goes unless the view is made (pass).
func (r *Recording) each(mode ScanMode, visit func(*Row) bool) error {
	gen, err := r.mark()
	if err != nil {
		return err
	}
	if r.cached(gen) == nil {
		_, err := r.pass(gen, mode|ScanWhole, visit)
		return err
	}
	for row, err := range r.b.Scan(mode) {
		if err != nil {
			return err
		}
		if row.Problem != nil && row.Problem.Kind == ProblemUnreadable {
			continue
		}
		if !visit(row) {
			return nil
		}
	}
	return nil
}

// entries yields every row in mode, as Rows says.
func (r *Recording) entries(mode ScanMode) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		err := r.each(mode, func(row *Row) bool {
			if row.Problem != nil {
				p := *row.Problem
				return yield(Entry{}, &p)
			}
			return yield(row.Entry, nil)
		})
		if err != nil {
			yield(Entry{}, err)
		}
	}
}

// Rows yields every row in storage order (see Reader).
func (r *Recording) Rows() iter.Seq2[Entry, error] { return r.entries(0) }

// Scan yields every row in storage order as Rows does, lending the
// backend's buffers (see Reader).
func (r *Recording) Scan() iter.Seq2[Entry, error] { return r.entries(ScanBorrow) }

// Streams yields the rows of every processor stream in one pass (see
// Reader).
func (r *Recording) Streams() iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		err := r.each(ScanBorrow|ScanStreams, func(row *Row) bool {
			switch {
			case row.Entry.Processor == "":
				return true
			case row.Problem != nil:
				p := *row.Problem
				return yield(Entry{Processor: row.Entry.Processor}, &p)
			}
			return yield(row.Entry, nil)
		})
		if err != nil {
			yield(Entry{}, err)
		}
	}
}

// Stream yields one processor's rows in storage order (see Reader),
// through the backend's StreamSeeker when it has one.
func (r *Recording) Stream(processor string) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if _, err := r.mark(); err != nil {
			yield(Entry{}, err)
			return
		}
		rows := r.b.Scan(0)
		if s, ok := r.b.(StreamSeeker); ok {
			rows = s.Stream(processor)
		}
		for row, err := range rows {
			switch {
			case err != nil:
				yield(Entry{}, err)
				return
			case row.Entry.Processor != processor:
				continue
			case row.Problem != nil:
				if row.Problem.Kind == ProblemUnreadable || row.Problem.Kind == ProblemTorn && processor == "" {
					continue
				}
				p := *row.Problem
				if !yield(Entry{}, &p) {
					return
				}
			default:
				if !yield(row.Entry, nil) {
					return
				}
			}
		}
	}
}

// Journal returns the JOURNAL row of (feed, seq) (Backend.Journal).
func (r *Recording) Journal(feed string, seq int64) (Entry, error) {
	if _, err := r.mark(); err != nil {
		return Entry{}, err
	}
	return r.b.Journal(feed, seq)
}
