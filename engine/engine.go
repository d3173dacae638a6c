package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/blackbox-audit/blackbox/engine/internal/ring"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// Config is everything an Engine is built from. New validates all of it:
// bad configuration fails there, never at run time.
type Config struct {
	// Clock is what processors read through Cycle.Now (recorded, played
	// back). Default: SystemClock.
	Clock core.Clock
	// TimerClock decides when timers are due, and times what the engine
	// measures of its own operation: pauses and blocked waits (the
	// status's pausedNs, blockedNs, blockedMaxNs), FeedConfig.PauseWarnAfter
	// and GroupConfig.StallAfter, and the instants of the loss states
	// (lossstate.go). Default: SystemClock. It is separate from Clock so
	// that neither polling timers nor timing pauses, waits, claims and
	// losses consumes readings of a deterministic Clock; it is read only
	// when such a state begins or ends (a loss, a DEGRADED binding looked
	// at), never per item delivered.
	TimerClock core.Clock
	Feeds      []FeedConfig
	Groups     []GroupConfig
	Observer   Observer
	// Sink receives every emitted output live, with the emitting
	// processor's name and the sink name; nil discards them.
	Sink core.Sink
	// DrainTimeout bounds how long Stop lets the groups drain their queues
	// after the sources stopped. Default 5s.
	DrainTimeout time.Duration
	// Logger receives warnings, at level Warn (skipped items, failed
	// timers, a source that failed, a drain cut short, a kill; a queue's first
	// drop, first refusal and first downgrade, a pause past its
	// PauseWarnAfter, a worker stuck past its StallAfter, a binding's change
	// of loss state to DEGRADED or LATCHED: once each, never per item), each
	// message beginning "blackbox engine: ", and the end of a pause it
	// warned of and a binding's return to UP at level Info. It is never called under a
	// feed's lock. Default: slog.Default().
	Logger *slog.Logger
	// KillSwitch, if set, is the operator's kill switch: each group asks
	// it before it takes an item from a queue (so also while it looks for
	// work, but not while it is parked with nothing to do), and once it
	// returns kill true the engine is killed (Engine.Kill) with its
	// reason, before that item is taken. It is called on the groups'
	// goroutines, concurrently: it must be cheap and safe for concurrent
	// use. Nil: only Engine.Kill kills.
	KillSwitch func() (reason string, kill bool)
	// KillAbandon makes a kill abandon the items in flight: their
	// Cycle.Context is cancelled at once, no completion callback of theirs
	// runs after the kill, none counts as dispatched, so none is committed
	// and the next run delivers them again. False (the default): the items
	// in flight finish (bounded by DrainTimeout), their completions run,
	// and the commit moves through the contiguous prefix they complete.
	KillAbandon bool
}

// FeedConfig configures one feed.
type FeedConfig struct {
	Name string
	// Source feeds the feed; nil for a feed published to directly.
	Source Source
	// Policy is the feed's overload policy. Required, unless the source has
	// a default (PolicySource).
	Policy Policy
	// Subscribers overrides the policy per subscribing group name.
	Subscribers map[string]Policy
	// QueueSize is the capacity of each subscriber's queue. Required (> 0).
	QueueSize int
	// Journal, if set, stores each item once before dispatch.
	Journal Journal
	// WindowCap bounds the acknowledgement window. Default DefaultWindowCap.
	WindowCap int
	// PauseWarnAfter is how long the feed may stay paused (TryPublish
	// refused: a PAUSE or BLOCK queue full, the window at its cap, a
	// consumer fenced or none live) before the engine warns, once per
	// pause, naming what paused it. 0: DefaultPauseWarnAfter; negative:
	// never warned (the status still times every pause).
	PauseWarnAfter time.Duration
	// QuietPeriod is how long a DEGRADED binding of the feed (a group's
	// queue that lost items: lossstate.go) must go without a loss to be UP
	// again. 0: DefaultQuietPeriod (a minute); New refuses one below
	// MinQuietPeriod (a second).
	QuietPeriod time.Duration
	// Latch says which losses of the feed's bindings latch them (LATCHED
	// until an operator clears it: Engine.ClearOverload) rather than
	// degrade them: LatchNeverDrop ("", the default: a loss of a PAUSE or
	// BLOCK_WITH_DEADLINE binding), LatchEveryLoss or LatchNothing.
	Latch LatchRule
	// SkipCompleted lets the feed honour Intake.SkipCompleted: at a
	// restart it does not hand a group the items its own progress, kept
	// by the source with its commit (GroupCommitter), says it completed.
	// Off (the default), the feed ignores it and a restart re-delivers to
	// every group what the slowest had not completed. The items not handed
	// again are told to the group's streams (Observer.AlreadyCompleted: the
	// recorder's COMPLETED rows, which its launcher recorder.Start has it
	// honour).
	SkipCompleted bool
}

