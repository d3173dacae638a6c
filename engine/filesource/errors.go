package filesource

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package, for errors.Is.
var (
	// ErrStrategy: a read strategy name or value that does not exist.
	// Callers of ParseStrategy and New match it with errors.Is.
	ErrStrategy = errors.New("filesource: unknown read strategy")
	// ErrOptions: New was given an unusable path or option. Callers of
	// New match it with errors.Is.
	ErrOptions = errors.New("filesource: bad options")
	// ErrRunning: Run was called while the source was already running.
	// Callers of Run match it with errors.Is.
	ErrRunning = errors.New("filesource: source already running")
	// ErrPointerLayout: a pointer file that does not hold a complete header
	// of a known layout (ReadPointer). Callers of ReadPointer match it with
	// errors.Is.
	ErrPointerLayout = errors.New("filesource: pointer file of an unknown layout")
	// ErrLocked: another run (a Source in this or another process) holds
	// the pointer file's lock. The *FileError wrapping it names the
	// pointer file.
	ErrLocked = errors.New("filesource: pointer is locked by another run")
	// ErrNotRegular: the input path names something other than a regular
	// file (a FIFO, a device, a directory), at the start or at a reopen.
	// Run's error wraps it when the input is not one at the start; callers
	// match it with errors.Is.
	ErrNotRegular = errors.New("filesource: not a regular file")
	// ErrRewind: a backwards seek the source cannot apply (the
	// committer's CheckRewind and Rewind, engine.Rewinder): a target of
	// another file or epoch than the one the source reads and its pointer
	// describes, a group whose progress the pointer file cannot keep. The
	// engine refuses the seek with engine.ErrSeekUnsupported wrapping it;
	// callers match either with errors.Is.
	ErrRewind = errors.New("filesource: cannot move back")
)

// FileError is an I/O failure on the input file or the pointer file: Op says
// what was being done, Path names the file. Unwrap gives the cause
// (errors.Is(err, os.ErrNotExist) works through it). A FileError is not
// modified once returned: safe to share.
type FileError struct {
	Op   string
	Path string
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("filesource: %s %s: %v", e.Op, e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

func fileErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &FileError{Op: op, Path: path, Err: err}
}
