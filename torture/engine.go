package torture

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
)

// engineSpec is an engine scenario: the delivery engine driven in-process
// through its API by an operator's sequence of actions (fence a group,
// unsubscribe it, take and release holds, journal into the feed itself),
// each scenario one property of docs/GUARANTEES.md with its sizes and
// timings drawn from the seed. A plain value.
type engineSpec struct {
	Property string // one of engineProperties
	Items    int
	Queue    int
	Workers  int
	Deadline time.Duration
	Draw     uint64 // the seed of what a property draws for itself (kill, release, lossstate)
}

// The properties an engine scenario checks.
var engineProperties = []string{
	"fenced-block",  // a fenced group never holds a BLOCK push feed: its copy is dropped and counted, the healthy group gets every item at once
	"stale-token",   // a completion claimed before an unsubscribe and resubscribe is refused (stale) and never moves the commit
	"hold-release",  // releasing a hold that was released and taken again never ends the live hold
	"unsubscribed",  // workers stop handling the claimed items of a queue once it is unsubscribed
	"journal-offer", // a journal that offers into its own feed never hangs the publish
	"kill",          // a kill (Engine.Kill or the KillSwitch) commits exactly the contiguous dispatched prefix; the restart delivers the rest
	"release",       // an operator release is a loss of exactly what the held queue had not completed; everything else is delivered
	"lossstate",     // a never-drop binding's loss latches it until the operator clears it; a drop binding's degrades it until its quiet period passed
	"operator",      // a drawn step list of publishes and operator actions (pause, resume, clear, release, seek, kill, and attempts refused): what is released or skipped is a recorded loss, everything else is delivered
}

func genEngine(r *rand.Rand) engineSpec {
	return engineSpec{Property: pick(r, engineProperties...), Items: 20 + r.IntN(200), Queue: 2 + r.IntN(16),
		Workers: 2 + r.IntN(6), Deadline: time.Duration(200+r.IntN(300)) * time.Millisecond, Draw: r.Uint64()}
}

// dimensions names the scenario's property; an operator scenario ending
// with a backwards seek is also "operator=back" (counted, not one of
// AllDimensions).
func (e engineSpec) dimensions() []string {
	d := []string{"kind=engine", "engine=" + e.Property}
	if e.Property == "operator" {
		if _, _, steps := opDraw(e); len(steps) > 0 && steps[len(steps)-1].Kind == "back" {
			d = append(d, "operator=back")
		}
	}
	return d
}

// checkEngine runs the engine scenario and returns what broke, and what
// the scenario did (the operator property's steps, printed with a failure).
func checkEngine(ctx context.Context, s scenarioSpec) ([]Violation, []string) {
	var vs []Violation
	var events []string
	fail := func(format string, args ...any) {
		vs = append(vs, Violation{Invariant: InvEngine, What: fmt.Sprintf(format, args...)})
	}
	e := s.Engine
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	switch e.Property {
	case "fenced-block":
		err = fencedBlock(ctx, e, fail)
	case "stale-token":
		err = staleToken(ctx, e, fail)
	case "hold-release":
		err = holdRelease(ctx, e, fail)
	case "unsubscribed":
		err = unsubscribed(ctx, e, fail)
	case "journal-offer":
		err = journalOffer(ctx, e, fail)
	case "kill":
		err = killRun(ctx, e, fail)
	case "release":
		err = releaseRun(ctx, e, fail)
	case "lossstate":
		err = lossStateRun(ctx, e, fail)
	case "operator":
		err = operatorRun(ctx, e, fail, func(ev string) { events = append(events, ev) })
	default:
		err = fmt.Errorf("unknown engine property %q", e.Property)
	}
	if err != nil {
		fail("%s: %v", e.Property, err)
	}
	return vs, events
}

// quiet discards the engines' warnings (a scenario's stop cuts a fenced
// group's item, as it should).
var quiet = slog.New(slog.DiscardHandler)

// InvEngine: the engine keeps its documented rules under an operator's
// actions (docs/GUARANTEES.md).
const InvEngine = 6

// counter is a processor that counts its items (safe for concurrent use:
// each worker has its own, the count is shared).
type counter struct {
	n       *atomic.Int64
	gate    <-chan struct{} // when set, each item waits for it
	entered chan<- struct{} // when set, told (without waiting) that an item is being handled
}

