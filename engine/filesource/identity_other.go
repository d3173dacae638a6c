//go:build !unix

package filesource

import "os"

// identity is unknown (0) on platforms without device and inode numbers:
// only the fingerprint and the size decide whether a file was replaced.
func identity(fi os.FileInfo) uint64 { return 0 }
