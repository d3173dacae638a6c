package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// gated is the processor of the kill tests, shared by every worker's
// instance: the item it gates waits for its gate (ignoring Cycle.Context,
// as a processor busy with a slow call does, unless cancellable: then it
// fails once its context is cancelled), each item registers a completion
// that records it, and every item handled is recorded.
type gated struct {
	item        any
	cancellable bool
	gate        *testutil.Gate
	entered     chan struct{} // closed once the gated item's processor began
	mu          sync.Mutex
	handled     []any
	completed   []any
}

func newGated(t *testing.T, item any) *gated {
	return &gated{item: item, gate: testutil.NewGate(t), entered: make(chan struct{})}
}

func (g *gated) New() (core.Processor, error) { return g, nil }

func (g *gated) OnEvent(c *core.Cycle, ev any) error {
	c.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
		g.mu.Lock()
		g.completed = append(g.completed, ev)
		g.mu.Unlock()
		return nil
	}))
	if ev == g.item {
		close(g.entered)
		if !g.cancellable {
			g.gate.Wait()
		} else if err := g.waitOr(c.Context()); err != nil {
			return err
		}
	}
	g.mu.Lock()
	g.handled = append(g.handled, ev)
	g.mu.Unlock()
	return nil
}

// waitOr waits for the gate or ctx, returning ctx's error if it ended first.
func (g *gated) waitOr(ctx context.Context) error {
	opened := make(chan struct{})
	go func() { g.gate.Wait(); close(opened) }()
	select {
	case <-opened:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) seen() (handled, completed []any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return sorted(g.handled), sorted(g.completed)
}

// killConfig is one positioned feed "in" read from log, and one group "g"
// of processor "p" (g's instances) on workers, OrderNone, with MaxGap.
func killConfig(log *memsource.Log, p *gated, workers, maxGap int, abandon bool) engine.Config {
	return engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 64}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: workers, MaxGap: maxGap, Order: engine.OrderNone,
			Processors: []engine.ProcessorConfig{{Name: "p", New: p.New}}}},
		DrainTimeout: time.Second,
		KillAbandon:  abandon,
	}
}

// runToTheGap starts an engine on items 1..8 of a closed log, item 3
// gated, on 4 workers with MaxGap 3: once every goroutine is blocked, 1 and
// 2 are done, 3 is in flight, 4, 5 and 6 are done beyond it (the gap is
// full) and 7 and 8 wait in the queue, never taken.
func runToTheGap(t *testing.T, abandon, cancellable bool) (*engine.Engine, *memsource.Log, *gated) {
	t.Helper()
	log := memsource.NewLog(1, 2, 3, 4, 5, 6, 7, 8)
	log.Close()
	p := newGated(t, 3)
	p.cancellable = cancellable
	cfg := killConfig(log, p, 4, 3, abandon)
	cfg.Logger = testutil.Logger(t)
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-p.entered
	testutil.Advance(time.Millisecond) // the source's duty cycle polls and commits
	if h, _ := p.seen(); !slices.Equal(h, []any{1, 2, 4, 5, 6}) {
		t.Fatalf("before the kill handled %v, want 1, 2, 4, 5, 6 (3 held, 7 and 8 past the gap)", h)
	}
	if got := log.Committed(); got != 2 {
		t.Fatalf("before the kill committed through %d, want 2", got)
	}
	return e, log, p
}

// A kill commits the contiguous prefix of what was dispatched, never what
// lies beyond a gap: items 4-6, completed beyond in-flight item 3, are
// committed only once 3 finishes (the kill lets it: KillAbandon false),
// and 7 and 8, queued and never taken, are neither processed nor
// committed.
func TestAKillCommitsOnlyTheContiguousPrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before, _ := testutil.CountGoroutines()
		e, log, p := runToTheGap(t, false, false)
		if err := e.Kill("operator: bad deploy"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := log.Committed(); got != 2 {
			t.Fatalf("with 3 in flight the kill committed through %d, want 2 (4-6 lie beyond the gap)", got)
		}
		p.gate.Open() // the item in flight finishes
		if err := e.Stop(context.Background()); err != nil {
			t.Fatalf("Stop after Kill: %v", err)
		}
		handled, completed := p.seen()
		if want := []any{1, 2, 3, 4, 5, 6}; !slices.Equal(handled, want) || !slices.Equal(completed, want) {
			t.Fatalf("handled %v, completed %v: want 1-6 (the item in flight finished), never the queued 7 and 8", handled, completed)
		}
		if got := log.Committed(); got != 6 {
			t.Fatalf("committed through %d, want 6: the prefix 3 completed, not the queued 7 and 8", got)
		}
		testutil.CheckNoLeak(t, before)
	})
}

