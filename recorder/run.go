package recorder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/store"
)

// Processor is one processor of a recorded run: its name in the engine and
// the recording, the app it is an instance of (its name is written in META,
// for a replay to build it again) and the processor itself.
type Processor struct {
	Name      string
	App       core.App
	Processor core.Processor
	// New builds each worker's instance when the run has several
	// workers (Processor is then not used).
	New func() (core.Processor, error)
	// Options are the options App.New was given to build Processor (and
	// each of New's instances), for META (store.Meta.AppOptions): a
	// replay builds the processor with them. The options App.Live names
	// are left out. Nil: the options are not recorded (a replay is told
	// them); an empty map: built with none.
	Options map[string]string
}

// RunConfig is one recorded run: one feed read from a source, handed to one
// group of processors, every row written to Store. It is what `blackbox
// run` and golden recordings both set up. A RunConfig is only read.
type RunConfig struct {
	// Store receives the recording. The caller creates it and closes it
	// after Run.Stop.
	Store store.Writer
	// Feed is the feed (its Source, Policy, QueueSize ...). Its Journal
	// is set by Start when Journal is true, and its SkipCompleted always:
	// the recording names the items a restart does not hand the group
	// again, its group having completed them in an earlier run
	// (COMPLETED rows; a source that keeps no group's progress tells the
	// feed nothing to skip).
	Feed engine.FeedConfig
	// Journal journals the feed into the recording: each item one JOURNAL
	// row, inputs INDEXED rows. With Feed.Journal set too, that journal
	// sees each item first (it may hold it), then the recorder stores it.
	Journal bool
	// Group names the processors' group; default "main".
	Group      string
	Processors []Processor
	// Workers, Order and MaxGap are the group's (engine.GroupConfig). The
	// key of OrderKey is the first processor's App.KeyFunc of its Options.
	// With Workers above 1 an empty Order is OrderKey when that app has a
	// key, else OrderNone (the items go to the first idle worker, in no
	// order), as the engine and `blackbox run` take it. Start refuses
	// (ErrUsage) OrderKey for an app without a key, and several workers
	// for an app that cannot run on them (core.ErrNoSplit). Each worker's
	// instance of a processor is recorded as a stream of its own, named
	// core.WorkerStream(processor, worker).
	Workers int
	Order   engine.Order
	MaxGap  int
	// Clock is the cycles' clock (Cycle.Now), TimerClock the clock timers
	// are due on; RecorderClock stamps rows. Defaults: the system clock.
	Clock, TimerClock, RecorderClock core.Clock
	// Sink receives outputs live, as they are emitted, before the rows
	// that record them are written: at least once, and possibly outputs
	// no recording holds (a crash between). Outbox delivers them only
	// once they are recorded and their inputs committed, each once
	// (docs/GUARANTEES.md, "Effects"): set one or the other. Observer
	// sees the run after the recorder's and the outbox's hooks (a hook of
	// Observer runs once theirs returned).
	Sink   core.Sink
	Outbox *outbox.Outbox
	// Path is Store's path: with Outbox, how its marks name the
	// recording (with META's creation instant) for the next run's
	// recovery.
	Path     string
	Observer engine.Observer
	Logger   *slog.Logger
	// Codec encodes payloads (default JSON); SyncEvery and SyncInterval
	// are the recorder's (Options).
	Codec        Codec
	SyncEvery    int
	SyncInterval time.Duration
	// NoCommits records no COMMIT rows (Options.NoCommits).
	NoCommits bool
	// KillSwitch and KillAbandon are the engine's (engine.Config): the
	// operator's kill switch, and whether a kill abandons the items in
	// flight. A killed run's END rows say why (Engine.Kill kills it too).
	KillSwitch  func() (reason string, kill bool)
	KillAbandon bool
	// DrainTimeout is the engine's (engine.Config.DrainTimeout): how long
	// Stop lets the group drain its queue; 0 the engine's default.
	DrainTimeout time.Duration
}

// groupKey resolves cfg's order and its key (RunConfig.Order): it refuses
// OrderKey without a key and several workers for an app that cannot run on
// them (core.ErrNoSplit).
func groupKey(cfg RunConfig) (func(any) string, engine.Order, error) {
	if cfg.Workers <= 1 && cfg.Order != engine.OrderKey {
		return nil, cfg.Order, nil // one worker: no key is used
	}
	p := cfg.Processors[0]
	key, err := p.App.KeyFunc(p.Options)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %d workers, order %q: %w", ErrUsage, cfg.Workers, cfg.Order, err)
	}
	order := cfg.Order
	if order == "" && cfg.Workers > 1 && key != nil {
		order = engine.OrderKey
	}
	switch {
	case order == engine.OrderKey && key == nil:
		return nil, "", fmt.Errorf("%w: app %q has no key: it cannot run key-ordered", ErrUsage, p.App.Name)
	case order != engine.OrderKey:
		key = nil
	}
	return key, order, nil
}

// Run is a recorded run under way: an engine and the recorder writing its
// rows. Its methods are safe for concurrent use as Engine's are; Stop is
// called once, Wait by one goroutine at a time.
type Run struct {
	eng     *engine.Engine
	rec     *Recorder
	srcDone chan error // how the feed's source's Run ended (Wait)
}

