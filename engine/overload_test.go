package engine_test

import (
	"context"
	"errors"
	"fmt"
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

func TestPauseLosesNothingUnderASlowConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10000
		var mu sync.Mutex
		var got []any
		slow := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			time.Sleep(2 * time.Microsecond) // the slow work, on the bubble's clock
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
			return nil
		})
		log := memsource.NewLog()
		for i := 1; i <= n; i++ {
			log.Append(i)
		}
		log.Close()
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 1024}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", slow)}}})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := e.WaitSettled(ctx)
		if err != nil {
			t.Fatalf("not settled: %+v", st)
		}
		fs := st.Feeds[0]
		if fs.Dropped != 0 || !fs.Lossless || fs.Policy != string(engine.PauseKind) || fs.Pauses == 0 {
			t.Fatalf("status %+v: want 0 dropped, lossless, PAUSE, pauses > 0", fs)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != n {
			t.Fatalf("processed %d, want %d", len(got), n)
		}
		for i, v := range got {
			if v != i+1 {
				t.Fatalf("item %d is %v: not every item once in order", i, v)
			}
		}
		if log.Committed() != n {
			t.Fatalf("committed %d, want %d", log.Committed(), n)
		}
	})
}

// blockEngine has feed "in" under BLOCK_WITH_DEADLINE with a queue of one,
// subscribed by an open group "open" and a gated group "gated".
func blockEngine(t *testing.T, deadline time.Duration) (*engine.Engine, *turnstile, *turnstile) {
	open, gated := newTurnstile(true), newTurnstile(false)
	e := start(t, engine.Config{DrainTimeout: 200 * time.Millisecond,
		Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.BlockWithDeadline(deadline), QueueSize: 1}},
		Groups: []engine.GroupConfig{
			{Name: "open", Feeds: []string{"in"}, Processors: procs("o", open)},
			{Name: "gated", Feeds: []string{"in"}, Processors: procs("g", gated)}}})
	t.Cleanup(gated.openUp)
	f := e.Feed("in")
	ctx := context.Background()
	// item 1 is taken by the gated group (blocked in it), item 2 fills its queue
	if err := f.Publish(ctx, 1); err != nil {
		t.Fatal(err)
	}
	testutil.WhenBlocked(t, "item 1 taken", func() bool { return gated.enteredCount() == 1 })
	if err := f.Publish(ctx, 2); err != nil {
		t.Fatal(err)
	}
	testutil.WhenBlocked(t, "open group", func() bool { return open.count() == 2 })
	return e, open, gated
}

func TestBlockRefusesAtTheDeadlineAndDeliversToNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, open, gated := blockEngine(t, 30*time.Millisecond)
		f := e.Feed("in")
		began := time.Now()
		err := f.Publish(context.Background(), 3)
		var re *engine.RefusedError
		if !errors.As(err, &re) || !errors.Is(err, engine.ErrRefused) || re.Reason != engine.RefusedDeadline {
			t.Fatalf("err %v, want a deadline refusal", err)
		}
		if waited := time.Since(began); waited < 30*time.Millisecond {
			t.Fatalf("refused after %s, before the deadline", waited)
		}
		st := e.Status().Feeds[0]
		if st.Sequence != 2 || st.Refused != 1 || st.Lossless {
			t.Fatalf("status sequence %d refused %d lossless %v: a refusal must number nothing and count", st.Sequence, st.Refused, st.Lossless)
		}
		if got := open.count(); got != 2 {
			t.Fatalf("open group got %d items: a refused publish reached it", got)
		}
		// Retrying after room appears delivers once to each: no duplicate.
		gated.openUp()
		if err := f.Publish(context.Background(), 3); err != nil {
			t.Fatal(err)
		}
		testutil.WhenBlocked(t, "delivery", func() bool { return open.count() == 3 && gated.count() == 3 })
		for _, g := range []*turnstile{open, gated} {
			if items := g.items(); items[2] != 3 || len(items) != 3 {
				t.Fatalf("items %v", items)
			}
		}
	})
}

func TestBlockWaitsOutsideTheLockUntilRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, gated := blockEngine(t, 10*time.Second)
		f := e.Feed("in")
		done := make(chan error, 1)
		go func() { done <- f.Publish(context.Background(), 3) }()
		synctest.Wait() // the publisher is waiting for room
		// The waiting publisher holds no lock: status and another feed's work go on.
		if st := e.Status(); st.Feeds[0].Sequence != 2 {
			t.Fatalf("sequence %d while waiting", st.Feeds[0].Sequence)
		}
		gated.let(1)
		if err := <-done; err != nil {
			t.Fatalf("publish after room appeared: %v", err)
		}
	})
}

func TestBlockRefusalReasons(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, _, _ := blockEngine(t, 10*time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Feed("in").Publish(ctx, 3) }()
			synctest.Wait() // the publisher is waiting for room
			cancel()
			var re *engine.RefusedError
			if err := <-done; !errors.As(err, &re) || re.Reason != engine.RefusedCancelled {
				t.Fatalf("err %v, want cancelled", err)
			}
		})
	})
	t.Run("shutdown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, _, gated := blockEngine(t, 10*time.Second)
			done := make(chan error, 1)
			go func() { done <- e.Feed("in").Publish(context.Background(), 3) }()
			synctest.Wait() // the publisher is waiting for room
			stopped := make(chan error, 1)
			go func() { stopped <- e.Stop(context.Background()) }()
			var re *engine.RefusedError
			if err := <-done; !errors.As(err, &re) || re.Reason != engine.RefusedShutdown {
				t.Fatalf("err %v, want shutdown", err)
			}
			gated.openUp() // Stop waits for the item the gated group holds
			if err := <-stopped; err != nil {
				t.Fatalf("Stop: %v", err)
			}
		})
	})
}

func TestAPublishFromAGroupGoroutineIsDowngradedNotWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gated := newTurnstile(false)
		defer gated.openUp()
		var pubErr error
		var once sync.Once
		var e *engine.Engine
		publisher := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			once.Do(func() {
				// out's gated queue is full: a blocking publish from a group
				// goroutine must not wait for it.
				pubErr = e.Feed("out").Publish(c.Context(), "x")
			})
			return nil
		})
		e = start(t, engine.Config{DrainTimeout: 100 * time.Millisecond,
			Feeds: []engine.FeedConfig{
				{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8},
				// No push spin: a publisher spinning on the wall clock never blocks, so
				// the bubble's clock would not reach the end of its spin.
				{Name: "out", Policy: engine.BlockWithDeadline(time.Hour).WithSpin(0), QueueSize: 1}},
			Groups: []engine.GroupConfig{
				{Name: "pub", Feeds: []string{"in"}, Processors: procs("pub", publisher)},
				{Name: "sink", Feeds: []string{"out"}, Processors: procs("sink", gated)}}})
		out := e.Feed("out")
		out.Publish(context.Background(), 1)
		testutil.WhenBlocked(t, "sink blocked", func() bool { return gated.enteredCount() == 1 })
		out.Publish(context.Background(), 2)
		done := make(chan struct{})
		go func() { e.Feed("in").Publish(context.Background(), "go"); close(done) }()
		testutil.WhenBlocked(t, "publisher done", func() bool {
			st := e.Status()
			return st.Feeds[0].Subscribers[0].Dispatched == 1
		})
		<-done
		if pubErr != nil {
			t.Fatalf("downgraded publish returned %v", pubErr)
		}
		st := e.Status().Feeds[1]
		if st.Downgraded != 1 || st.Dropped != 1 || st.Lossless {
			t.Fatalf("out: downgraded %d dropped %d lossless %v, want 1 1 false", st.Downgraded, st.Dropped, st.Lossless)
		}
	})
}

func TestAPushPublishIntoAFullPauseQueueIsACountedDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gated := newTurnstile(false)
		defer gated.openUp()
		e := start(t, engine.Config{DrainTimeout: 100 * time.Millisecond,
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause().WithSpin(0), QueueSize: 1}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", gated)}}})
		f := e.Feed("in")
		f.Publish(context.Background(), 1)
		testutil.WhenBlocked(t, "taken", func() bool { return gated.enteredCount() == 1 })
		f.Publish(context.Background(), 2)
		if err := f.Publish(context.Background(), 3); err != nil {
			t.Fatal(err)
		}
		st := e.Status().Feeds[0]
		if st.Dropped != 1 || st.Downgraded != 1 || st.Lossless {
			t.Fatalf("dropped %d downgraded %d lossless %v", st.Dropped, st.Downgraded, st.Lossless)
		}
	})
}

func TestTheWindowCapPausesTheSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(false)
		defer g.openUp()
		e := start(t, engine.Config{DrainTimeout: 100 * time.Millisecond,
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 100, WindowCap: 4}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}}})
		f := e.Feed("in")
		f.Intake().SetCommitter(&committer{})
		for i := 1; i <= 4; i++ {
			if !f.Intake().TryPublish(i, core.Position{Offset: int64(i)}) {
				t.Fatalf("paused at %d", i)
			}
		}
		if f.Intake().TryPublish(5, core.Position{Offset: 5}) {
			t.Fatal("took a fifth item past a window cap of 4")
		}
		if st := e.Status().Feeds[0]; st.PendingAcks != 4 || !st.Paused {
			t.Fatalf("pendingAcks %d paused %v", st.PendingAcks, st.Paused)
		}
	})
}

func TestTheWindowCapCutsABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(false)
		defer g.openUp()
		e := start(t, engine.Config{DrainTimeout: 100 * time.Millisecond,
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 100, WindowCap: 4}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}}})
		f := e.Feed("in")
		f.Intake().SetCommitter(&committer{})
		items := []any{1, 2, 3}
		pos := []core.Position{{Offset: 1}, {Offset: 2}, {Offset: 3}}
		if got := f.Intake().TryPublishBatch(items, pos); got != 3 {
			t.Fatalf("took %d of a first batch of 3 under a window cap of 4, want 3", got)
		}
		if got := f.Intake().TryPublishBatch(items, pos); got != 1 {
			t.Fatalf("took %d of a second batch of 3 under a window cap of 4, want 1", got)
		}
		if got := f.Intake().TryPublishBatch(items, pos); got != 0 {
			t.Fatalf("took %d of a third batch with the window full, want 0", got)
		}
		if st := e.Status().Feeds[0]; st.PendingAcks != 4 || !st.Paused || st.Sequence != 4 {
			t.Fatalf("pendingAcks %d paused %v sequence %d, want 4, true, 4", st.PendingAcks, st.Paused, st.Sequence)
		}
	})
}

// A source refused by a full queue is told to try again (Ready) once the
// group has taken half of what was queued, well before the queue is empty,
// and not before.
func TestAPausedSourceIsSignalledWhenItsQueueIsHalfEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(false)
		defer g.openUp()
		e := start(t, engine.Config{DrainTimeout: 100 * time.Millisecond,
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 256}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}}})
		f := e.Feed("in")
		queued := 0
		for f.Intake().TryPublish(queued+1, core.Position{Offset: int64(queued + 1)}) {
			queued++
			if queued == 1 {
				testutil.WhenBlocked(t, "the first item taken", func() bool { return g.enteredCount() == 1 })
			}
		}
		signalled := 0
		for taken := 1; taken < queued && signalled == 0; taken++ {
			select {
			case <-f.Intake().Ready():
				signalled = taken
			default:
				g.let(1)
				testutil.WhenBlocked(t, "the next item taken", func() bool { return g.enteredCount() == taken+1 })
			}
		}
		if signalled == 0 || queued-signalled > queued/2 || queued-signalled < 64 {
			t.Fatalf("Ready after %d of %d queued items were taken, want between half and all but 64", signalled, queued)
		}
	})
}

func TestANestedPublishIntoTheSameFeedFollowsTheOuterItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(true)
		var e *engine.Engine
		journal := journalFunc(func(ctx context.Context, feed string, seq int64, item any) error {
			if item == "outer" {
				return e.Feed(feed).Publish(ctx, "nested")
			}
			return nil
		})
		e = start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8, Journal: journal}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}}})
		if err := e.Feed("in").Publish(context.Background(), "outer"); err != nil {
			t.Fatal(err)
		}
		testutil.WhenBlocked(t, "both", func() bool { return g.count() == 2 })
		if got := g.items(); got[0] != "outer" || got[1] != "nested" {
			t.Fatalf("order %v, want outer then nested", got)
		}
	})
}

type journalFunc func(ctx context.Context, feed string, seq int64, item any) error

