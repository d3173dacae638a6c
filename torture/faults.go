package torture

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// lockSuffix names the lock file the CLI takes beside each output.
const lockSuffix = ".blackbox-lock"

// prepareFault sets up a run's fault before it starts and returns what
// undoes it once the run ended: stale lock files beside every output (as
// a killed run leaves them: they hold nothing), or a lock another process
// holds on one output (the run must be refused).
func (sr *scenarioRun) prepareFault(run runSpec) (release func(), err error) {
	outputs := []string{outFile}
	if sr.s.State {
		outputs = append(outputs, stateFile)
	}
	if sr.file != nil {
		outputs = append(outputs, "in.txt.ptr")
	}
	switch run.Fault.Kind {
	case faultStale:
		for _, o := range outputs {
			if err := os.WriteFile(filepath.Join(sr.dir, o+lockSuffix), nil, 0o644); err != nil {
				return nil, err
			}
		}
	case faultLocked:
		name := filepath.Join(sr.dir, pick(sr.r, outputs...)+lockSuffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return nil, err
		}
		sr.logf("lock held on %s", filepath.Base(name))
		return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
	}
	return func() {}, nil
}

// stateDirFault puts a directory in the place of a state file the run
// saves, a while after it started, so that its saves fail; the returned
// function puts the file back once the run ended. When the run saved
// between the two renames, the fault does not happen.
func (sr *scenarioRun) stateDirFault(c *child, run runSpec) (restore func()) {
	name := stateFile
	if run.Workers > 1 {
		name += "#w" + strconv.Itoa(sr.r.IntN(run.Workers))
	}
	path := filepath.Join(sr.dir, name)
	aside := path + ".torture-aside"
	delay := time.Duration(sr.r.IntN(150)) * time.Millisecond
	done := make(chan bool, 1)
	go func() {
		if c.wait(delay) {
			done <- false
			return
		}
		moved := os.Rename(path, aside) == nil
		if err := os.Mkdir(path, 0o755); err != nil {
			if moved {
				os.Remove(aside) // the run saved meanwhile: its file is the newer
			}
			done <- false
			return
		}
		done <- moved
	}()
	return func() {
		moved, made := <-done, false
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			made = os.Remove(path) == nil
		}
		if moved && made {
			if err := os.Rename(aside, path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				sr.logf("state fault: putting %s back: %v", name, err)
			}
		}
		if made {
			sr.logf("fault: a directory took %s's place while the run ran", name)
		}
	}
}
