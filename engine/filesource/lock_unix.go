//go:build unix

package filesource

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f without waiting: ErrLocked when
// another open file description holds it.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		}
		return err
	}
}

// openInput opens path for reading without blocking in open(2) (a FIFO
// opened for reading would wait for a writer; O_NONBLOCK has no effect on a
// regular file's reads). The caller checks that it is a regular file.
func openInput(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