func (f journalFunc) Append(ctx context.Context, feed string, seq int64, item any) error {
	return f(ctx, feed, seq, item)
}

func TestDropsPastThePendingMarksAreReportedApproximate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 8
		defer engine.SetMaxMarks(4)()
		g := newTurnstile(false)
		var mu sync.Mutex
		var total int64
		var reports []engine.Drop
		e := start(t, engine.Config{DrainTimeout: time.Second,
			Observer: engine.Observer{Dropped: func(_ string, d engine.Drop) {
				mu.Lock()
				defer mu.Unlock()
				total += d.Count
				reports = append(reports, d)
			}},
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: size}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}}})
		f := e.Feed("in")
		ctx := context.Background()
		f.Publish(ctx, 0)
		testutil.WhenBlocked(t, "first taken", func() bool { return g.enteredCount() == 1 })
		for i := 1; i <= size; i++ {
			f.Publish(ctx, i)
		}
		// Each round: a drop at the tail, then one slot freed and filled: every
		// drop is marked at a new queue position, more than the marks can hold.
		for r := 0; r < size; r++ {
			f.Publish(ctx, "dropped")
			g.let(1)
			testutil.WhenBlocked(t, "next taken", func() bool { return g.enteredCount() == r+2 })
			f.Publish(ctx, "kept")
		}
		dropped := f.Status().Dropped
		g.openUp()
		testutil.WhenBlocked(t, "drained", func() bool { return f.Status().Drained })
		ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		e.Stop(ctx2)
		mu.Lock()
		defer mu.Unlock()
		approx := 0
		for _, d := range reports {
			if d.Approximate {
				approx++
			}
		}
		if dropped != size || total != dropped || approx == 0 || len(reports) > 4+1 {
			t.Fatalf("dropped %d, reported %d in %v: want %d, exact marks for 4, the rest approximate", dropped, total, reports, size)
		}
	})
}

// A batch offered under one lock is shown to the group before the feed
// spins on a full DROP queue: a batch larger than the queue, with a spin
// long enough for the group to make room, loses nothing.
func TestABatchLargerThanADropQueueIsNotDroppedWhileTheGroupKeepsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seen := newTurnstile(true)
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(250 * time.Millisecond), QueueSize: 4}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", seen)}}})
		f := e.Feed("in")
		const n = 64
		items, pos := make([]any, n), make([]core.Position, n)
		for i := range n {
			items[i], pos[i] = i+1, core.Position{Offset: int64(i + 1)}
		}
		if got := f.Intake().TryPublishBatch(items, pos); got != n {
			t.Fatalf("TryPublishBatch took %d of %d", got, n)
		}
		testutil.WhenBlocked(t, "every item dispatched", func() bool { return seen.count() == n })
		if st := e.Status().Feeds[0]; st.Dropped != 0 || !st.Lossless {
			t.Fatalf("dropped %d lossless %v, want no drop", st.Dropped, st.Lossless)
		}
		if got := seen.items(); !slices.Equal(got, items) {
			t.Fatalf("dispatched %v, want %v", got, items)
		}
	})
}

// A journal may wait for the items before the one it stores to be
// processed: within a batch, they are visible to the group by then.
func TestAJournalMayWaitForTheItemsBeforeItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(true)
		journal := journalFunc(func(ctx context.Context, feed string, seq int64, item any) error {
			if !g.await(int(seq-1), 5*time.Second) {
				return fmt.Errorf("item %d: items before it never processed", seq)
			}
			return nil
		})
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 16, Journal: journal}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}}})
		const n = 8
		items, pos := make([]any, n), make([]core.Position, n)
		for i := range n {
			items[i], pos[i] = i+1, core.Position{Offset: int64(i + 1)}
		}
		if got := e.Feed("in").Intake().TryPublishBatch(items, pos); got != n {
			t.Fatalf("TryPublishBatch took %d of %d", got, n)
		}
		testutil.WhenBlocked(t, "every item dispatched", func() bool { return g.count() == n })
		if st := e.Status().Feeds[0]; st.Dropped != 0 {
			t.Fatalf("dropped %d: the journal timed out waiting for items placed but not shown", st.Dropped)
		}
	})
}

