package csvstore

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/blackbox-audit/blackbox/store"
)

// file is the store.Backend of a CSV recording: one file, a header line,
// one row per line.
//
// A file from Create appends (Append, Sync) and reads what it has written
// so far; a file from Open reads the file as it was when opened (its bytes
// then: the complete lines, and a last line without '\n' is the torn
// Problem) and refuses Append with store.ErrReadOnly.
//
// A file is safe for concurrent use: any number of goroutines may read
// (Scan, Stream, Journal) while one goroutine appends; Append calls are
// serialised. Each iterator is used by one goroutine.
type file struct {
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
	werr   error // a failed write (taken back: Append): every later Append returns it
	closed bool

	jmu     sync.Mutex
	cursors map[string]*cursor
}

// perm is the permissions of a new recording file (before umask).
const perm os.FileMode = 0o644

// Create creates a new recording at path (store.Create calls it for a path
// ending in .csv), an empty file until the first
// Append: that one writes the header with its rows, whole or not at all
// (see Append). It takes the file's exclusive lock (store.Lock) first and
// holds it until Close: a file another writer holds is refused at once
// with an error wrapping store.ErrLocked. It refuses a file that already
// holds bytes (an error wrapping store.ErrHoldsRecording naming the path)
// and never truncates one. A Create that fails leaves no file it made (it
// removes the file if it created it).
func Create(path string) (*store.Recording, error) {
	f, err := create(path)
	if err != nil {
		return nil, err
	}
	return store.CreateBackend(f, path), nil
}

func create(path string) (*file, error) {
	lock, err := store.Lock(path, perm)
	if err != nil {
		return nil, fmt.Errorf("csvstore: create: %w", err)
	}
	// fail undoes what Create made: the file, or the bytes it wrote into
	// an empty one (undo), not a file it found holding bytes.
	fail := func(f *os.File, undo bool, err error) (*file, error) {
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
	return &file{path: path, lock: lock, f: f, r: live, live: live, target: store.Target(path), enc: newEncoder()}, nil
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
func Open(path string) (*store.Recording, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	return store.OpenBackend(f, path)
}

func open(path string) (*file, error) {
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
func NewReader(r io.ReaderAt, size int64, name string) (*store.Recording, error) {
	f, err := openReader(io.NewSectionReader(r, 0, size), size, name)
	if err != nil {
		return nil, err
	}
	return store.OpenBackend(f, name)
}

func init() {
	store.Register(store.Driver{Name: "csv", Ext: ".csv", Sniff: sniff,
		Open:   func(path string) (store.Backend, error) { return open(path) },
		Create: func(path string) (store.Backend, error) { return create(path) }})
}

// sniff reports whether a file beginning with head is a CSV recording: it
// begins with the header line.
func sniff(head []byte) bool { return bytes.HasPrefix(head, headerLine) }

// openReader opens the recording in the first size bytes of r for reading:
// it checks the header, decodes the META row and finds the last complete
// line.
func openReader(r io.ReaderAt, size int64, path string) (*file, error) {
	lr := newLineReader(io.NewSectionReader(r, 0, size), size, 0, 0)
	if err := readHeader(lr, path); err != nil {
		return nil, err
	}
	s := &file{path: path, r: r, readOnly: true, osize: size}
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
