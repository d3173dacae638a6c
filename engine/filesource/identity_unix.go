//go:build unix

package filesource

import (
	"encoding/binary"
	"hash/fnv"
	"os"
	"syscall"
)

// identity hashes a file's device and inode (FNV-1a 64); 0 when unknown.
func identity(fi os.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(st.Dev))
	binary.LittleEndian.PutUint64(b[8:], uint64(st.Ino))
	h := fnv.New64a()
	h.Write(b[:])
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}