// DefaultPauseWarnAfter is FeedConfig.PauseWarnAfter when it is 0.
const DefaultPauseWarnAfter = time.Minute

// GroupConfig configures one group: one goroutine, its processors (each
// item of the group's feeds goes to every processor, in order) and its
// retry policy; and, for a group of several workers, how many, how items
// are shared out among them, and the gap bound.
type GroupConfig struct {
	Name       string
	Feeds      []string
	Processors []ProcessorConfig
	Retry      RetryPolicy
	// Workers runs the group's processors on this many workers, each a
	// goroutine with instances of its own (ProcessorConfig.New) named
	// core.WorkerStream(processor, worker). 0 or 1: one worker, on the group's
	// goroutine, running ProcessorConfig.Processor.
	Workers int
	// Order shares the items out among the workers: OrderKey (Key
	// required) or OrderNone. Default OrderKey when Key is set, else
	// OrderNone.
	Order Order
	// Key is the key of an item, for OrderKey.
	Key func(item any) string
	// MaxGap bounds, per queue, how many items may be completed beyond the
	// oldest pending one: the group takes no new item while the newest it
	// took lies MaxGap past the oldest pending one, until that one
	// completes (the queue fills and the source pauses under PAUSE).
	// Default DefaultMaxGap. Only for several workers.
	MaxGap int
	// StallAfter is how long a worker may take over one item (its
	// processors, completions and the observers' flush of its batch)
	// before the group and the item's feed report it stalled, naming the
	// worker and the item, and the engine warns, once per such item. The
	// report clears when the item completes; delivery is never changed.
	// 0: DefaultStallAfter; negative: never reported. Only for several
	// workers. It is reported no sooner than StallAfter after the worker
	// began the item, and at most a quarter of StallAfter later.
	StallAfter time.Duration
}

// DefaultStallAfter is GroupConfig.StallAfter when it is 0.
const DefaultStallAfter = 30 * time.Second

// ProcessorConfig names one processor. Names are unique in the engine.
// Processor is the processor of a group of one worker; New builds one
// instance per worker of a group of several (its state is never shared
// between workers).
type ProcessorConfig struct {
	Name      string
	Processor core.Processor
	New       func() (core.Processor, error)
}

// Engine is the delivery engine: feeds, groups and their goroutines. Its
// methods are safe for concurrent use. Build it with New, run it with Start,
// end it with Stop; its goroutines stop on Stop.
type Engine struct {
	cfg    Config
	clock  core.Clock
	feeds  []*Feed
	byName map[string]*Feed
	groups []*group
	gByN   map[string]*group

	mu      sync.Mutex
	holds   map[[2]string]*Checkpoint
	started bool
	stopped bool
	srcCtx  context.Context
	cancel  context.CancelFunc
	srcWG   sync.WaitGroup

	attached bool // under mu: the CheckpointUsers were given their checkpoints (Start)

	// stopAt is the timer clock's instant when Stop began: the drain
	// waits for the timers due by then to fire (drained).
	stopAt atomic.Pointer[time.Time]
	// The kill (kill.go): killed once Kill ran (after killReason and
	// abandon are set); killCh closed then; killErr is the kill's end's
	// error, set before killDone is closed.
	killed     atomic.Bool
	abandon    atomic.Bool
	killReason atomic.Pointer[string]
	killCh     chan struct{}
	killDone   chan struct{}
	killErr    error

	watch *watch    // Settled, When and Stop's drain: checked on the changes noted
	ov    *overseer // long pauses and stuck claims: looked at while they may last
}