// A kill with KillAbandon abandons the item in flight: although its
// processor returns nil once its gate opens after the kill, its completion
// never runs, it is not dispatched, and nothing from it on is committed:
// the commit stays at 2 with 4-6 completed beyond it.
func TestAKillThatAbandonsInFlightItemsCommitsNoneOfThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before, _ := testutil.CountGoroutines()
		e, log, p := runToTheGap(t, true, false)
		if err := e.Kill("operator: stop now"); err != nil {
			t.Fatal(err)
		}
		p.gate.Open() // the processor returns nil: too late, it was abandoned
		if err := e.Stop(context.Background()); err != nil {
			t.Fatalf("Stop after Kill: %v", err)
		}
		handled, completed := p.seen()
		if !slices.Equal(handled, []any{1, 2, 3, 4, 5, 6}) || !slices.Equal(completed, []any{1, 2, 4, 5, 6}) {
			t.Fatalf("handled %v, completed %v: want 3 handled and never completed", handled, completed)
		}
		if got := log.Committed(); got != 2 {
			t.Fatalf("committed through %d, want 2: abandoned 3 is not dispatched, 4-6 lie beyond it", got)
		}
		testutil.CheckNoLeak(t, before)
	})
}

// The crash-style test: a run killed with item 3 in flight on one of four
// workers, 4-6 completed beyond it and 7-8 queued; the item in flight
// never completes (abandoned: its processor returns once the kill is
// over; or, letting it finish, it fails on its context, cancelled at the
// drain timeout). A new engine on the same log delivers every item past
// the committed prefix (3-8), once each, and nothing of the prefix; then
// it commits them all.
func TestAKilledRunsItemsAreDeliveredByTheNextRun(t *testing.T) {
	for _, abandon := range []bool{true, false} {
		name := map[bool]string{true: "abandon", false: "finish"}[abandon]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, log, p := runToTheGap(t, abandon, !abandon)
				if err := e.Kill("crash drill"); err != nil {
					t.Fatal(err)
				}
				if abandon {
					p.gate.Open()
				}
				if err := e.Stop(context.Background()); err != nil {
					t.Fatalf("Stop after Kill: %v", err)
				}
				prefix := log.Committed()
				if prefix != 2 {
					t.Fatalf("run 1 committed through %d, want exactly the prefix 2", prefix)
				}
				p2 := newGated(t, nil)
				cfg := killConfig(log, p2, 4, 3, false)
				cfg.Logger = testutil.Logger(t)
				e2, err := engine.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e2.RunSettled(context.Background()); err != nil {
					t.Fatal(err)
				}
				if handled, _ := p2.seen(); !slices.Equal(handled, []any{3, 4, 5, 6, 7, 8}) {
					t.Fatalf("run 2 handled %v, want every item past the prefix: 3-8", handled)
				}
				if got := log.Committed(); got != 8 {
					t.Fatalf("run 2 committed through %d, want 8", got)
				}
			})
		})
	}
}

// A kill stops every feed's intake before Kill returns: a push Publish and
// an Offer are refused with ErrKilled (not counted as refused or dropped:
// nothing was numbered), a TryPublish takes nothing and counts no pause;
// the status says killed and why, is not settled, and stays lossless for
// a positioned feed (what it did not take is read again).
func TestAKillStopsIntakeAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var killed []string
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{
				{Name: "push", Policy: engine.DropAfterSpin(0), QueueSize: 8},
				{Name: "pos", Policy: engine.Pause(), QueueSize: 8},
			},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"push", "pos"}, Processors: procs("p", newTurnstile(true))}},
			Observer: engine.Observer{Killed: func(reason string) { killed = append(killed, reason) }},
		})
		c := &committer{}
		pos := e.Feed("pos")
		pos.Intake().SetCommitter(c)
		publishAll(t, pos, 1, 2)
		synctest.Wait()
		if err := e.Kill("disk full"); err != nil {
			t.Fatal(err)
		}
		if err := e.Feed("push").Publish(context.Background(), "late"); !errors.Is(err, engine.ErrKilled) {
			t.Errorf("Publish after Kill: %v, want ErrKilled", err)
		}
		if err := e.Feed("push").Offer("late"); !errors.Is(err, engine.ErrKilled) {
			t.Errorf("Offer after Kill: %v, want ErrKilled", err)
		}
		if pos.Intake().TryPublish(3, core.Position{Offset: 3}) {
			t.Error("TryPublish after Kill took the item")
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatalf("Stop after Kill: %v", err)
		}
		st := e.Status()
		if st.Killed != "disk full" || st.Settled || !st.Lossless {
			t.Errorf("status killed %q settled %v lossless %v: want killed \"disk full\", not settled, lossless", st.Killed, st.Settled, st.Lossless)
		}
		for _, fs := range st.Feeds {
			if fs.Refused != 0 || fs.Dropped != 0 || fs.Pauses != 0 || fs.Settled {
				t.Errorf("feed %s: %+v: want nothing refused, dropped or paused, not settled", fs.Feed, fs)
			}
		}
		if c.Committed() != 2 {
			t.Errorf("committed %d, want 2", c.Committed())
		}
		if !slices.Equal(killed, []string{"disk full"}) {
			t.Errorf("Observer.Killed called with %q, want once with the reason", killed)
		}
	})
}

