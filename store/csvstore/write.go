package csvstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/blackbox-audit/blackbox/internal/atomicfile"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// Append writes rows with one write call, all or none of them: every row is
// checked first (store.Validate, store.CheckRowSize: a row whose line would
// be longer than store.MaxRowSize is refused with a *store.SizeError) and
// nothing of the call is written if one fails. Payloads are written in the
// format of the recording's META row (store.PayloadText). A write that
// fails (a full disk) is taken back: the file is truncated to its size
// before the call, and every later Append returns that error. Only a
// process killed in the write, or a truncation that fails too (its error
// joins the write's), leaves the file ending with a part of the call's
// rows, its last line perhaps partial.
//
// The first Append writes the header and its rows into a file of its own
// (store.StartPath), with one write call, and renames it over the
// recording's file (store.PlaceStart), which it then holds locked: the
// recording appears whole or not at all (a process killed in its first
// Append leaves the file empty, and at worst that temporary file, which
// no command takes for a recording and the next writer replaces). A first
// Append that fails leaves the file empty, and the next tries again.
func (s *file) Append(rows ...store.Entry) error {
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
	if err != nil {
		s.name(err)
		// All or none: the part written is taken back, so that the file
		// holds no row of a call that failed (a row is a claim: the
		// recorder, and an outbox after it, take none of them for
		// written).
		if n > 0 {
			if terr := s.f.Truncate(s.size); terr != nil {
				s.size += int64(n)
				err = errors.Join(err, fmt.Errorf("taking back the %d bytes written of the rows: %w", n, terr))
			}
		}
		s.werr = &store.FileError{Op: "csvstore: append", Path: s.path, Err: err}
		return s.werr
	}
	s.size += int64(n)
	if s.rows == 0 {
		s.meta = meta
	}
	s.rows += int64(len(rows))
	return nil
}

// first writes the header and the first rows (their encoding b) into
// store.StartPath, with one write call, and renames it over the recording's
// file, which it then writes and holds locked (s.wmu held).
func (s *file) first(rows []store.Entry, b []byte) error {
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

// name makes an error of the file's name the recording's file, not the
// temporary name the first Append opened it by (store.StartPath).
func (s *file) name(err error) {
	if pe, ok := err.(*fs.PathError); ok {
		pe.Path = s.target
	}
}

// Sync fsyncs the file. It is a no-op on a file from Open.
func (s *file) Sync() error {
	if s.readOnly {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return &store.FileError{Op: "csvstore: sync", Path: s.path, Err: store.ErrClosed}
	}
	if err := s.f.Sync(); err != nil {
		s.name(err)
		return &store.FileError{Op: "csvstore: sync", Path: s.path, Err: err}
	}
	if s.placed { // the rename of the first Append
		if err := atomicfile.SyncDir(filepath.Dir(s.target)); err != nil {
			return &store.FileError{Op: "csvstore: sync", Path: s.path, Err: err}
		}
		s.placed = false
	}
	return nil
}

// Close closes the file. It does not fsync: call Sync first for
// durability. Reads after Close return store.ErrClosed.
func (s *file) Close() error {
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
