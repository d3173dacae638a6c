package cli

import (
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// appBuilder returns what builds worker w's instance of app (w 0 for a
// single worker) with the run's options: --option's, option state (with
// several workers each worker has a state file of its own,
// core.WorkerStream(--state, w)) and the state's batch options
// (apps.StateBatchOptions: --state-every, --state-interval), each of
// which --option may not set too. recorded are the options for the
// recording's META (recorder.Processor.Options): --option's but the state
// file; not those of --state, --state-every and --state-interval, which
// point the app at its live state and are never a replay's.
func appBuilder(app core.App, cfg recordConfig) (build func(w int) (core.Processor, error), recorded map[string]string, err error) {
	options := maps.Clone(cfg.options)
	if options == nil {
		options = map[string]string{}
	}
	recorded = maps.Clone(options)
	for k, v := range apps.StateBatchOptions(cfg.stateEvery, cfg.stateInterval) {
		if _, ok := options[k]; ok {
			return nil, nil, usagef("--%s and --option %s=... both set it", k, k)
		}
		options[k] = v
	}
	if cfg.state != "" {
		options[apps.OptionState] = cfg.state
	}
	return func(w int) (core.Processor, error) {
		opts := options
		if cfg.workers > 1 && cfg.state != "" {
			opts = maps.Clone(options)
			opts[apps.OptionState] = core.WorkerStream(cfg.state, w)
		}
		return app.Build(opts)
	}, recorded, nil
}

// buildFirst builds worker 0's instance (the only one on one worker)
// before the run creates any file, so that an option the app refuses is
// a usage error with nothing to undo.
func buildFirst(build func(w int) (core.Processor, error)) (core.Processor, error) {
	proc, err := build(0)
	if errors.Is(err, core.ErrOption) {
		return nil, usagef("%v", err)
	}
	return proc, err
}

// workerProcs returns the engine's factory of the workers' instances:
// worker 0 gets first (built by buildFirst), each later one build(w).
// Every instance is guarded: slowed down by delay. The engine calls the
// factory from one goroutine.
func workerProcs(first core.Processor, build func(w int) (core.Processor, error), delay time.Duration) (core.Processor, func() (core.Processor, error)) {
	first = guarded(first, delay)
	built := 0
	return first, func() (core.Processor, error) {
		w := built
		built++
		if w == 0 {
			return first, nil
		}
		p, err := build(w)
		if err != nil {
			return nil, err
		}
		return guarded(p, delay), nil
	}
}

// stateSaver is an app instance that saves its state durably and counts
// its saves (apps.Ledger).
type stateSaver interface{ StateSaves() int64 }

// saveCounts keeps the run's app instances that count their state saves,
// for the operator window. Safe for concurrent use: the engine builds the
// instances, a scrape reads them.
type saveCounts struct {
	mu sync.Mutex
	of []stateSaver
}

// counting returns build, keeping each instance it builds that counts its
// saves.
func (s *saveCounts) counting(build func(w int) (core.Processor, error)) func(w int) (core.Processor, error) {
	return func(w int) (core.Processor, error) {
		p, err := build(w)
		if ss, ok := p.(stateSaver); ok && err == nil {
			s.mu.Lock()
			s.of = append(s.of, ss)
			s.mu.Unlock()
		}
		return p, err
	}
}

// total is the saves of every instance kept.
func (s *saveCounts) total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, ss := range s.of {
		n += ss.StateSaves()
	}
	return n
}
