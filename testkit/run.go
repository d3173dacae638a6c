package testkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// Epoch is the instant the clocks of a run start at when Config.Start is
// zero.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Feed is the name of a run's feed: the inputs' source in its recording.
const Feed = "input"

// Timeout bounds each wait of a run (Idle, Advance, Stop): a processor
// that never finishes fails the test instead of hanging it.
const Timeout = time.Minute

// Config is a run of one app under test. Only App is required.
type Config struct {
	// App is the app under test; its New builds the processor (each
	// worker's) with Options, recorded in the recording's META.
	App     core.App
	Options map[string]string
	// Workers runs the app on that many workers (key-ordered when the app
	// has a key: core.App.KeyFor); 0 or 1: one.
	Workers int
	// Start is where the clocks start; zero: Epoch. Cycle.Now steps a
	// millisecond a reading from it, the recorder's clock a second a row;
	// the timer clock (Run.Clock) stands still until the test moves it.
	Start time.Time
	// Journal journals the feed (INDEXED inputs and JOURNAL rows).
	Journal bool
	// Observer sees the run after the kit's own hooks.
	Observer engine.Observer
}

// Run is a recorded run of one app, to memory, fed by the test (Send). Its
// methods are for the test's goroutine; its Clock and Sink are safe for
// concurrent use.
type Run struct {
	t     testing.TB
	run   *recorder.Run
	log   *memsource.Log
	mem   *store.Memory
	clock *Clock
	sink  *Sink
	sent  int64

	mu      sync.Mutex
	pending map[timerID]time.Time // timers set and not fired, by due instant
	failed  error                 // a hook's complaint
	stopped bool
}

type timerID struct {
	processor string
	n         int
}

// Start starts a recorded run of cfg.App: its input is a log the test
// appends to (Send; positioned: offsets 1, 2, 3 ... in epoch 1, so a
// processor's Delivery is as a file's), its outputs go to Sink as emitted
// and to a recording in memory. It fails the test if the run cannot start,
// and stops the run at the test's cleanup if the test did not.
func Start(t testing.TB, cfg Config) *Run {
	t.Helper()
	start := cfg.Start
	if start.IsZero() {
		start = Epoch
	}
	r := &Run{t: t, log: memsource.NewLog(), mem: store.NewMemory(), clock: NewClock(start), sink: &Sink{},
		pending: map[timerID]time.Time{}}
	options := cfg.Options
	if options == nil {
		options = map[string]string{}
	}
	p := recorder.Processor{Name: cfg.App.Name, App: cfg.App, Options: options}
	var err error
	if cfg.Workers > 1 {
		p.New = func() (core.Processor, error) { return cfg.App.Build(options) }
	} else if p.Processor, err = cfg.App.Build(options); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	obs := engine.Observer{
		TimerSet: func(proc string, n int, due time.Time) {
			r.mu.Lock()
			r.pending[timerID{proc, n}] = due
			r.mu.Unlock()
		},
		TimerFired: func(proc string, tr *core.Trace) {
			r.mu.Lock()
			delete(r.pending, timerID{proc, tr.Timer})
			r.mu.Unlock()
		},
	}
	run, err := recorder.Start(context.Background(), recorder.RunConfig{
		Store:         r.mem,
		Feed:          engine.FeedConfig{Name: Feed, Source: r.log.Source(), QueueSize: 64},
		Journal:       cfg.Journal,
		Group:         "test",
		Processors:    []recorder.Processor{p},
		Workers:       cfg.Workers,
		Clock:         core.NewStepClock(start, time.Millisecond),
		TimerClock:    r.clock,
		RecorderClock: core.NewStepClock(start, time.Second),
		Sink:          r.sink,
		Observer:      obs.Then(cfg.Observer),
		Logger:        slog.New(slog.DiscardHandler),
		NoCommits:     true,
	})
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	r.run = run
	t.Cleanup(func() {
		if !r.stopped {
			_, _ = r.stop()
		}
	})
	return r
}

// Clock is the run's timer clock: it stands still until the test moves it
// (Advance).
func (r *Run) Clock() *Clock { return r.clock }

// Sink holds every output of the run, as emitted.
func (r *Run) Sink() *Sink { return r.sink }

// Send appends items to the run's input; Idle waits for them.
func (r *Run) Send(items ...any) {
	r.log.Append(items...)
	r.sent += int64(len(items))
}

// Idle waits until the run is idle: every item sent was published and
// handled (the engine settled), and no timer due on the clock is left to
// fire (a timer's cycle may set another: it fires too when due). It fails
// the test if the run failed or Timeout passed.
func (r *Run) Idle() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	eng := r.run.Engine()
	sent := r.sent
	idle := eng.When(func(s engine.Status) bool {
		if eng.Err() != nil {
			return true // a failed run never settles: say why
		}
		return s.Settled && len(s.Feeds) > 0 && s.Feeds[0].Sequence >= sent && !r.timerDue()
	})
	select {
	case <-idle:
		if err := eng.Err(); err != nil {
			r.t.Fatalf("testkit: the run failed: %v", err)
		}
	case <-ctx.Done():
		r.t.Fatalf("testkit: not idle after %s: %d items sent, %s", Timeout, sent, r.describe())
	}
}

// Advance moves the timer clock d forward and waits until the run is idle
// again: every timer due by then fired.
func (r *Run) Advance(d time.Duration) {
	r.t.Helper()
	r.clock.Advance(d)
	r.Idle()
}

// Stop waits until the run is idle, stops it cleanly (END rows) and
// returns its recording, read-only. It fails the test if the run or its
// recording failed.
func (r *Run) Stop() *store.Memory {
	r.t.Helper()
	r.Idle()
	stopErr, recErr := r.stop()
	if err := errors.Join(stopErr, recErr); err != nil {
		r.t.Fatalf("testkit: stopping the run: %v", err)
	}
	return r.mem.ReadOnly()
}

func (r *Run) stop() (stopErr, recErr error) {
	r.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	stopErr, recErr = r.run.Stop(ctx)
	return stopErr, errors.Join(recErr, r.mem.Close())
}

// timerDue reports whether a timer set and not fired is due on the clock.
func (r *Run) timerDue() bool {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, due := range r.pending {
		if !due.After(now) {
			return true
		}
	}
	return false
}

// describe says what a run that is not idle still has.
func (r *Run) describe() string {
	s := r.run.Engine().Status()
	var seq int64
	if len(s.Feeds) > 0 {
		seq = s.Feeds[0].Sequence
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d published, settled %v, %d timers pending", seq, s.Settled, len(r.pending))
}
