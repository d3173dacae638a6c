//go:build !unix

package filesource

import "os"

// lockFile is a no-op where flock does not exist: two runs on one pointer
// are not detected there.
func lockFile(f *os.File) error { return nil }

// openInput opens path for reading.
func openInput(path string) (*os.File, error) { return os.Open(path) }
