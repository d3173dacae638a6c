package filesource

import (
	"hash/fnv"
	"io"
)

// fingerprint is the FNV-1a 64 hash of the first n bytes of r, read from r
// itself: the tests' own reckoning of the fingerprint a pointer must hold
// (the source hashes the bytes it read, fingerprintOf).
func fingerprint(r io.ReaderAt, n int64) (uint64, error) {
	h := fnv.New64a()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, n)); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}
