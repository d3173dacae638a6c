// Package atomicfile writes files whole or not at all: a temporary file
// beside the target, fsynced, renamed over it, and the directory fsynced so
// the rename survives a power loss. A crash leaves either the old file or
// the new one, and at worst a hidden temporary file that no command reads.
//
// The functions are safe for concurrent use on different paths; writers of
// one path must exclude each other (blackbox's commands lock their outputs).
package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Write writes path whole or not at all: write fills a temporary file in
// path's directory whose name begins with "."+base(path)+infix, which is
// fsynced and renamed over path; then the directory is fsynced. On an error
// the temporary file is removed and path is unchanged. The file gets mode
// 0o600, os.CreateTemp's.
func Write(path, infix string, write func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+infix+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = SyncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// SyncDir fsyncs a directory, so that a rename or a link in it is durable.
// A file system that cannot sync a directory is not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}

// SyncFile fsyncs the file at path as it is on disk now (for a file another
// handle wrote and closed).
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
