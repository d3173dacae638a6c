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
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// positioned builds an engine with one positioned feed "in" (the test is its
// source) subscribed by the given groups, each with one turnstile processor.
func positioned(t *testing.T, pol engine.Policy, queue int, gates map[string]*turnstile, names ...string) (*engine.Engine, *engine.Feed, *committer) {
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
	testutil.WhenBlocked(t, "commit", func() bool {
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

// The commit scenarios (the slowest queue, a consumer removed, the last
// one gone, a transient fence) are transcripts: testdata/commit/
// (TestCommitScenarios).

func TestAnExplicitDropDropsCountsAndCommitsPastTheDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(false)
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
		testutil.WhenBlocked(t, "item 1 taken", func() bool { return g.enteredCount() == 1 })
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
		testutil.WhenBlocked(t, "dispatch", func() bool { return g.count() == processedOrQueued })
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
		gates := map[string]*turnstile{"g": newTurnstile(true)}
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
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", newTurnstile(true))}}})
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
		testutil.WhenBlocked(t, "the item dispatched", func() bool { return e.Status().Feeds[0].Subscribers[0].Drained })
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