// New validates cfg and builds an engine. A *ConfigError names the feed,
// group and key of the first problem: a missing or invalid policy, a
// deadline on a non-blocking policy, a negative spin, a queue size that is
// not positive, an override for a group that does not exist, a duplicate
// feed, group or processor name, a subscription to an unknown feed.
func New(cfg Config) (*Engine, error) {
	cfg = withDefaults(cfg)
	e := &Engine{cfg: cfg, clock: cfg.Clock, byName: map[string]*Feed{}, gByN: map[string]*group{},
		holds: map[[2]string]*Checkpoint{}, watch: newWatch(), killCh: make(chan struct{}), ov: newOverseer()}
	groupNames := map[string]bool{}
	procNames := map[string]bool{}
	for _, gc := range cfg.Groups {
		if err := checkGroup(gc, groupNames, procNames); err != nil {
			return nil, err
		}
	}
	for _, fc := range cfg.Feeds {
		if err := e.addFeed(fc, groupNames); err != nil {
			return nil, err
		}
	}
	for _, gc := range cfg.Groups {
		if err := e.addGroup(gc); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// withDefaults is cfg with its defaults set.
func withDefaults(cfg Config) Config {
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock()
	}
	if cfg.TimerClock == nil {
		cfg.TimerClock = core.SystemClock()
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// orDefault resolves a duration whose 0 means def and a negative value
// means never: 0 for never, else d or def.
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def
	}
	return d
}

// cerr is a *ConfigError.
func cerr(feed, group, key string, err error) error {
	return &ConfigError{Feed: feed, Group: group, Key: key, Err: err}
}

// checkGroup validates one group's configuration, noting its name and its
// processors' in the sets of names seen so far (New).
func checkGroup(gc GroupConfig, groupNames, procNames map[string]bool) error {
	if gc.Name == "" {
		return cerr("", "", "name", fmt.Errorf("%w: a group without a name", ErrConfig))
	}
	if groupNames[gc.Name] {
		return cerr("", gc.Name, "name", fmt.Errorf("%w: duplicate group name", ErrConfig))
	}
	groupNames[gc.Name] = true
	if len(gc.Processors) == 0 {
		return cerr("", gc.Name, "processors", fmt.Errorf("%w: a group without processors", ErrConfig))
	}
	switch {
	case gc.Workers < 0:
		return cerr("", gc.Name, "workers", fmt.Errorf("%w: negative workers", ErrConfig))
	case gc.MaxGap < 0:
		return cerr("", gc.Name, "maxGap", fmt.Errorf("%w: negative maxGap", ErrConfig))
	case gc.Order != "" && gc.Order != OrderKey && gc.Order != OrderNone:
		return cerr("", gc.Name, "order", fmt.Errorf("%w: unknown order %q (want %s or %s)", ErrConfig, gc.Order, OrderKey, OrderNone))
	case gc.Order == OrderKey && gc.Key == nil:
		return cerr("", gc.Name, "key", fmt.Errorf("%w: order %s without a Key", ErrConfig, OrderKey))
	}
	parallel := gc.Workers > 1
	for _, pc := range gc.Processors {
		switch {
		case pc.Name == "":
			return cerr("", gc.Name, "processors.name", fmt.Errorf("%w: a processor without a name", ErrConfig))
		case procNames[pc.Name]:
			return cerr("", gc.Name, "processors."+pc.Name, fmt.Errorf("%w: duplicate processor name", ErrConfig))
		case !parallel && pc.Processor == nil:
			return cerr("", gc.Name, "processors."+pc.Name, fmt.Errorf("%w: nil processor", ErrConfig))
		case parallel && pc.New == nil:
			return cerr("", gc.Name, "processors."+pc.Name, fmt.Errorf("%w: %d workers need New to build each worker's instance", ErrConfig, gc.Workers))
		}
		procNames[pc.Name] = true
	}
	if gc.Retry.Attempts < 0 || gc.Retry.Backoff < 0 {
		return cerr("", gc.Name, "retry", fmt.Errorf("%w: negative retry attempts or backoff", ErrConfig))
	}
	return nil
}

// addFeed validates one feed's configuration and builds the feed (New).
func (e *Engine) addFeed(fc FeedConfig, groupNames map[string]bool) error {
	if fc.Name == "" {
		return cerr("", "", "name", fmt.Errorf("%w: a feed without a name", ErrConfig))
	}
	if e.byName[fc.Name] != nil {
		return cerr(fc.Name, "", "name", fmt.Errorf("%w: duplicate feed name", ErrConfig))
	}
	pol := fc.Policy
	if pol.Kind == "" {
		if ps, ok := fc.Source.(PolicySource); ok {
			pol = ps.DefaultPolicy()
		}
	}
	if key, err := pol.validate(); err != nil {
		return cerr(fc.Name, "", key, err)
	}
	if fc.QueueSize <= 0 {
		return cerr(fc.Name, "", "queueSize", fmt.Errorf("%w: queue size must be positive, got %d", ErrConfig, fc.QueueSize))
	}
	if key, err := validateLoss(fc); err != nil {
		return cerr(fc.Name, "", key, err)
	}
	for gname, op := range fc.Subscribers {
		if !groupNames[gname] {
			return cerr(fc.Name, gname, "subscribers."+gname, fmt.Errorf("%w: override for a group that does not exist", ErrConfig))
		}
		if key, err := op.validate(); err != nil {
			return cerr(fc.Name, gname, "subscribers."+gname+"."+key, err)
		}
	}
	wc := fc.WindowCap
	if wc <= 0 {
		wc = DefaultWindowCap
	}
	f := &Feed{name: fc.Name, eng: e, policy: pol, overrides: fc.Subscribers, queueSize: fc.QueueSize,
		journal: fc.Journal, windowCap: wc, source: fc.Source, warnAfter: orDefault(fc.PauseWarnAfter, DefaultPauseWarnAfter),
		state: StateInitialising, closedCh: make(chan struct{}), ready: make(chan struct{}, 1),
		quiet: orDefault(fc.QuietPeriod, DefaultQuietPeriod), latch: fc.Latch, honourCompleted: fc.SkipCompleted}
	if f.latch == "" {
		f.latch = LatchNeverDrop
	}
	e.feeds = append(e.feeds, f)
	e.byName[f.name] = f
	return nil
}

// addGroup builds one group (validated: checkGroup), its workers and
// their hosts, and subscribes it to its feeds (New).
func (e *Engine) addGroup(gc GroupConfig) error {
	g := &group{name: gc.Name, eng: e, retry: gc.Retry, obs: &e.cfg.Observer, clock: e.cfg.TimerClock,
		nprocs: len(gc.Processors), order: gc.Order, key: gc.Key, maxGap: int64(gc.MaxGap),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if g.order == "" {
		g.order = OrderNone
		if g.key != nil {
			g.order = OrderKey
		}
	}
	if g.maxGap == 0 {
		g.maxGap = DefaultMaxGap
	}
	if gc.Workers > 1 {
		g.stallAfter = orDefault(gc.StallAfter, DefaultStallAfter)
	}
	// Cycle.Context is a context the engine served: a Publish with it never waits.
	g.ctx, g.cancel = context.WithCancel(context.WithValue(context.Background(), servedKey, g))
	if gc.Workers > 1 && g.order == OrderNone {
		g.shared = make(chan task, workerTasks)
	}
	if gc.Workers > 1 {
		g.pending = make([][]claim, gc.Workers)
		g.chunks = make(chan []claim, 4*gc.Workers+workerTasks)
	}
	for wi := range max(1, gc.Workers) {
		if err := e.addWorker(g, gc, wi); err != nil {
			return err
		}
	}
	empty := []*binding{}
	g.bindings.Store(&empty)
	seen := map[string]bool{}
	for _, fn := range gc.Feeds {
		f := e.byName[fn]
		if f == nil {
			return cerr(fn, gc.Name, "feeds", fmt.Errorf("%w: subscription to a feed that does not exist", ErrConfig))
		}
		if seen[fn] {
			return cerr(fn, gc.Name, "feeds", fmt.Errorf("%w: duplicate subscription", ErrConfig))
		}
		seen[fn] = true
		e.bind(f, g)
	}
	e.groups = append(e.groups, g)
	e.gByN[g.name] = g
	return nil
}

// addWorker builds worker wi of group g: a host per processor, with an
// instance of its own (ProcessorConfig.New) in a group of several.
func (e *Engine) addWorker(g *group, gc GroupConfig, wi int) error {
	w := &worker{g: g, id: wi, name: gc.Name}
	if gc.Workers > 1 {
		w.name = core.WorkerStream(gc.Name, wi)
		w.tasks, w.done = make(chan task, workerTasks), make(chan struct{})
	}
	for _, pc := range gc.Processors {
		name, p := pc.Name, pc.Processor
		if gc.Workers > 1 {
			name = core.WorkerStream(pc.Name, wi)
			var err error
			if p, err = pc.New(); err == nil && p == nil {
				err = errors.New("New returned no processor")
			}
			if err != nil {
				return cerr("", gc.Name, "processors."+pc.Name, fmt.Errorf("%w: building worker %d's instance: %w", ErrConfig, wi, err))
			}
		}
		h := core.NewHost(name, p, e.cfg.Clock, core.WithSink(e.cfg.Sink),
			core.WithTimers(e.cfg.TimerClock, g.schedule(len(g.hosts))), core.WithContext(g.ctx))
		g.hosts = append(g.hosts, h)
		w.hosts, w.names = append(w.hosts, h), append(w.names, name)
	}
	w.failed, w.compErr = make([]bool, len(w.hosts)), make([]bool, len(w.hosts))
	g.workers = append(g.workers, w)
	return nil
}

// bind subscribes g to f with a new queue.
func (e *Engine) bind(f *Feed, g *group) *binding {
	pol := f.policy
	if p, ok := f.overrides[g.name]; ok {
		pol = p
	}
	b := &binding{feed: f, group: g, name: g.name + "/" + f.name, policy: pol, q: ring.New(f.queueSize), gen: generations.Add(1)}
	if len(g.workers) > 1 {
		b.gap = newGapState(g.maxGap)
	}
	e.mu.Lock()
	if cp := e.holds[[2]string{f.name, g.name}]; cp != nil && !cp.released {
		b.hold.Store(&holdState{owner: cp})
	}
	e.mu.Unlock()
	f.mu.Lock()
	f.targets = append(append([]*binding{}, f.targets...), b)
	f.all = append(f.all, b)
	f.mu.Unlock()
	g.addBinding(b)
	return b
}

// warnf logs a warning through the Logger.
func (e *Engine) warnf(format string, args ...any) {
	e.cfg.Logger.Warn("blackbox engine: " + fmt.Sprintf(format, args...))
}

// Feed returns the named feed, or nil.
func (e *Engine) Feed(name string) *Feed { return e.byName[name] }

// Clock is the engine's clock.
func (e *Engine) Clock() core.Clock { return e.clock }

// Start starts every group goroutine, then every source; the first time,
// it first gives every CheckpointUser its checkpoints. A ctx that is
// already done starts nothing: Start returns its error (errors.Is(err,
// context.Canceled) or context.DeadlineExceeded) and the engine can be
// started again. Once Start returned, ctx bounds nothing: the sources run
// until Stop (a ctx ending later does not stop them). A nil ctx is refused
// (ErrNilContext).
func (e *Engine) Start(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: Engine.Start", ErrNilContext)
	}
	e.mu.Lock()
	if !e.started && ctx.Err() == nil && !e.attached {
		// The CheckpointUsers' holds are in place before they are told,
		// and both before anything is delivered.
		e.attached = true
		calls := e.holdForUsersLocked()
		e.mu.Unlock()
		for _, call := range calls {
			call()
		}
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	if e.started {
		return fmt.Errorf("%w: already started", ErrStopped)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("engine: start: %w", err)
	}
	e.started = true
	e.watch.start()
	e.ov.start(e)
	for _, g := range e.groups {
		go g.run()
	}
	e.srcCtx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, f := range e.feeds {
		if f.source == nil {
			f.setState(StateCaughtUp, "")
			continue
		}
		e.srcWG.Add(1)
		go func(f *Feed) {
			defer e.srcWG.Done()
			err := f.source.Run(e.srcCtx, &Intake{f})
			f.behind.Store(false) // whatever its state says, it publishes no more
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrKilled) {
				f.setState(f.stateNow(), "source failed: "+err.Error())
				e.warnf("feed %q source: %v", f.name, err)
			}
		}(f)
	}
	return nil
}

func (f *Feed) stateNow() FeedState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

// Stop ends the run in order: stop the sources, refuse waiting blocking
// publishes, let the groups drain their queues (bounded by DrainTimeout and
// ctx), commit what was processed after the sources stopped, close the
// groups and cancel every Cycle.Context, close the streams (END), let
// every CheckpointUser save what it holds (CloseCheckpoint), commit
// again. The drain fires the timers due when Stop is called (due at or
// before TimerClock's Now then; a group that failed or is fenced fires
// none), each in a cycle of its own as a running group fires it, and a
// timer their cycles set that is due by that instant too; a timer due
// later never fires (timers are not part of a snapshot: the processor
// sets them again after Restore). Cycle.Context is cancelled once the
// drain is over: at once when the queues are drained and those timers
// fired, else when DrainTimeout passes or ctx is done, so
// a processor blocked on it past the drain lets Stop return. An item whose
// processor or completion callback fails once its context is cancelled is
// not dispatched, as an item whose retry backoff Stop cut: items never
// processed, and those, stay uncommitted and are re-delivered by the next
// run, with everything after them. Every goroutine of the engine has
// returned when Stop returns, unless ctx ended first: a group still running
// then is reported. The error joins failed commits, groups that did not
// stop, and Err. A nil ctx is refused (ErrNilContext) and stops nothing.
//
// Stop after Kill drains nothing: it waits, bounded by ctx, for the end
// of the killed run (kill.go) and returns its error (nil for a kill that
// ended cleanly: being killed is not an error of the stop), as often as
// it is called.
func (e *Engine) Stop(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: Engine.Stop", ErrNilContext)
	}
	e.mu.Lock()
	if e.killed.Load() {
		e.mu.Unlock()
		return e.awaitKill(ctx)
	}
	if !e.started || e.stopped {
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	e.mu.Unlock()

	for _, f := range e.feeds {
		f.mu.Lock()
		f.closing = true
		f.mu.Unlock()
		close(f.closedCh)
	}
	e.cancel()
	e.srcWG.Wait()

	stopAt := e.cfg.TimerClock.Now()
	e.stopAt.Store(&stopAt)
	drainCtx, cancel := context.WithTimeout(ctx, e.cfg.DrainTimeout)
	defer cancel()
	if !e.untilDrained(drainCtx) {
		e.warnf("stop: queues not drained, or timers due not fired, within the drain timeout (%s) or Stop's context; unprocessed items stay uncommitted", e.cfg.DrainTimeout)
	}
	var errs []error
	errs = append(errs, e.commitAll()...)
	for _, g := range e.groups {
		close(g.stop)
	}
	// After g.stop: a processor that returns because of the cancellation
	// finds its group stopping and takes nothing more.
	for _, g := range e.groups {
		g.cancel()
	}
	for _, g := range e.groups {
		select {
		case <-g.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("%w: group %q did not stop (a processor is blocked): %v", ErrStopped, g.name, ctx.Err()))
		}
	}
	return e.closeRun(errs)
}