// Kill is idempotent (a second Kill keeps the first reason), Stop after
// it returns at once (no drain: not a moment of the bubble's clock goes
// by) as often as it is called, and Kill before Start or after Stop does
// nothing and says why.
func TestKillIsIdempotentAndStopAfterItReturnsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", newTurnstile(true))}},
			Logger: testutil.Logger(t),
		}
		e, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Kill("too early"); !errors.Is(err, engine.ErrNotStarted) {
			t.Errorf("Kill before Start: %v, want ErrNotStarted", err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e.Feed("in").Publish(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if err := e.Kill("first"); err != nil {
			t.Fatal(err)
		}
		if err := e.Kill("second"); err != nil {
			t.Errorf("a second Kill: %v, want nil", err)
		}
		began := time.Now()
		for range 2 {
			if err := e.Stop(context.Background()); err != nil {
				t.Errorf("Stop after Kill: %v", err)
			}
		}
		if d := time.Since(began); d != 0 {
			t.Errorf("Stop after Kill took %s of the bubble's clock, want none (no drain)", d)
		}
		if got := e.Status().Killed; got != "first" {
			t.Errorf("killed %q, want the first reason", got)
		}

		e2, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e2.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e2.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e2.Kill("too late"); !errors.Is(err, engine.ErrStopped) {
			t.Errorf("Kill after Stop: %v, want ErrStopped", err)
		}
		if st := e2.Status(); st.Killed != "" {
			t.Errorf("a Kill after Stop left killed %q", st.Killed)
		}
	})
}

// The kill switch (Config.KillSwitch) is asked before each item is taken:
// once it says kill, the engine is killed with its reason before the next
// item, the items after it are never processed, and WaitSettled returns
// ErrKilled instead of waiting for a settle that never comes.
func TestAKillSwitchKillsBeforeTheNextItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog(1, 2, 3, 4, 5)
		log.Close()
		tu := newTurnstile(true)
		var asked atomic.Int64
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", tu)}},
			KillSwitch: func() (string, bool) {
				asked.Add(1)
				if tu.count() >= 2 {
					return "two is enough", true
				}
				return "", false
			},
		})
		_, err := e.WaitSettled(context.Background())
		if !errors.Is(err, engine.ErrKilled) {
			t.Fatalf("WaitSettled: %v, want ErrKilled", err)
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := tu.items(); !slices.Equal(got, []any{1, 2}) {
			t.Errorf("handled %v, want 1 and 2 only", got)
		}
		if got := e.Status().Killed; got != "two is enough" {
			t.Errorf("killed %q, want the switch's reason", got)
		}
		if got := log.Committed(); got != 2 {
			t.Errorf("committed through %d, want 2", got)
		}
		if asked.Load() < 3 {
			t.Errorf("the switch was asked %d times, want before each item", asked.Load())
		}
	})
}

// A processor may kill the engine from its own cycle (Kill never waits for
// a group): the item it is handling is in flight and finishes (its
// completion runs, it is committed), nothing after it is taken.
func TestAKillFromAProcessorLetsItsOwnItemFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog(1, 2, 3, 4)
		log.Close()
		var e *engine.Engine
		var completed []any
		p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			c.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
				completed = append(completed, ev)
				return nil
			}))
			if ev == 2 {
				return e.Kill("processor saw 2")
			}
			return nil
		})
		e, err := engine.New(engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}},
			Logger: testutil.Logger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(completed, []any{1, 2}) {
			t.Errorf("completed %v, want 1 and 2 (the killer's own item finishes)", completed)
		}
		if got := log.Committed(); got != 2 {
			t.Errorf("committed through %d, want 2", got)
		}
	})
}