func (c counter) OnEvent(cy *core.Cycle, _ any) error {
	if c.entered != nil {
		select {
		case c.entered <- struct{}{}:
		default:
		}
	}
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-cy.Context().Done():
			return cy.Context().Err()
		}
	}
	c.n.Add(1)
	return nil
}

func procs(name string, n *atomic.Int64, gate <-chan struct{}) []engine.ProcessorConfig {
	return procsTold(name, n, gate, nil)
}

// procsTold is procs whose instances tell entered when they handle an item.
func procsTold(name string, n *atomic.Int64, gate <-chan struct{}, entered chan<- struct{}) []engine.ProcessorConfig {
	c := counter{n: n, gate: gate, entered: entered}
	return []engine.ProcessorConfig{{Name: name, Processor: c, New: func() (core.Processor, error) { return c, nil }}}
}

// fencedBlock: a push feed under BLOCK with two groups; the second, slow,
// has its queue full when it is fenced: every later publish goes through
// at once (the fenced group's copy dropped and counted) and the healthy
// group handles every item.
func fencedBlock(ctx context.Context, e engineSpec, fail func(string, ...any)) error {
	var healthy, fenced atomic.Int64
	gate := make(chan struct{})
	defer close(gate)
	eng, err := engine.New(engine.Config{Logger: quiet,
		Feeds: []engine.FeedConfig{{Name: "f", Policy: engine.BlockWithDeadline(e.Deadline), QueueSize: e.Queue}},
		Groups: []engine.GroupConfig{
			{Name: "healthy", Feeds: []string{"f"}, Processors: procs("h", &healthy, nil)},
			{Name: "fenced", Feeds: []string{"f"}, Processors: procs("x", &fenced, gate)},
		},
	})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(context.WithoutCancel(ctx))
	f := eng.Feed("f")
	// The slow group takes one item and waits; its queue fills.
	for i := range e.Queue + 1 {
		if err := f.Publish(ctx, i); err != nil {
			return fmt.Errorf("filling the slow group's queue: %w", err)
		}
	}
	if err := eng.Fence("fenced"); err != nil {
		return err
	}
	slow := 0
	for i := range e.Items {
		began := time.Now()
		if err := f.Publish(ctx, e.Queue+1+i); err != nil {
			fail("fenced-block: publish %d refused: %v (the healthy group never gets it)", e.Queue+1+i, err)
			return nil
		}
		if time.Since(began) > e.Deadline/2 {
			slow++
		}
	}
	if slow > 0 {
		fail("fenced-block: %d of %d publishes waited for the fenced group's queue (deadline %s)", slow, e.Items, e.Deadline)
	}
	if st := f.Status(); st.Dropped < int64(e.Items) {
		fail("fenced-block: the fenced group's copies: %d dropped, want at least %d counted", st.Dropped, e.Items)
	}
	return nil
}

// staleToken: a group of workers on a positioned feed; while a worker
// holds a claim, the group is unsubscribed and subscribed again; the old
// claim's completion must be refused and the commit must not move past
// an item the new queue did not handle.
func staleToken(ctx context.Context, e engineSpec, fail func(string, ...any)) error {
	var n atomic.Int64
	gate := make(chan struct{})
	items := make([]any, e.Items)
	for i := range items {
		items[i] = i
	}
	log := memsource.NewLog(items...)
	entered := make(chan struct{}, 1)
	eng, err := engine.New(engine.Config{Logger: quiet,
		Feeds:  []engine.FeedConfig{{Name: "f", Source: log.Source(), QueueSize: e.Queue}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"f"}, Workers: e.Workers, Processors: procsTold("p", &n, gate, entered)}},
	})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(context.WithoutCancel(ctx))
	select { // a worker is in the middle of an item it claimed
	case <-entered:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := eng.Unsubscribe("g", "f"); err != nil {
		return err
	}
	if err := eng.Subscribe("g", "f"); err != nil {
		return err
	}
	before := log.Committed()
	close(gate) // the old claims complete now, after the resubscribe
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if waitFor(wctx, func() bool { return eng.Status().Groups[0].StaleTokens > 0 }) != nil {
		fail("stale-token: %d items handled, staleTokens 0: the completions of the old queue's claims were never refused (commit %d, was %d)",
			n.Load(), log.Committed(), before)
	}
	return nil
}

