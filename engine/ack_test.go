package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// positioned builds an engine with one positioned feed "in" (the test is its
// source) subscribed by the given groups, each with one gate processor.
func positioned(t *testing.T, pol engine.Policy, queue int, gates map[string]*gate, names ...string) (*engine.Engine, *engine.Feed, *committer) {
	t.Helper()
	var groups []engine.GroupConfig
	for _, n := range names {
		groups = append(groups, engine.GroupConfig{Name: n, Feeds: []string{"in"}, Processors: procs("p-"+n, gates[n])})
	}
	e := start(t, engine.Config{Feeds: []engine.FeedConfig{{Name: "in", Policy: pol, QueueSize: queue}}, Groups: groups})
	f := e.Feed("in")
	c := &committer{}
	f.Intake().SetCommitter(c)
	return e, f, c
}

// settleCommit polls acknowledgements until the committed offset is want,
// then checks it does not move past it.
func settleCommit(t *testing.T, f *engine.Feed, c *committer, want int64) {
	t.Helper()
	eventually(t, "commit", func() bool {
		f.Intake().PollAcks()
		return c.Committed() == want
	})
	for i := 0; i < 20; i++ {
		f.Intake().PollAcks()
	}
	if got := c.Committed(); got != want {
		t.Fatalf("committed %d, want %d", got, want)
	}
}

func TestCommitFollowsTheSlowestOfThreeQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates := map[string]*gate{"a": newGate(false), "b": newGate(false), "c": newGate(false)}
		_, f, c := positioned(t, engine.Pause(), 64, gates, "a", "b", "c")
		publishAll(t, f, 1, 10)
		gates["a"].let(10)
		gates["b"].let(5)
		gates["c"].let(3)
		settleCommit(t, f, c, 3)
		gates["c"].let(7)
		settleCommit(t, f, c, 5)
		gates["b"].let(5)
		settleCommit(t, f, c, 10)
		for i := 1; i < len(c.acked); i++ {
			if c.acked[i] <= c.acked[i-1] {
				t.Fatalf("acknowledgements out of order: %v", c.acked)
			}
		}
	})
}

func TestRemovingOneOfTwoConsumersDoesNotCommitItsBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates := map[string]*gate{"fast": newGate(true), "slow": newGate(false)}
		e, f, c := positioned(t, engine.Pause(), 64, gates, "fast", "slow")
		publishAll(t, f, 1, 10)
		gates["slow"].let(4)
		settleCommit(t, f, c, 4)
		if err := e.Unsubscribe("slow", "in"); err != nil {
			t.Fatal(err)
		}
		gates["slow"].openUp() // whatever it was handling finishes; the rest is never given to it
		publishAll(t, f, 11, 20)
		eventually(t, "fast consumer", func() bool { return gates["fast"].count() == 20 })
		got := gates["slow"].count()
		settleCommit(t, f, c, int64(got))
		if got >= 10 {
			t.Fatalf("removed consumer processed %d items; test needs a backlog", got)
		}
		st := e.Status().Feeds[0]
		if st.Stalled == nil || st.Settled || !st.Lossless {
			t.Fatalf("status: stalled=%v settled=%v lossless=%v, want stalled, not settled, lossless", st.Stalled, st.Settled, st.Lossless)
		}
	})
}

func TestARemovedConsumerThatProcessedEverythingHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates := map[string]*gate{"a": newGate(true), "b": newGate(true)}
		e, f, c := positioned(t, engine.Pause(), 64, gates, "a", "b")
		publishAll(t, f, 1, 5)
		settleCommit(t, f, c, 5)
		if err := e.Unsubscribe("b", "in"); err != nil {
			t.Fatal(err)
		}
		publishAll(t, f, 6, 9)
		settleCommit(t, f, c, 9)
		if st := e.Status().Feeds[0]; st.Stalled != nil {
			t.Fatalf("stalled %q", *st.Stalled)
		}
	})
}

func TestTheLastConsumerGoneStopsReadingAndCommitting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates := map[string]*gate{"g": newGate(false)}
		e, f, c := positioned(t, engine.Pause(), 64, gates, "g")
		publishAll(t, f, 1, 5)
		gates["g"].let(2)
		settleCommit(t, f, c, 2)
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		if f.Intake().TryPublish(6, core.Position{Offset: 6}) {
			t.Fatal("TryPublish took an item with no live consumer")
		}
		st := e.Status().Feeds[0]
		if st.Consumers != 0 || st.Stalled == nil || st.Settled || !st.Lossless {
			t.Fatalf("status %+v: want consumers 0, stalled, not settled, lossless", st)
		}
		// A new subscriber resumes reading, but the pointer stays before the
		// removed consumer's items.
		if err := e.Subscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		gates["g"].openUp()
		publishAll(t, f, 6, 8)
		eventually(t, "new queue processed", func() bool { return gates["g"].count() == 6 })
		settleCommit(t, f, c, 3)
	})
}

func TestATransientFenceHoldsThePointer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates := map[string]*gate{"g": newGate(true)}
		e, f, c := positioned(t, engine.Pause(), 64, gates, "g")
		publishAll(t, f, 1, 3)
		settleCommit(t, f, c, 3)
		if err := e.Fence("g"); err != nil {
			t.Fatal(err)
		}
		if f.Intake().TryPublish(4, core.Position{Offset: 4}) {
			t.Fatal("a positioned feed took an item while its consumer was fenced")
		}
		if n := f.Intake().TryPublishBatch([]any{4, 5}, []core.Position{{Offset: 4}, {Offset: 5}}); n != 0 {
			t.Fatalf("a positioned feed took %d items of a batch while its consumer was fenced", n)
		}
		if st := e.Status().Feeds[0]; st.Stalled == nil {
			t.Fatal("fenced consumer not reported stalled")
		}
		settleCommit(t, f, c, 3)
		if err := e.Unfence("g"); err != nil {
			t.Fatal(err)
		}
		publishAll(t, f, 4, 6)
		settleCommit(t, f, c, 6)
	})
}

