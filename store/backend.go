package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Backend is the I/O of one open recording, what a backend package
// (csvstore, sqlitestore) provides: it writes rows and reads them back as
// stored. The logic is store's: Recording, the one checked reader built on
// a Backend, decodes META, runs the Checker, keeps the view of what a pass
// found and answers Meta, Processors, Problems, Stream and Streams from it.
//
// A Backend from a Driver's Open reads the recording as it was when opened
// and refuses Append (ErrReadOnly); one from Create reads what it has
// written so far. A Backend is safe for concurrent use: reads may run while
// one goroutine appends.
type Backend interface {
	// Append writes rows whole or not at all, each checked first
	// (ValidateIn, CheckRowSize) in the format of the recording's META row.
	Append(rows ...Entry) error
	// Sync forces the rows appended to stable storage; a no-op on a
	// Backend opened for reading.
	Sync() error
	// Close releases the file; reads after it fail with ErrClosed.
	Close() error
	// Scan yields every row in storage order, each with its Line; a row
	// that cannot be read (a malformed row, the torn last line) with its
	// *Problem and, as its Entry's Processor, the stream it belongs to
	// ("" for none). A backend that checks its file whole (SQLite's page
	// check) does so at the end of a pass of mode ScanWhole and yields what
	// it finds last, as an unreadable Problem. An I/O error is yielded once
	// and ends the iteration. The *Row is the backend's, valid until the
	// iteration goes on.
	Scan(mode ScanMode) iter.Seq2[*Row, error]
	// Journal returns the JOURNAL row of (feed, seq), or an error wrapping
	// ErrMissingJournal. Lookups of one feed in increasing seq should be
	// streaming.
	Journal(feed string, seq int64) (Entry, error)
}

// StreamSeeker is the one optional method of a Backend: the rows of one
// processor stream (Row as Scan yields them, whole and owned), read faster
// than a Scan that skips the others (an index, a cheap prefix test).
// Recording.Stream uses it when the Backend has it.
type StreamSeeker interface {
	Stream(processor string) iter.Seq2[*Row, error]
}

// Row is a row as a Backend's Scan yields it.
type Row struct {
	// Line locates the row in Problems: the CSV physical line (the header
	// is line 1), the SQLite rowid, the Memory position (META is 1).
	Line int64
	// Entry is the row; for a row that cannot be read, only its Processor.
	Entry Entry
	// Problem is why the row cannot be read; nil for a row read.
	Problem *Problem
}

// ScanMode says what a Scan's reader needs of the rows, so that a backend
// decodes no more than that. A backend may always yield more (whole, owned
// rows).
type ScanMode uint8

const (
	// ScanBorrow: the Payload and Reads of a yielded row may be the
	// backend's buffers, valid until the iteration goes on.
	ScanBorrow ScanMode = 1 << iota
	// ScanStreams: of the rows of no stream (JOURNAL, COMMIT) but the
	// first, only what the Checker reads is needed (names, kind, numbers).
	ScanStreams
	// ScanCheck: of every row but the first, only what the Checker reads
	// is needed.
	ScanCheck
	// ScanWhole: the pass checks the recording: the backend checks its
	// file itself too, at the end of the pass.
	ScanWhole
)

// Driver is a backend as store.Open and store.Create find it: registered by
// its package (Register) and chosen by the head of a file to read or the
// extension of a file to create.
type Driver struct {
	// Name names the backend ("csv", "sqlite"): Create's backend argument
	// and Sniff's answer.
	Name string
	// Ext is the extension (".csv") of the paths Create gives to this
	// backend; Default marks the backend of a path no driver's Ext claims.
	Ext     string
	Default bool
	// Sniff reports whether a file beginning with head (up to 256
	// bytes: fewer for a shorter file) is a recording of this backend.
	Sniff func(head []byte) bool
	// Schemes lists the URL schemes ("postgres") of the recordings of a
	// backend that keeps them in a server, not in files: Open, Create and
	// Sniff hand a path that begins with one of them and "://" to this
	// driver, touching no file (URLBackend).
	Schemes []string
	// Open opens a recording for reading; Create creates a new one (see
	// Backend).
	Open   func(path string) (Backend, error)
	Create func(path string) (Backend, error)
}

// sniffLen is the number of bytes of a file Open hands to Driver.Sniff.
const sniffLen = 256

var drivers struct {
	sync.RWMutex
	list []Driver
}

// Register makes a backend known to Open, Create and Sniff. A backend
// package calls it from its init; it never panics: a second driver of the
// same name replaces the first.
func Register(d Driver) {
	drivers.Lock()
	defer drivers.Unlock()
	drivers.list = slices.DeleteFunc(drivers.list, func(o Driver) bool { return o.Name == d.Name })
	drivers.list = append(drivers.list, d)
}

func registered() []Driver {
	drivers.RLock()
	defer drivers.RUnlock()
	return slices.Clone(drivers.list)
}

// fileDrivers are the registered backends of files: those that claim no
// URL scheme.
func fileDrivers() []Driver {
	return slices.DeleteFunc(registered(), func(d Driver) bool { return len(d.Schemes) > 0 })
}

