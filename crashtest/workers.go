package crashtest

import (
	"bufio"
	"fmt"
	"os"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// The checks of a crash test whose runs have several key-ordered workers.

// workerStates reads the state of each worker of a run whose state files
// are core.WorkerStream(path, w).
func (s *setup) workerStates(path string) ([]core.DurableState, error) {
	sts := make([]core.DurableState, s.cfg.Workers)
	for w := range sts {
		st, err := apps.DurableStateOf(s.app, core.WorkerStream(path, w))
		if err != nil {
			return nil, err
		}
		sts[w] = st
	}
	return sts, nil
}

// checkWorkerStates: each worker's crashed state equals the same worker's
// in the clean run on as many workers (the same keys: each input applied
// exactly once, the same effects, the same last input), and the report
// shows the sums.
func (s *setup) checkWorkerStates(rep *Report) error {
	crashed, err := s.workerStates(s.state)
	if err != nil {
		return err
	}
	clean, err := s.workerStates(s.cleanWSt)
	if err != nil {
		return err
	}
	rep.Crashed, rep.Expected = &StateReport{}, &StateReport{}
	for w := range crashed {
		c, k := crashed[w], clean[w]
		rep.Crashed.Applied += c.Applied
		rep.Expected.Applied += k.Applied
		rep.Crashed.Offset = max(rep.Crashed.Offset, c.Position.Offset)
		rep.Expected.Offset = max(rep.Expected.Offset, k.Position.Offset)
		name := core.WorkerStream(s.state, w)
		if c.Applied != k.Applied {
			rep.Failures = append(rep.Failures, fmt.Sprintf("worker %d: effects applied: crashed %d, clean %d (each input exactly once)", w, c.Applied, k.Applied))
		}
		if c.Position.Offset != k.Position.Offset {
			rep.Failures = append(rep.Failures, fmt.Sprintf("worker %d: last input applied: crashed at offset %d, clean at %d", w, c.Position.Offset, k.Position.Offset))
		}
		if c.Effects != k.Effects {
			rep.Failures = append(rep.Failures, fmt.Sprintf("worker %d: the crashed state's effects differ from the clean run's (%s, %s)", w, name, core.WorkerStream(s.cleanWSt, w)))
		}
	}
	return nil
}

// inputLines are the end offset and the worker of each line of the input
// (the app's key, engine.WorkerOf).
func (s *setup) inputLines() (ends []int64, workers []int, err error) {
	f, err := os.Open(s.input)
	if err != nil {
		return nil, nil, fileErr(s.input, err)
	}
	defer f.Close()
	key, err := s.app.KeyFunc(nil)
	if err != nil || key == nil {
		return nil, nil, configf("--workers %d: app %s has no key function (%v)", s.cfg.Workers, s.app.Name, err)
	}
	sc := bufio.NewScanner(f)
	off := int64(0)
	for sc.Scan() {
		off += int64(len(sc.Bytes())) + 1
		ends = append(ends, off)
		workers = append(workers, engine.WorkerOf(key(sc.Text()), s.cfg.Workers))
	}
	if err := sc.Err(); err != nil {
		return nil, nil, &FileError{Path: s.input, Err: err}
	}
	return ends, workers, nil
}

// checkPointerPrefix: after kill k the pointer is not ahead of the
// contiguous prefix of applied lines: every line it covers was applied by
// its worker (the worker's state is at or past the line).
func (s *setup) checkPointerPrefix(rep *Report, k int, pointer int64) error {
	sts, err := s.workerStates(s.state)
	if err != nil {
		return err
	}
	for i, end := range s.lineEnds {
		if end > pointer {
			break
		}
		if w := s.lineWorker[i]; sts[w].Position.Offset < end {
			rep.Failures = append(rep.Failures, fmt.Sprintf("kill %d: the pointer (offset %d) is ahead of the contiguous prefix: line %d (ending at %d) is not applied by worker %d (at %d)",
				k, pointer, i+1, end, w, sts[w].Position.Offset))
			return nil
		}
	}
	return nil
}
