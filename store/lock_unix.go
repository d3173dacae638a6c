//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// FileLock is an exclusive OS lock (flock LOCK_EX) on a recording's file,
// held from Lock to Unlock. Locks conflict between open files, so two
// stores of one process conflict as two processes do. A FileLock is not
// safe for concurrent use; Unlock is idempotent.
type FileLock struct {
	f       *os.File
	created bool
}

// Lock takes the exclusive lock of the recording at path, creating the
// file if it does not exist (empty, with perm; Created then reports true).
// It does not wait: a file another FileLock holds fails at once with an
// error wrapping ErrLocked naming the file. Writers (csvstore.Create,
// sqlitestore.Create) hold one while they are open; a command that removes
// or replaces a recording takes one first. A Lock that fails leaves no
// file it created, unless another process locked it meanwhile.
//
// The lock counts only if path still names the file locked: a writer's
// first Append replaces its file by another it holds locked (PlaceStart),
// so a Lock that opened the file replaced, and locked it once its writer let
// it go, tries again, and finds the new file locked.
func Lock(path string, perm os.FileMode) (*FileLock, error) {
	for range 10 {
		f, created, err := openOrCreate(path, perm)
		if err != nil {
			return nil, &FileError{Op: "store: lock", Path: path, Err: err}
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &FileError{Op: "store: lock", Path: path, Err: ErrLocked}
			}
			if created {
				os.Remove(path)
			}
			return nil, &FileError{Op: "store: lock", Path: path, Err: err}
		}
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			return &FileLock{f: f, created: created}, nil
		}
		f.Close()
	}
	return nil, &FileError{Op: "store: lock", Path: path, Err: fmt.Errorf("%w (the file keeps being replaced)", ErrLocked)}
}

// openOrCreate opens path read-only, creating it (empty, with perm) if it
// does not exist; created reports whether this call created it. A name
// that exists but cannot be opened as it is (a dangling symbolic link, a
// file removed in between) is opened creating, as created false: only a
// file this call surely made counts as created.
func openOrCreate(path string, perm os.FileMode) (f *os.File, created bool, err error) {
	f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, perm)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return f, err == nil, err
	}
	f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE, perm)
	return f, false, err
}

// Created reports whether Lock created the file: it did not exist before,
// so a writer whose creation fails removes it (the writers' Create).
func (l *FileLock) Created() bool { return l != nil && l.created }

// Unlock releases the lock.
func (l *FileLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the file releases its flock
	l.f = nil
	return err
}
