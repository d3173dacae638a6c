//go:build !linux

package filesource

import (
	"os"
	"time"
)

// madeAt is when the file at name was made, as far as this platform
// tells: its last modification time (a copy is written when it is made;
// see findStoppedCopy for what that misses).
func madeAt(name string) (time.Time, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// bornAt reports no birth time: this platform does not tell one.
func bornAt(string) (time.Time, bool) { return time.Time{}, false }
