package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/atomicfile"
	"github.com/blackbox-audit/blackbox/store"
)

// This file holds the checks every command makes on its paths before any
// work starts (two names for one file, outputs that cannot be written, a
// store that is not a recording), the locks `run` and `convert` hold on
// their outputs, and the atomic writes and temporary files of the commands
// that write whole files.

// errLocked: another blackbox command holds the lock of a file.
var errLocked = errors.New("cli: in use by another blackbox command")

// pathArg is one file a command reads or writes, with the flag or
// argument that names it ("--store", "SRC").
type pathArg struct {
	flag  string
	path  string
	write bool // created, replaced or appended to by the command
}

// canonical is path made absolute and cleaned, its symlinks resolved: the
// whole path's when it exists, else its directory's.
func canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(d, filepath.Base(abs))
	}
	return abs
}

// sameFile reports whether a and b name one file: the same device and
// inode when both exist, else the same canonical path.
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	return canonical(a) == canonical(b)
}

// checkDistinct refuses (a usage error naming both flags and the path)
// two of args, with a path, that name one file.
func checkDistinct(args []pathArg) error {
	for i := range args {
		for j := i + 1; j < len(args); j++ {
			a, b := args[i], args[j]
			if a.path == "" || b.path == "" {
				continue
			}
			if sameFile(a.path, b.path) {
				return usagef("%s %s and %s %s name the same file", a.flag, a.path, b.flag, b.path)
			}
		}
	}
	return nil
}

// checkWritable checks that the command can write the output a before any
// work starts: a regular file that can be opened for writing, or nothing
// yet; in a directory where files can be created (outputs are written
// through a temporary file beside them, and their locks live there too).
// The error names the user's path.
func checkWritable(a pathArg, what string) error {
	if err := checkFile(a.path, what, true); err != nil {
		return err
	}
	dir := filepath.Dir(a.path)
	if err := checkDir(dir); err != nil {
		return &fileError{a.path, fmt.Errorf("%s: %w", a.flag, err)}
	}
	if f, err := os.OpenFile(a.path, os.O_WRONLY, 0); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return &fileError{a.path, fmt.Errorf("%s: cannot be written: %w", a.flag, unwrapPathError(err))}
	}
	probe, err := os.CreateTemp(dir, ".blackbox-probe-*")
	if err != nil {
		return &fileError{a.path, fmt.Errorf("%s: cannot create files in %s: %w", a.flag, dir, unwrapPathError(err))}
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// checkReplaceable checks the store a recording is to be written to: a
// missing or empty file can be created; a file that opens as a recording
// (CSV or SQLite) is refused unless force (store.ErrHoldsRecording); any
// other file is refused even with force (store.ErrFormat): --force replaces
// recordings, never other files. It reports whether an old recording is to
// be removed.
func checkReplaceable(path string, force bool) (replace bool, err error) {
	if !holdsBytes(path) {
		return false, nil
	}
	r, _, err := openStore(path)
	if err != nil {
		if errors.Is(err, store.ErrFormat) {
			return false, &fileError{path, fmt.Errorf("%w: refusing to write over it (--force replaces only a recording)", store.ErrFormat)}
		}
		return false, fmt.Errorf("%w (refusing to write over a file that cannot be read as a recording)", err)
	}
	r.Close()
	if !force {
		return false, &fileError{path, fmt.Errorf("%w (use --force to replace it)", store.ErrHoldsRecording)}
	}
	return true, nil
}

// lockSuffix names the lock file of an output: PATH.blackbox-lock, beside
// it.
const lockSuffix = ".blackbox-lock"

// fileLock is an exclusive lock (flock(2), LOCK_EX|LOCK_NB) a command holds
// on one of its outputs for as long as it runs. The lock is taken on a file
// of its own, the output's canonical path plus lockSuffix, because outputs
// are replaced by rename (a lock on the output itself would be lost with
// its inode). Release removes the lock file; a process killed while holding
// one leaves an empty lock file behind, which the next command reuses (the
// kernel released the lock with the process). A fileLock is owned by one
// goroutine.
type fileLock struct {
	path string
	f    *os.File
}

// lockOutput takes the lock of output a, or fails at once with an error
// wrapping errLocked that names the output and its lock file.
func lockOutput(a pathArg) (*fileLock, error) {
	lp := canonical(a.path) + lockSuffix
	for range 10 {
		f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, &fileError{a.path, fmt.Errorf("%s: its lock %s: %w", a.flag, lp, unwrapPathError(err))}
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &fileError{a.path, fmt.Errorf("%s: %w (its lock %s is held)", a.flag, errLocked, lp)}
			}
			return nil, &fileError{a.path, fmt.Errorf("%s: locking %s: %w", a.flag, lp, err)}
		}
		// The holder before us may have removed the file it locked: the
		// lock counts only if the path still names the file we locked.
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(lp)
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			return &fileLock{path: lp, f: f}, nil
		}
		f.Close()
	}
	return nil, &fileError{a.path, fmt.Errorf("%s: %w (its lock %s keeps being replaced)", a.flag, errLocked, lp)}
}