func names(ds []Driver) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Name)
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// Sniff returns the backend whose recordings begin as the file at path
// does, "" for none (an empty file, another file). It reads sniffLen bytes
// at most. A file that cannot be read is an error.
func Sniff(path string) (string, error) {
	if d := urlDriver(path); d != nil {
		return d.Name, nil
	}
	d, n, _, err := sniff(path)
	if err != nil || n == 0 || d == nil {
		return "", err
	}
	return d.Name, nil
}

// sniff returns the driver of the file at path (nil: none), the number of
// bytes it read and its first line (at most 40 bytes of it), for errors.
func sniff(path string) (*Driver, int, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, "", err
	}
	defer f.Close()
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, 0, "", err
	}
	head = head[:n]
	first, _, _ := bytes.Cut(head[:min(n, 40)], []byte("\n"))
	for _, d := range registered() {
		if n > 0 && d.Sniff(head) {
			return &d, n, string(first), nil
		}
	}
	return nil, n, string(first), nil
}

// URLBackend returns the name of the registered backend that keeps the
// recording path names in a server ("postgres" for postgres://...): a
// path beginning with one of its Schemes and "://". It returns "" for a
// file path (or a URL of no registered backend).
func URLBackend(path string) string {
	if d := urlDriver(path); d != nil {
		return d.Name
	}
	return ""
}

// urlDriver returns the driver whose Schemes claim path, or nil.
func urlDriver(path string) *Driver {
	scheme, _, ok := strings.Cut(path, "://")
	if !ok {
		return nil
	}
	for _, d := range registered() {
		for _, s := range d.Schemes {
			if strings.EqualFold(s, scheme) {
				return &d
			}
		}
	}
	return nil
}

// NamesPath reports whether err already names the file path: a *FileError
// or a *Problem of path, or an *fs.PathError of path somewhere in its chain
// (callers that add a type of their own check it too).
func NamesPath(err error, path string) bool {
	var (
		fe *FileError
		p  *Problem
		pe *fs.PathError
	)
	return errors.As(err, &fe) && fe.Path == path || errors.As(err, &p) && p.File == path ||
		errors.As(err, &pe) && pe.Path == path
}

// CloseAll closes readers opened together (a command's runs), ignoring
// their errors: a reader holds nothing a Close could lose.
func CloseAll(rs []Reader) {
	for _, r := range rs {
		r.Close()
	}
}

// OpenAll opens readers together (a command's runs): open of each path, in
// order. When one fails, it closes those already open (CloseAll) and
// returns that error.
func OpenAll(paths []string, open func(path string) (Reader, error)) ([]Reader, error) {
	var rs []Reader
	for _, p := range paths {
		r, err := open(p)
		if err != nil {
			CloseAll(rs)
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// Open opens the recording at path for reading, with the registered
// backend whose Schemes claim it (a URL: URLBackend) or else whose
// recordings begin as it does, whatever its extension. A
// missing file is an error wrapping fs.ErrNotExist; an empty file, or one
// no backend recognises, a *FileError wrapping ErrFormat.
func Open(path string) (*Recording, error) {
	if d := urlDriver(path); d != nil {
		b, err := d.Open(path)
		if err != nil {
			return nil, err
		}
		return OpenBackend(b, path)
	}
	d, n, head, err := sniff(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("store: open: %w", err)
	case n == 0:
		return nil, &FileError{Op: "store: open", Path: path, Err: fmt.Errorf("%w: empty file", ErrFormat)}
	case d == nil:
		return nil, &FileError{Op: "store: open", Path: path,
			Err: fmt.Errorf("%w: it begins with %q, not as a recording of a known backend (%s) does", ErrFormat, head, names(fileDrivers()))}
	}
	b, err := d.Open(path)
	if err != nil {
		return nil, err
	}
	return OpenBackend(b, path)
}

// Create creates a new recording at path with the registered backend
// named backend or, for "", the one whose Schemes claim path (a URL:
// URLBackend), else the one whose Ext is path's extension (case aside),
// else the Default one. An unknown name is an error wrapping
// ErrFormat.
func Create(path, backend string) (*Recording, error) {
	ds := registered()
	if d := urlDriver(path); d != nil {
		if backend != "" && backend != d.Name {
			return nil, fmt.Errorf("store: create %s: %w: a %s URL, not a recording of backend %q", path, ErrFormat, d.Name, backend)
		}
		b, err := d.Create(path)
		if err != nil {
			return nil, err
		}
		return CreateBackend(b, path), nil
	}
	var d *Driver
	for i := range ds {
		switch {
		case backend != "" && ds[i].Name == backend:
			d = &ds[i]
		case backend == "" && ds[i].Ext != "" && strings.EqualFold(ds[i].Ext, filepath.Ext(path)):
			d = &ds[i]
		case backend == "" && ds[i].Default && d == nil:
			d = &ds[i]
		}
	}
	if d == nil {
		return nil, fmt.Errorf("store: create %s: %w: no backend %q (known: %s)", path, ErrFormat, backend, names(ds))
	}
	b, err := d.Create(path)
	if err != nil {
		return nil, err
	}
	return CreateBackend(b, path), nil
}