// holdRelease: a hold taken, released, taken again; releasing the first
// handle again must not end the second hold: nothing is committed while
// the live hold marks nothing durable.
func holdRelease(ctx context.Context, e engineSpec, fail func(string, ...any)) error {
	var n atomic.Int64
	items := make([]any, e.Items)
	for i := range items {
		items[i] = i
	}
	log := memsource.NewLog(items...)
	eng, err := engine.New(engine.Config{Logger: quiet,
		Feeds:  []engine.FeedConfig{{Name: "f", Source: log.Source(), QueueSize: e.Queue}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"f"}, Processors: procs("p", &n, nil)}},
	})
	if err != nil {
		return err
	}
	h1, err := eng.Hold("f", "g")
	if err != nil {
		return err
	}
	h1.Release()
	h2, err := eng.Hold("f", "g")
	if err != nil {
		return err
	}
	_ = h2 // the live hold: it marks nothing durable
	h1.Release()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(context.WithoutCancel(ctx))
	if err := waitFor(ctx, func() bool { return n.Load() >= int64(e.Items) }); err != nil {
		return fmt.Errorf("items not handled: %w", err)
	}
	// Give the source a few duty cycles to commit what it may.
	time.Sleep(20 * time.Millisecond)
	if c := log.Committed(); c > 0 {
		fail("hold-release: releasing an old hold ended the live one: %d items committed while the live hold made nothing durable", c)
	}
	return nil
}

// unsubscribed: workers, slow items; once Unsubscribe returns, at most
// the items a worker was in the middle of are handled.
func unsubscribed(ctx context.Context, e engineSpec, fail func(string, ...any)) error {
	var n atomic.Int64
	gate := make(chan struct{})
	ch := make(chan any)
	eng, err := engine.New(engine.Config{Logger: quiet,
		Feeds:  []engine.FeedConfig{{Name: "f", Source: memsource.NewChan(ch), Policy: engine.Pause(), QueueSize: e.Items}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"f"}, Workers: e.Workers, Processors: procs("p", &n, gate)}},
	})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(context.WithoutCancel(ctx))
	for i := range e.Items {
		select {
		case ch <- i:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := waitFor(ctx, func() bool { return eng.Status().Groups[0].InFlight >= int64(min(e.Workers, e.Items)) }); err != nil {
		return err
	}
	if err := eng.Unsubscribe("g", "f"); err != nil {
		return err
	}
	close(gate)
	if err := waitFor(ctx, func() bool { return eng.Status().Groups[0].InFlight == 0 }); err != nil {
		return err
	}
	if got := n.Load(); got > int64(e.Workers) {
		fail("unsubscribed: %d items handled after the queue was unsubscribed (at most the %d a worker was in the middle of)", got, e.Workers)
	}
	return nil
}

// journalOffer: a journal that offers an item into its own feed from
// Append: every publish returns.
func journalOffer(ctx context.Context, e engineSpec, fail func(string, ...any)) error {
	var n atomic.Int64
	j := &offeringJournal{}
	eng, err := engine.New(engine.Config{Logger: quiet,
		Feeds:  []engine.FeedConfig{{Name: "f", Policy: engine.DropAfterSpin(0), QueueSize: e.Items * 2, Journal: j}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"f"}, Processors: procs("p", &n, nil)}},
	})
	if err != nil {
		return err
	}
	j.feed = eng.Feed("f")
	if err := eng.Start(ctx); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		for i := range e.Items {
			if err := j.feed.Publish(ctx, i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			fail("journal-offer: publish: %v", err)
		}
		return eng.Stop(context.WithoutCancel(ctx))
	case <-time.After(5 * time.Second):
		// The engine cannot be stopped: its feed's lock is held by the
		// hung publish. It is left behind.
		fail("journal-offer: a publish hung: the journal's Offer into its own feed waits for the lock its Append runs under")
		return nil
	}
}

// offeringJournal offers one extra item into its own feed for every tenth
// item it stores.
type offeringJournal struct {
	mu   sync.Mutex
	feed *engine.Feed
}

func (j *offeringJournal) Append(_ context.Context, _ string, seq int64, item any) error {
	if _, extra := item.(string); !extra && seq%10 == 0 {
		return j.feed.Offer(fmt.Sprintf("extra-%d", seq))
	}
	return nil
}

// waitFor polls cond every millisecond until it holds or ctx is done.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
