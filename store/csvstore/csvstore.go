package csvstore

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// Store is a CSV recording: one file, a header line, one row per line.
//
// A Store from Create appends (Append, Sync) and reads what it has written
// so far; a Store from Open reads the file as it was when opened (its
// bytes then: the complete lines, and a last line without '\n' is the torn
// Problem) and refuses Append with store.ErrReadOnly.
//
// Open reads only the header and the META row; the whole file is checked
// (store.Checker) by the first read that needs it: Problems, Processors or
// Verify, or a Streams iteration, which checks as it goes so that a replay
// reads the file once.
//
// Store is safe for concurrent use: any number of goroutines may read
// (Rows, Stream, Journal, Problems ...) while one goroutine appends; Append
// calls are serialised. Each iterator is used by one goroutine.
type Store struct {
	path     string
	lock     *store.FileLock // Create: the exclusive lock of the file, held until Close
	f        *os.File        // nil for NewReader
	r        io.ReaderAt     // f, NewReader's reader, or for Create the live file
	readOnly bool
	osize    int64 // Open: the file's bytes when opened
	oend     int64 // Open: the bytes of the header and the complete lines then

	wmu    sync.Mutex // writer state
	enc    *encoder
	live   *liveFile // Create: the file written (r), which the first Append replaces
	target string    // Create: the file path names (store.Target), which the first Append replaces
	placed bool      // the first Append renamed its file into place: Sync syncs the directory too
	size   int64     // bytes written, header included (0: nothing yet, not even the header)
	meta   store.Meta
	rows   int64
	werr   error // a failed write: the file may end with a partial line
	closed bool

	vmu  sync.Mutex
	view *view // the last view computed (Open: of the bytes when opened), nil before the first

	jmu     sync.Mutex
	cursors map[string]*cursor
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.Syncer        = (*Store)(nil)
	_ store.Verifier      = (*Store)(nil)
	_ store.StreamsReader = (*Store)(nil)
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

// Create creates a new recording at path, an empty file until the first
// Append: that one writes the header with its rows, whole or not at all
// (see Append). It takes the file's exclusive lock (store.Lock) first and
// holds it until Close: a file another writer holds is refused at once
// with an error wrapping store.ErrLocked. It refuses a file that already
// holds bytes (an error wrapping store.ErrHoldsRecording naming the path)
// and never truncates one. A Create that fails leaves no file it made (it
// removes the file if it created it).
func Create(path string) (*Store, error) {
	lock, err := store.Lock(path, perm)
	if err != nil {
		return nil, fmt.Errorf("csvstore: create: %w", err)
	}
	// fail undoes what Create made: the file, or the bytes it wrote into
	// an empty one (undo), not a file it found holding bytes.
	fail := func(f *os.File, undo bool, err error) (*Store, error) {
		if f != nil {
			if undo && !lock.Created() {
				f.Truncate(0)
			}
			f.Close()
		}
		if undo && lock.Created() {
			os.Remove(path)
		}
		lock.Unlock()
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, perm)
	if err != nil {
		return fail(nil, true, fmt.Errorf("csvstore: create: %w", err))
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(f, true, fmt.Errorf("csvstore: create: %w", err))
	}
	if fi.Size() > 0 {
		return fail(f, false, &store.FileError{Op: "csvstore: create", Path: path, Err: fmt.Errorf("%w (%d bytes)", store.ErrHoldsRecording, fi.Size())})
	}
	live := &liveFile{}
	live.f.Store(f)
	return &Store{path: path, lock: lock, f: f, r: live, live: live, target: store.Target(path), enc: newEncoder()}, nil
}

// liveFile is what a Store from Create reads: the file it writes, which its
// first Append replaces (first). Safe for concurrent use.
type liveFile struct{ f atomic.Pointer[os.File] }

func (l *liveFile) ReadAt(p []byte, off int64) (int, error) { return l.f.Load().ReadAt(p, off) }

// Open opens the recording at path for reading: the bytes it holds now. It
// reads the header and the first row, and the end of the file to find its
// last complete line; the rows are checked (Problems) by the first read
// that needs them (see Store). A file that does not begin with the header,
// or whose META row does not decode or is of another format, is refused
// with an error wrapping store.ErrFormat naming the path.
func Open(path string) (*Store, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("csvstore: open: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("csvstore: open: %w", err)
	}
	s, err := openReader(f, fi.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.f = f
	return s, nil
}

// NewReader reads the recording in the first size bytes of r, as Open
// reads a file: a recording embedded in a program or held in memory. name
// stands for the path in errors and Problems. The Store is read-only; its
// Close does not close r.
func NewReader(r io.ReaderAt, size int64, name string) (*Store, error) {
	return openReader(io.NewSectionReader(r, 0, size), size, name)
}

// openReader opens the recording in the first size bytes of r for reading:
// it checks the header, decodes the META row and finds the last complete
// line.
func openReader(r io.ReaderAt, size int64, path string) (*Store, error) {
	lr := newLineReader(io.NewSectionReader(r, 0, size), size, 0, 0)
	if err := readHeader(lr, path); err != nil {
		return nil, err
	}
	s := &Store{path: path, r: r, readOnly: true, osize: size}
	line, complete, long, err := lr.next()
	switch {
	case err == io.EOF:
	case err != nil:
		return nil, &store.FileError{Op: "csvstore: read", Path: path, Err: err}
	case complete:
		dec := getDecoder(store.Format)
		e, re := decodeLine(dec, line, long, full)
		putDecoder(dec)
		if re == nil && e.Kind == store.KindMeta {
			m, err := store.DecodeMeta(e)
			if err != nil {
				return nil, &store.FileError{Op: "csvstore: open", Path: path, Line: lr.n, Err: err}
			}
			s.meta = m
		}
	}
	if s.oend, err = lastLineEnd(r, size); err != nil {
		return nil, &store.FileError{Op: "csvstore: read", Path: path, Err: err}
	}
	return s, nil
}

// readHeader reads the first line and checks that it is the header.
func readHeader(lr *lineReader, path string) error {
	line, complete, _, err := lr.next()
	switch {
	case err == io.EOF:
		return &store.FileError{Op: "csvstore: open", Path: path, Err: fmt.Errorf("%w: empty file, no CSV header", store.ErrFormat)}
	case err != nil:
		return &store.FileError{Op: "csvstore: open", Path: path, Err: err}
	case !complete || !bytes.Equal(line, headerLine):
		return &store.FileError{Op: "csvstore: open", Path: path,
			Err: fmt.Errorf("%w: first line is %q, want the header %q", store.ErrFormat, abbrev(line), Header)}
	}
	return nil
}

// lastLineEnd returns the offset just after the last '\n' in the first size
// bytes of r (the header's, at least: readHeader checked it), reading back
// from the end.
func lastLineEnd(r io.ReaderAt, size int64) (int64, error) {
	buf := make([]byte, min(size, readBuffer))
	for end := size; end > 0; {
		n := min(end, int64(len(buf)))
		if _, err := r.ReadAt(buf[:n], end-n); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
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
//
// The first Append writes the header and its rows into a file of its own
// (store.StartPath), with one write call, and renames it over the
// recording's file (store.PlaceStart), which it then holds locked: the
// recording appears whole or not at all (a process killed in its first
// Append leaves the file empty, and at worst that temporary file, which
// no command takes for a recording and the next writer replaces). A first
// Append that fails leaves the file empty, and the next tries again.
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
	if s.size == 0 {
		if err := s.first(rows, b); err != nil {
			return &store.FileError{Op: "csvstore: append", Path: s.path, Err: err}
		}
		s.meta = meta
		s.rows += int64(len(rows))
		return nil
	}
	if killpoint.Armed(killpoint.StoreWrite) { // tests only: dormant unless armed
		killpoint.WriteHalfAt(killpoint.StoreWrite, store.LastSeq(rows), s.f, b)
	}
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

// first writes the header and the first rows (their encoding b) into
// store.StartPath, with one write call, and renames it over the recording's
// file, which it then writes and holds locked (s.wmu held).
func (s *Store) first(rows []store.Entry, b []byte) error {
	tmp := store.StartPath(s.target)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	lock, err := store.Lock(tmp, perm)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		lock.Unlock()
		os.Remove(tmp)
		return err
	}
	buf := make([]byte, 0, len(headerLine)+len(b))
	buf = append(append(buf, headerLine...), b...)
	if killpoint.Armed(killpoint.StoreWrite) { // tests only: dormant unless armed
		killpoint.WriteHalfAt(killpoint.StoreWrite, store.LastSeq(rows), f, buf)
	}
	_, err = f.Write(buf)
	if err == nil {
		err = store.PlaceStart(tmp, s.target)
	}
	if err != nil {
		f.Close()
		lock.Unlock()
		os.Remove(tmp)
		return err
	}
	old, oldLock := s.f, s.lock
	s.f, s.lock, s.placed = f, lock, true
	s.live.f.Store(f)
	s.size = int64(len(buf))
	old.Close() // the empty file it replaced: nothing reads it (its extent was 0)
	oldLock.Unlock()
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
	if s.placed { // the rename of the first Append
		if err := store.SyncDir(filepath.Dir(s.target)); err != nil {
			return &store.FileError{Op: "csvstore: sync", Path: s.path, Err: err}
		}
		s.placed = false
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

// extent returns the bytes rows are read from (the header and the complete
// lines) and the bytes readers see (a torn last line after them, for a
// Store from Open).
func (s *Store) extent() (end, size int64, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, 0, &store.FileError{Op: "csvstore: read", Path: s.path, Err: store.ErrClosed}
	}
	if s.readOnly {
		return s.oend, s.osize, nil
	}
	return s.size, s.size, nil
}

// current returns the view of the bytes readers see: the last one computed
// when it is of them, else a scan.
func (s *Store) current() (*view, error) {
	end, size, err := s.extent()
	if err != nil {
		return nil, err
	}
	s.vmu.Lock()
	defer s.vmu.Unlock()
	if s.view != nil && s.view.end == end {
		return s.view, nil
	}
	v, err := scan(s.r, s.path, size)
	if err != nil {
		return nil, err
	}
	s.view = v
	return v, nil
}

// keep makes v, the view of a complete read of the bytes readers see, the
// current one.
func (s *Store) keep(v *view) {
	s.vmu.Lock()
	defer s.vmu.Unlock()
	if s.view == nil || s.view.end != v.end {
		s.view = v
	}
}

// Meta returns the decoded META row (the zero Meta if there is none).
func (s *Store) Meta() store.Meta {
	if !s.readOnly {
		s.wmu.Lock()
		defer s.wmu.Unlock()
	}
	return s.meta // a Store from Open: set by Open, never changed
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

// Verify re-reads the file (the bytes Open saw, or those written so far)
// and checks it again.
func (s *Store) Verify() []store.Problem {
	_, size, err := s.extent()
	var v *view
	if err == nil {
		v, err = scan(s.r, s.path, size)
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
	if err := readHeader(lr, path); err != nil {
		return nil, err
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
			p := tornProblem(path, line, int64(len(line)), lr.n)
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

// tornProblem reports the bytes after the last '\n' (size of them, up to
// MaxLine, beginning with tail). They are never decoded as a row; the
// processor, index and kind are read from its first fields when they are
// readable, as a label for the reader, nothing more.
func tornProblem(path string, tail []byte, size, line int64) store.Problem {
	p := store.Problem{Kind: store.ProblemTorn, File: path, Line: line,
		Detail: fmt.Sprintf("last line has no line terminator: %d bytes set aside", min(size, MaxLine))}
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

// lines yields the complete lines readers see after the header, with
// their numbers, then returns the torn problem if any.
func (s *Store) lines(yield func(line []byte, n int64) bool) (*store.Problem, error) {
	end, size, err := s.extent()
	if err != nil {
		return nil, err
	}
	lr := newLineReader(io.NewSectionReader(s.r, 0, end), end, 0, 0)
	for {
		line, complete, long, err := lr.next()
		if err == io.EOF {
			return s.torn(end, size, lr.n+1)
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

// torn returns the torn problem of the bytes from end to size, the
// physical line n, or nil when there are none.
func (s *Store) torn(end, size, n int64) (*store.Problem, error) {
	if size <= end {
		return nil, nil
	}
	tail := make([]byte, min(size-end, 4096))
	if _, err := s.r.ReadAt(tail, end); err != nil && err != io.EOF {
		return nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: err}
	}
	p := tornProblem(s.path, tail, size-end, n)
	return &p, nil
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

// Streams yields the rows of every processor stream in storage order (the
// order of each stream's Stream) and checks every line as Problems does, in
// one read of the file: an iteration that runs to its end makes the view
// Problems, Processors and Meta's readers answer from. Malformed lines and
// the torn last line are yielded as Stream yields them, to the processor
// whose Stream yields them (store.StreamsReader). A row's Payload and
// Reads are the decoder's: valid until the iteration goes on.
func (s *Store) Streams() iter.Seq2[store.Entry, error] { return s.pass(false) }

// Scan yields every row in storage order as Rows does (malformed lines and
// the torn last line as a zero Entry with their *store.Problem), and checks
// every line as Streams does, in one read of the file: an iteration that
// runs to its end makes the view Problems, Processors and Meta's readers
// answer from. A row's Payload and Reads are the decoder's: valid until the
// iteration goes on (store.StreamsReader).
func (s *Store) Scan() iter.Seq2[store.Entry, error] { return s.pass(true) }

// pass is Streams, or with all, Scan.
func (s *Store) pass(all bool) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		end, size, err := s.extent()
		if err != nil {
			yield(store.Entry{}, err)
			return
		}
		lr := newLineReader(io.NewSectionReader(s.r, 0, size), size, 0, 0)
		if err := readHeader(lr, s.path); err != nil {
			yield(store.Entry{}, err)
			return
		}
		v := &view{end: lr.off}
		c := store.Checker{File: s.path}
		dec := getDecoder(s.format())
		defer putDecoder(dec)
		first := true
		for {
			line, complete, long, err := lr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				yield(store.Entry{}, &store.FileError{Op: "csvstore: read", Path: s.path, Err: err})
				return
			}
			if !complete {
				p := tornProblem(s.path, line, int64(len(line)), lr.n)
				v.torn = &p
				v.size = lr.off + int64(len(line))
				c.Report(p)
				if all || p.Processor != "" {
					q := p
					e := store.Entry{Processor: p.Processor}
					if all {
						e = store.Entry{}
					}
					if !yield(e, &q) {
						return
					}
				}
				break
			}
			v.end = lr.off
			mode := borrow // yielded, then forgotten: store.StreamsReader
			switch {
			case first:
				mode = full // DecodeMeta reads the detail
			case !all && len(line) > 0 && line[0] == ',':
				mode = check // a row of no stream: checked, not yielded
			}
			e, re := decodeLine(dec, line, long, mode)
			if re != nil {
				first = false
				p := rowProblem(s.path, re, lr.n)
				c.Report(p)
				if all {
					if !yield(store.Entry{}, &p) {
						return
					}
				} else if owner := streamOf(line, long, re); owner != "" {
					if !yield(store.Entry{Processor: owner}, &p) {
						return
					}
				}
				continue
			}
			if first && e.Kind == store.KindMeta {
				if _, err := store.DecodeMeta(e); err != nil {
					yield(store.Entry{}, &store.FileError{Op: "csvstore: open", Path: s.path, Line: lr.n, Err: err})
					return
				}
			}
			first = false
			c.Add(e, lr.n)
			if (all || e.Processor != "") && !yield(e, nil) {
				return
			}
		}
		if v.torn == nil {
			v.size = v.end
		}
		if v.end != end {
			// The file changed under the Store: the view is not of the
			// bytes readers see.
			yield(store.Entry{}, &store.FileError{Op: "csvstore: read", Path: s.path, Err: fmt.Errorf("%w: file shorter than when opened", io.ErrUnexpectedEOF)})
			return
		}
		v.meta = s.Meta()
		v.procs = c.Processors()
		v.problems = c.Finish()
		s.keep(v)
	}
}

// streamOf returns the processor whose Stream yields the malformed line
// (re its error; long: longer than MaxLine), as Stream decides it: the first
// field when the line begins with it as Stream's prefix test sees it, else
// the processor the decoder could read; "" for none.
func streamOf(line []byte, long bool, re *RowError) string {
	if long {
		return re.Processor
	}
	if name, ok := firstField(line); ok && name != "" && bytes.HasPrefix(line, fieldPrefix(name)) {
		return name
	}
	return re.Processor
}

// firstField returns the text of the first CSV field of line, if it is
// followed by a ','.
func firstField(line []byte) (string, bool) {
	if len(line) == 0 || line[0] != '"' {
		i := bytes.IndexByte(line, ',')
		if i < 0 {
			return "", false
		}
		return string(line[:i]), true
	}
	var b []byte
	for i := 1; i < len(line); i++ {
		if line[i] != '"' {
			b = append(b, line[i])
			continue
		}
		switch {
		case i+1 < len(line) && line[i+1] == '"':
			b = append(b, '"')
			i++
		case i+1 < len(line) && line[i+1] == ',':
			return string(b), true
		default:
			return "", false
		}
	}
	return "", false
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