// release removes the lock file and drops the lock.
func (l *fileLock) release() {
	os.Remove(l.path)
	l.f.Close()
}

// lockOutputs locks every output of args with a path, in order; on failure
// it releases what it took. release drops them all.
func lockOutputs(args []pathArg) (release func(), err error) {
	var held []*fileLock
	release = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].release()
		}
		held = nil
	}
	for _, a := range args {
		if a.path == "" || !a.write {
			continue
		}
		l, err := lockOutput(a)
		if err != nil {
			release()
			return func() {}, err
		}
		held = append(held, l)
	}
	return release, nil
}

// checkPointerFree fails at once, with an error wrapping
// filesource.ErrLocked that names the pointer file, when another process
// holds the pointer's own lock (the file source's: a program of its own
// reading the file, which takes no lock of ours), so that the run is
// refused before it writes anything. It only probes the lock (closing the
// file drops it): the source takes it when it starts, and a process that
// takes it in between still fails the run then (exit 2, naming the
// pointer). A pointer that does not exist yet is free.
func checkPointerFree(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &fileError{path, fmt.Errorf("--pointer: %w", unwrapPathError(err))}
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return &fileError{path, fmt.Errorf("--pointer: %w", filesource.ErrLocked)}
		}
		return &fileError{path, fmt.Errorf("--pointer: locking: %w", err)}
	}
	return nil
}

// tempInfix marks the temporary files of the commands that write a whole
// file (DIR/.NAME.blackbox-tmp for DIR/NAME): no command takes one for a
// recording, and the next command writing NAME removes a stale one.
const tempInfix = ".blackbox-tmp"

// tempPath is the temporary file a whole file written to path goes
// through: hidden, in path's directory (so the rename stays on one file
// system), unique per path (its writer holds path's lock).
func tempPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+tempInfix)
}

// isTemp reports whether path names a temporary file of tempPath.
func isTemp(path string) bool {
	base := filepath.Base(path)
	return strings.HasPrefix(base, ".") && strings.Contains(base, tempInfix)
}

// writeFileAtomic writes path whole or not at all (internal/atomicfile).
// Errors name path.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	if err := atomicfile.Write(path, tempInfix, write); err != nil {
		return &fileError{path, unwrapPathError(err)}
	}
	return nil
}

// runPaths lists the files of a run: its input, and the outputs it writes
// (the pointer only for --read committed, which uses it; for --state,
// every file of the state: stateFiles).
func runPaths(cfg recordConfig) []pathArg {
	ptr := ""
	if cfg.read == filesource.Committed && !cfg.kafka.on() {
		ptr = cfg.pointer
	}
	storePath := cfg.store
	if isURL(storePath) {
		storePath = "" // a run in a server: no file to check or lock (pgstore locks the run)
	}
	args := []pathArg{
		{flag: "--input", path: cfg.input},
		{flag: "--store", path: storePath, write: true},
		{flag: "--pointer", path: ptr, write: true},
	}
	for _, p := range stateFiles(cfg.state, cfg.workers) {
		args = append(args, pathArg{flag: "--state", path: p, write: true})
	}
	args = append(args, pathArg{flag: "--out", path: cfg.out, write: true})
	if cfg.out != "" {
		args = append(args, pathArg{flag: "--out", path: outboxPath(cfg.out), write: true}) // its marks
	}
	if cfg.sink.on() {
		args = append(args, pathArg{flag: "--sink", path: cfg.sink.marks, write: true}) // its outbox's marks
	}
	return append(args, pathArg{flag: "--status", path: cfg.status, write: true})
}

// checkRunPaths makes every check of a run's paths that needs no lock: the
// input is a file (or, following, may appear later), no two flags name one
// file, and every output can be written.
func checkRunPaths(cfg recordConfig) error {
	if !cfg.kafka.on() {
		if err := checkFile(cfg.input, "an input file", cfg.follow); err != nil {
			return err
		}
	}
	args := runPaths(cfg)
	if err := checkDistinct(args); err != nil {
		return err
	}
	if err := checkStateNames(args, cfg.state); err != nil {
		return err
	}
	what := map[string]string{"--store": "a recording", "--pointer": "a pointer file", "--state": "a state file",
		"--out": "an output file", "--sink": "the sink's marks file", "--status": "a status file"}
	for _, a := range args {
		if !a.write || a.path == "" {
			continue
		}
		if err := checkWritable(a, what[a.flag]); err != nil {
			return err
		}
		if a.flag != "--store" && looksLikeRecording(a.path) {
			return &fileError{a.path, fmt.Errorf("%s: %w: refusing to write over it", a.flag, store.ErrHoldsRecording)}
		}
	}
	return nil
}

// looksLikeRecording reports whether path begins as a recording of a
// registered backend does (store.Sniff). It reads only the first bytes (an
// output such as --out may be large).
func looksLikeRecording(path string) bool {
	name, err := store.Sniff(path)
	return err == nil && name != ""
}