// Start builds the recorder and the engine of cfg and starts the engine.
// On an error nothing runs and the recorder is closed (Store is left to
// the caller). The feed's source is run through a wrapper that tells Wait
// how its Run ended; of the source's optional interfaces it keeps
// engine.PolicySource.
func Start(ctx context.Context, cfg RunConfig) (*Run, error) {
	if len(cfg.Processors) == 0 {
		return nil, fmt.Errorf("%w: a recorded run without a processor", ErrUsage)
	}
	group := cfg.Group
	if group == "" {
		group = "main"
	}
	apps := make(map[string]string, len(cfg.Processors))
	var appOpts map[string]map[string]string
	procs := make([]engine.ProcessorConfig, len(cfg.Processors))
	for i, p := range cfg.Processors {
		if p.App.Name == "" {
			return nil, fmt.Errorf("%w: processor %q has no app name", ErrUsage, p.Name)
		}
		streams := []string{p.Name}
		if cfg.Workers > 1 {
			streams = streams[:0]
			for w := range cfg.Workers {
				streams = append(streams, core.WorkerStream(p.Name, w))
			}
		}
		for _, s := range streams {
			apps[s] = p.App.Name
			if p.Options != nil {
				if appOpts == nil {
					appOpts = map[string]map[string]string{}
				}
				appOpts[s] = p.App.RecordedOptions(p.Options)
			}
		}
		procs[i] = engine.ProcessorConfig{Name: p.Name, Processor: p.Processor, New: p.New}
	}
	key, order, err := groupKey(cfg)
	if err != nil {
		return nil, err
	}
	opts := Options{Clock: cfg.RecorderClock, Codec: cfg.Codec, Apps: apps, AppOptions: appOpts, NoCommits: cfg.NoCommits,
		SyncEvery: cfg.SyncEvery, SyncInterval: cfg.SyncInterval, Logger: cfg.Logger}
	obs := cfg.Observer
	if cfg.Sink != nil {
		opts.Sink = core.SinkLive
	}
	if cfg.Outbox != nil {
		opts.Sink = cfg.Outbox.Status().Guarantee
		if cfg.Path == "" {
			return nil, fmt.Errorf("%w: an outbox without the recording's path", ErrUsage)
		}
		opts.Written = cfg.Outbox.Written
		obs = cfg.Outbox.Observer().Then(obs)
	}
	rec, err := New(cfg.Store, opts)
	if err != nil {
		return nil, err
	}
	fc := cfg.Feed
	fc.SkipCompleted = true
	srcDone := make(chan error, 1)
	fc.Source = watchSource(fc.Source, srcDone)
	if cfg.Journal {
		fc.Journal = chainJournal(fc.Journal, rec.Journal())
	}
	eng, err := engine.New(engine.Config{
		Clock:      cfg.Clock,
		TimerClock: cfg.TimerClock,
		Feeds:      []engine.FeedConfig{fc},
		Groups: []engine.GroupConfig{{Name: group, Feeds: []string{fc.Name}, Processors: procs,
			Workers: cfg.Workers, Order: order, Key: key, MaxGap: cfg.MaxGap}},
		Observer:     rec.Observer().Then(obs),
		Sink:         cfg.Sink,
		Logger:       cfg.Logger,
		KillSwitch:   cfg.KillSwitch,
		KillAbandon:  cfg.KillAbandon,
		DrainTimeout: cfg.DrainTimeout,
	})
	if err == nil && cfg.Outbox != nil {
		err = cfg.Outbox.Begin(outbox.Run{Path: cfg.Path, Created: rec.Created(), Sync: rec.Sync, CompactJSON: isJSON(cfg.Codec),
			Commits: func(feed string) bool { f := eng.Feed(feed); return f != nil && f.Commits() }})
	}
	if err == nil {
		err = eng.Start(ctx)
	}
	if err != nil {
		return nil, errors.Join(err, rec.Close())
	}
	return &Run{eng: eng, rec: rec, srcDone: srcDone}, nil
}

// isJSON reports whether c is the JSON codec (nil: the default), whose
// payloads are compact JSON on one line, each a new slice
// (outbox.Run.CompactJSON).
func isJSON(c Codec) bool {
	switch c.(type) {
	case nil, JSONCodec, *JSONCodec:
		return true
	}
	return false
}

// Engine is the run's engine (its status, its feed).
func (r *Run) Engine() *engine.Engine { return r.eng }

// Recorder is the run's recorder (Recorder.Control writes an operator's
// actions).
func (r *Run) Recorder() *Recorder { return r.rec }

// Stop stops the engine (Engine.Stop with ctx: a clean stop commits and
// drains, and fires the timers due on TimerClock when Stop is called, each
// recorded as a TIMER row with its outputs; a timer due later never
// fires), then closes the recorder (END rows). stopErr is the engine's;
// recErr is the recorder's: the recording is broken (a stream stopped, or
// closing failed). The store stays open: the caller closes it, and closes
// RunConfig.Outbox after it (its last batch follows the last commit).
func (r *Run) Stop(ctx context.Context) (stopErr, recErr error) {
	stopErr = r.eng.Stop(ctx)
	return stopErr, r.rec.Close()
}

// chainJournal journals into first (nil: none), then next.
func chainJournal(first, next engine.Journal) engine.Journal {
	if first == nil {
		return next
	}
	return journals{first, next}
}

// journals appends to each journal in turn, stopping at the first error.
// It is not an engine.JournalBatch: the first journal may wait for the
// items before each one to be processed (as golden's gate does), which only
// an item-by-item journal allows.
type journals [2]engine.Journal

func (j journals) Append(ctx context.Context, feed string, seq int64, item any) error {
	for _, x := range j {
		if err := x.Append(ctx, feed, seq, item); err != nil {
			return err
		}
	}
	return nil
}