// A push feed drops, counted, what it would have queued for a fenced group,
// and queues for it again once unfenced.
func TestAPushFeedDropsWhatItWouldQueueForAFencedGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(true)
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}}})
		f := e.Feed("in")
		ctx := context.Background()
		f.Publish(ctx, 1)
		testutil.WhenBlocked(t, "item 1", func() bool { return g.count() == 1 })
		if err := e.Fence("g"); err != nil {
			t.Fatal(err)
		}
		f.Publish(ctx, 2)
		f.Publish(ctx, 3)
		if st := e.Status().Feeds[0]; st.Dropped != 2 || st.Lossless {
			t.Fatalf("dropped %d lossless %v while fenced, want 2 dropped", st.Dropped, st.Lossless)
		}
		if err := e.Unfence("g"); err != nil {
			t.Fatal(err)
		}
		f.Publish(ctx, 4)
		testutil.WhenBlocked(t, "item 4", func() bool { return g.count() == 2 })
		if got := g.items(); !slices.Equal(got, []any{1, 4}) {
			t.Fatalf("processed %v, want [1 4]", got)
		}
	})
}

// A group that is fenced or dead takes nothing: a BLOCK_WITH_DEADLINE push
// feed does not wait for room in its full queue. The item goes at once to
// the healthy group and is a counted drop for the sick one (the feed is
// not lossless); nothing waits out the deadline or is refused.
func TestAFencedOrDeadGroupDoesNotHoldABlockingPushFeed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sicken func(t *testing.T, e *engine.Engine, gated *turnstile, fail *atomic.Bool)
	}{
		{"fenced", func(t *testing.T, e *engine.Engine, _ *turnstile, _ *atomic.Bool) {
			if err := e.Fence("gated"); err != nil {
				t.Fatal(err)
			}
		}},
		{"dead", func(t *testing.T, e *engine.Engine, gated *turnstile, fail *atomic.Bool) {
			fail.Store(true) // the recorder of the gated group cannot write: it fails on item 1
			gated.let(1)
			testutil.WhenBlocked(t, "the gated group dead", func() bool { return e.Err() != nil })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				open, gated := newTurnstile(true), newTurnstile(false)
				var fail atomic.Bool
				e, err := engine.New(engine.Config{DrainTimeout: 200 * time.Millisecond, Logger: testutil.Logger(t),
					Observer: engine.Observer{BeforeComplete: func(group string, _ *engine.Input) error {
						if group == "gated" && fail.Load() {
							return errors.New("disk full")
						}
						return nil
					}},
					Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.BlockWithDeadline(time.Second), QueueSize: 1}},
					Groups: []engine.GroupConfig{
						{Name: "open", Feeds: []string{"in"}, Processors: procs("o", open)},
						{Name: "gated", Feeds: []string{"in"}, Processors: procs("g", gated)}}})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				if err := e.Start(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					gated.openUp()
					if err := e.Stop(ctx); err != nil && !errors.Is(err, engine.ErrObserver) {
						t.Errorf("Stop: %v", err)
					}
				})
				f := e.Feed("in")
				// item 1 is taken by the gated group (blocked in it), item 2 fills its queue
				if err := f.Publish(ctx, 1); err != nil {
					t.Fatal(err)
				}
				testutil.WhenBlocked(t, "item 1 taken", func() bool { return gated.enteredCount() == 1 })
				if err := f.Publish(ctx, 2); err != nil {
					t.Fatal(err)
				}
				tc.sicken(t, e, gated, &fail)
				testutil.WhenBlocked(t, "the healthy group has room", func() bool { return open.count() == 2 })
				began := time.Now()
				if err := f.Publish(ctx, 3); err != nil {
					t.Fatalf("publish with the %s group's queue full: %v, want delivered to the healthy group", tc.name, err)
				}
				if waited := time.Since(began); waited > 0 {
					t.Fatalf("the publish waited %s for the %s group", waited, tc.name)
				}
				testutil.WhenBlocked(t, "the healthy group", func() bool { return open.count() == 3 })
				st := e.Status().Feeds[0]
				if st.Refused != 0 || st.Dropped != 1 || st.Lossless || subscriber(t, st, "gated/in").Dropped != 1 {
					t.Fatalf("status %+v: want item 3 dropped (counted) for the %s group only, nothing refused", st, tc.name)
				}
			})
		})
	}
}