// closeRun ends a run whose groups are done (Stop's, or a kill's end):
// the CheckpointUsers' last saves, the last commit, the feeds stopped (a
// pause found is timed until now), the engine's goroutines halted. It
// returns errs with what failed and the engine's error.
func (e *Engine) closeRun(errs []error) error {
	errs = append(errs, e.closeCheckpoints()) // the last saves, before the last commit
	errs = append(errs, e.commitAll()...)
	now := e.cfg.TimerClock.Now()
	for _, f := range e.feeds {
		f.mu.Lock()
		f.stopped = true
		f.pauseOver(now, false)
		f.observeLosses() // the recoveries due by the end of the run are its history
		f.mu.Unlock()
		f.deliverChanges()
	}
	e.ov.halt()
	e.watch.halt()
	errs = append(errs, e.Err())
	return errors.Join(errs...)
}

// Err returns the failures of the groups that an observer hook stopped
// (each an *ObserverError; errors.Is(err, ErrObserver)) or a holder that
// cannot make its state durable (Checkpoint.Fail: a *DurableError;
// errors.Is(err, ErrNotDurable)), joined; nil while every group runs. A
// failed group takes no more items and its feeds commit nothing past what
// it dispatched (and a hold made durable): a launcher stops the run.
func (e *Engine) Err() error {
	var errs []error
	for _, g := range e.groups {
		if fe := g.failure.Load(); fe != nil {
			errs = append(errs, fe.err)
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) drained() bool {
	at := e.stopAt.Load()
	for _, g := range e.groups {
		if g.fenced.Load() || g.dead.Load() {
			continue
		}
		if at != nil && g.timerDueBy(*at) {
			return false
		}
		for _, b := range *g.bindings.Load() {
			b.feed.mu.Lock()
			tail := b.q.Tail()
			b.feed.mu.Unlock()
			if b.dispatched.Load() < tail {
				return false
			}
		}
	}
	return true
}

func (e *Engine) commitAll() []error {
	var errs []error
	for _, f := range e.feeds {
		if _, err := f.pollAcks(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Subscribe subscribes a group to a feed with a new queue (a new binding,
// counting from 0).
func (e *Engine) Subscribe(group, feed string) error {
	g, f := e.gByN[group], e.byName[feed]
	if g == nil || f == nil {
		return fmt.Errorf("%w: group %q feed %q", ErrUnknown, group, feed)
	}
	if slices.ContainsFunc(*g.bindings.Load(), func(b *binding) bool { return b.feed == f }) {
		return fmt.Errorf("engine: group %q already subscribes to feed %q", group, feed)
	}
	e.bind(f, g)
	f.signalReady()
	e.watch.note()
	return nil
}

// Unsubscribe removes a group's queue of a feed. What the queue held and the
// group did not process is never acknowledged in this run: a positioned feed
// holds its position before it (reported stalled) and a restart re-delivers.
// An operator may release that hold (Release), accepting the loss.
func (e *Engine) Unsubscribe(group, feed string) error {
	g, f := e.gByN[group], e.byName[feed]
	if g == nil || f == nil {
		return fmt.Errorf("%w: group %q feed %q", ErrUnknown, group, feed)
	}
	var b *binding
	f.mu.Lock()
	var nt []*binding
	for _, x := range f.targets {
		if x.group == g {
			b = x
			continue
		}
		nt = append(nt, x)
	}
	f.targets = nt
	if b != nil {
		b.removed.Store(true)
	}
	f.mu.Unlock()
	if b == nil {
		return fmt.Errorf("%w: group %q does not subscribe to feed %q", ErrUnknown, group, feed)
	}
	g.removeBinding(b)
	e.watch.note()
	return nil
}

// Fence stops a group from consuming (a quarantine in progress). A
// positioned feed pauses while any of its consumers is fenced, and nothing
// of the fenced queue's backlog is committed; a push feed drops (counted)
// what it would have queued for the fenced group.
// An operator may release the fenced queue's backlog (Release).
func (e *Engine) Fence(group string) error {
	g := e.gByN[group]
	if g == nil {
		return fmt.Errorf("%w: group %q", ErrUnknown, group)
	}
	g.fenced.Store(true)
	e.watch.note()
	return nil
}

// Unfence lets a fenced group consume again.
func (e *Engine) Unfence(group string) error {
	g := e.gByN[group]
	if g == nil {
		return fmt.Errorf("%w: group %q", ErrUnknown, group)
	}
	g.fenced.Store(false)
	g.notify()
	for _, b := range *g.bindings.Load() {
		b.feed.signalReady()
	}
	e.watch.note()
	return nil
}
