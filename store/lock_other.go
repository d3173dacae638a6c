//go:build !unix

package store

import (
	"errors"
	"io/fs"
	"os"
)

// FileLock would be an exclusive OS lock on a recording's file; on this
// platform there is none and a recording is not protected against a second
// writer. It is not safe for concurrent use.
type FileLock struct{ created bool }

// Lock creates the file at path if it does not exist (Created then
// reports true) and returns a FileLock that locks nothing (no flock on
// this platform).
func Lock(path string, perm os.FileMode) (*FileLock, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, perm)
	created := err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE, perm)
	}
	if err != nil {
		return nil, &FileError{Op: "store: lock", Path: path, Err: err}
	}
	f.Close()
	return &FileLock{created: created}, nil
}

// Created reports whether Lock created the file: it did not exist before,
// so a writer whose creation fails removes it (the writers' Create).
func (l *FileLock) Created() bool { return l != nil && l.created }

// Unlock does nothing.
func (l *FileLock) Unlock() error { return nil }