func TestAnExplicitDropDropsCountsAndCommitsPastTheDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(false)
		var mu sync.Mutex
		var drops []engine.Drop
		var order []any
		obs := engine.Observer{
			Dropped: func(_ string, d engine.Drop) {
				mu.Lock()
				defer mu.Unlock()
				drops = append(drops, d)
				order = append(order, "drop")
			},
			AfterDispatch: func(_ string, in *engine.Input) {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, in.Item)
			},
		}
		e := start(t, engine.Config{Observer: obs,
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 2}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}}})
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		if !f.Intake().TryPublish(1, core.Position{Offset: 1}) {
			t.Fatal("paused")
		}
		eventually(t, "item 1 taken", func() bool { return g.enteredCount() == 1 })
		for i := 2; i <= 10; i++ {
			if !f.Intake().TryPublish(i, core.Position{Offset: int64(i)}) {
				t.Fatalf("a DROP feed paused at %d", i)
			}
		}
		st := e.Status().Feeds[0]
		processedOrQueued := 3 // item 1 taken by the blocked group, 2 and 3 queued
		if st.Dropped != int64(10-processedOrQueued) || st.Lossless {
			t.Fatalf("dropped %d lossless %v, want %d false", st.Dropped, st.Lossless, 10-processedOrQueued)
		}
		if st.PendingAcks > 4 {
			t.Fatalf("pendingAcks %d: dropped items were not coalesced", st.PendingAcks)
		}
		g.openUp()
		settleCommit(t, f, c, 10)
		eventually(t, "dispatch", func() bool { return g.count() == processedOrQueued })
		mu.Lock()
		defer mu.Unlock()
		want := []any{1, 2, 3, "drop"}
		if len(order) != len(want) {
			t.Fatalf("order %v, want %v", order, want)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("order %v, want %v", order, want)
			}
		}
		if d := drops[0]; d.Count != 7 || d.FirstSeq != 4 || d.LastSeq != 10 || d.Approximate {
			t.Fatalf("drop %+v, want count 7 seq 4-10 exact", d)
		}
	})
}

func TestAStoppedFeedTakesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates := map[string]*gate{"g": newGate(true)}
		e, f, _ := positioned(t, engine.Pause(), 64, gates, "g")
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if f.Intake().TryPublish(1, core.Position{Offset: 1}) {
			t.Error("TryPublish took an item after Stop")
		}
		if n := f.Intake().TryPublishBatch([]any{1, 2}, []core.Position{{Offset: 1}, {Offset: 2}}); n != 0 {
			t.Errorf("TryPublishBatch took %d items after Stop", n)
		}
		if st := e.Status().Feeds[0]; st.Sequence != 0 || st.Paused || st.Pauses != 0 {
			t.Errorf("sequence %d paused %v pauses %d after publishing only after Stop, want 0, false, 0", st.Sequence, st.Paused, st.Pauses)
		}
	})
}

// heldCommitter's Commit waits, while held, for the test to release it with
// an error or nil.
type heldCommitter struct {
	committer
	held    atomic.Bool
	entered chan struct{}
	release chan error
}

func (c *heldCommitter) Commit() error {
	if c.held.Load() {
		c.entered <- struct{}{}
		if err := <-c.release; err != nil {
			return err
		}
	}
	return c.committer.Commit()
}

// A feed is settled only once the items acknowledged to its committer are
// committed: not while the commit runs, not after it failed; the next poll
// commits again although nothing new was acknowledged.
func TestAFeedIsSettledOnlyOnceItsCommitSucceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, engine.Config{Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", newGate(true))}}})
		f := e.Feed("in")
		c := &heldCommitter{entered: make(chan struct{}, 1), release: make(chan error, 1)}
		c.held.Store(true)
		t.Cleanup(func() { // before the engine's Stop commits
			c.held.Store(false)
			select {
			case c.release <- nil: // a commit still held after a failure
			default:
			}
		})
		f.Intake().SetCommitter(c)
		f.Intake().SetState(engine.StateCaughtUp, "")
		if !f.Intake().TryPublish(1, core.Position{Offset: 10}) {
			t.Fatal("paused")
		}
		eventually(t, "the item dispatched", func() bool { return e.Status().Feeds[0].Subscribers[0].Drained })
		poll := func() <-chan error {
			done := make(chan error, 1)
			go func() {
				_, err := f.Intake().PollAcks()
				done <- err
			}()
			return done
		}
		check := func(when string, settled bool, pending int, acked int64) {
			t.Helper()
			st := e.Status().Feeds[0]
			if st.Settled != settled || st.PendingAcks != pending || st.Acknowledged != acked {
				t.Fatalf("%s: settled %v, pendingAcks %d, acknowledged %d; want %v, %d, %d",
					when, st.Settled, st.PendingAcks, st.Acknowledged, settled, pending, acked)
			}
		}
		check("before a poll", false, 1, 0)
		done := poll()
		<-c.entered
		check("during a commit", false, 1, 0)
		c.release <- errors.New("disk full")
		if err := <-done; err == nil {
			t.Fatal("PollAcks returned no error for a failed commit")
		}
		check("after a failed commit", false, 1, 0)
		done = poll()
		<-c.entered
		c.release <- nil
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		check("after the commit", true, 0, 1)
		if got := c.Committed(); got != 10 {
			t.Fatalf("committed %d, want 10", got)
		}
	})
}
