//go:build !unix

package store

import (
	"os"
)

// FileLock would be an exclusive OS lock on a recording's file; on this
// platform there is none and a recording is not protected against a second
// writer. It is not safe for concurrent use.
type FileLock struct{}

// Lock creates the file at path if it does not exist and returns a
// FileLock that locks nothing (no flock on this platform).
func Lock(path string, perm os.FileMode) (*FileLock, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, perm)
	if err != nil {
		return nil, &FileError{Op: "store: lock", Path: path, Err: err}
	}
	f.Close()
	return &FileLock{}, nil
}

// Unlock does nothing.
func (l *FileLock) Unlock() error { return nil }