// A kill loses what it leaves queued in a push feed (no source reads it
// again): the status says not lossless, as it does not for a positioned
// feed (TestAKillStopsIntakeAtOnce).
func TestAKillThatLeavesAPushFeedsItemsQueuedIsNotLossless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tu := newTurnstile(false)
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "push", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"push"}, Processors: procs("p", tu)}},
		})
		for i := 1; i <= 3; i++ {
			if err := e.Feed("push").Publish(context.Background(), i); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // 1 in flight, 2 and 3 queued
		if err := e.Kill("stop"); err != nil {
			t.Fatal(err)
		}
		tu.openUp()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := tu.items(); !slices.Equal(got, []any{1}) {
			t.Errorf("handled %v, want 1 only", got)
		}
		if st := e.Status(); st.Lossless || st.Feeds[0].Lossless {
			t.Errorf("status %+v: want not lossless (2 and 3 are gone)", st)
		}
	})
}

// A BLOCK publish waiting for room when the kill comes is refused with
// ErrKilled at once (not counted as refused: the run was killed, nothing
// was numbered), without waiting out its deadline.
func TestAKillRefusesAWaitingBlockingPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, _ := blockEngine(t, time.Hour)
		done := make(chan error, 1)
		go func() { done <- e.Feed("in").Publish(context.Background(), 3) }()
		synctest.Wait() // the publisher waits for room in the gated group's queue
		began := time.Now()
		if err := e.Kill("operator"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, engine.ErrKilled) {
			t.Fatalf("the waiting publish: %v, want ErrKilled", err)
		}
		if d := time.Since(began); d != 0 {
			t.Errorf("refused after %s of the bubble's clock, want at once", d)
		}
		if fs := e.Status().Feeds[0]; fs.Refused != 0 || fs.Sequence != 2 {
			t.Errorf("refused %d, sequence %d: want 0 and 2", fs.Refused, fs.Sequence)
		}
	})
}

// timed sets a timer on item 1, waits for its gate on item 2, and counts
// the timers that fired.
type timed struct {
	gate  *testutil.Gate
	fired atomic.Int64
}

func (p *timed) OnEvent(c *core.Cycle, ev any) error {
	if ev == 1 {
		c.After(time.Second)
	} else {
		p.gate.Wait()
	}
	return nil
}

func (p *timed) OnTimer(*core.Cycle, int) error {
	p.fired.Add(1)
	return nil
}

// A kill fires no timer: a timer that falls due after the kill, while the
// group finishes the item it had in flight, never fires (it is work the
// run had not begun).
func TestNoTimerFiresAfterAKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &timed{gate: testutil.NewGate(t)}
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}},
		})
		for i := 1; i <= 2; i++ {
			if err := e.Feed("in").Publish(context.Background(), i); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // item 2 in flight, the timer of item 1 pending
		if err := e.Kill("operator"); err != nil {
			t.Fatal(err)
		}
		testutil.Advance(2 * time.Second) // the timer is due; the drain timeout (5s) is not over
		p.gate.Open()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := p.fired.Load(); n != 0 {
			t.Errorf("%d timers fired after the kill, want none", n)
		}
	})
}

// killingJournal kills its engine when it journals seq 2.
type killingJournal struct{ e *engine.Engine }

func (j *killingJournal) Append(_ context.Context, _ string, seq int64, _ any) error {
	if seq == 2 {
		return j.e.Kill("journal full")
	}
	return nil
}

// A Journal may kill the engine from Append, which runs under the feed's
// lock: Kill does not wait for it. The publish under way completes (its
// item is journalled and queued), the next one is refused.
func TestAJournalMayKillTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &killingJournal{}
		tu := newTurnstile(true)
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8, Journal: j}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", tu)}},
		})
		j.e = e
		ctx := context.Background()
		for i := 1; i <= 2; i++ {
			if err := e.Feed("in").Publish(ctx, i); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		if err := e.Feed("in").Publish(ctx, 3); !errors.Is(err, engine.ErrKilled) {
			t.Fatalf("publish 3 after the journal's kill: %v, want ErrKilled", err)
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if st := e.Status(); st.Killed != "journal full" || st.Feeds[0].Sequence != 2 {
			t.Errorf("killed %q, sequence %d: want \"journal full\" and 2", st.Killed, st.Feeds[0].Sequence)
		}
	})
}
