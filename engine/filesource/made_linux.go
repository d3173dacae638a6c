//go:build linux

package filesource

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// madeAt is when the file at name was made: its birth time (statx
// STATX_BTIME) where the file system keeps one, else its last
// modification time (a copy is written when it is made; see
// findStoppedCopy for what that misses).
func madeAt(name string) (time.Time, error) {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, name, 0, unix.STATX_BTIME|unix.STATX_MTIME, &st)
	if err != nil {
		return time.Time{}, &os.PathError{Op: "statx", Path: name, Err: err}
	}
	if st.Mask&unix.STATX_BTIME != 0 {
		return time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)), nil
	}
	return time.Unix(st.Mtime.Sec, int64(st.Mtime.Nsec)), nil
}

// bornAt is the birth time of the file at name (statx STATX_BTIME), and
// whether the file system keeps one (a modification time tells nothing of
// when a file was made: see copiedFileGone).
func bornAt(name string) (time.Time, bool) {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, name, 0, unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}, false
	}
	return time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)), true
}
