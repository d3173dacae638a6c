package store

import (
	"os"
	"path/filepath"
)

// startSuffix ends the name of the temporary file of a recording's first
// Append (StartPath). It holds ".blackbox-tmp", which marks the temporary
// files no blackbox command takes for a recording.
const startSuffix = ".blackbox-tmp-start"

// Target is the file a writer of a recording at path writes: path with its
// symlinks resolved (a recording reached through a symlink is written where
// the link points, and its first Append renamed over that file, not over
// the link), or path itself when it cannot be resolved.
func Target(path string) string {
	if t, err := filepath.EvalSymlinks(path); err == nil {
		return t
	}
	return path
}

// StartPath is the temporary file in which a writer (csvstore,
// sqlitestore) builds the first Append of a new recording at path (a
// Target), with the CSV header or the SQLite schema, before PlaceStart
// renames it over path: DIR/.NAME.blackbox-tmp-start, beside it (the rename
// stays on one file system). The writer holds path's lock, so one writer at
// most uses it; a stale one, left by a writer killed in its first Append,
// is replaced.
func StartPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+startSuffix)
}

// PlaceStart renames tmp, a recording's first Append complete in
// StartPath(path), over path, after giving it path's permission bits: the
// recording appears at path whole (the header or schema and the rows) or
// not at all, and a process killed before the rename leaves path as it
// was (empty). The caller holds tmp locked (Lock), so that path names a
// locked file throughout. The rename is durable once path's directory is
// synced (internal/atomicfile.SyncDir).
func PlaceStart(tmp, path string) error {
	if fi, err := os.Stat(path); err == nil {
		if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return os.Rename(tmp, path)
}
