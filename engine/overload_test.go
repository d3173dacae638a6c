package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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

// The overload scenarios with a fixed script (a push publish into a full
// PAUSE queue, the window cap, a push feed with a fenced group, the BLOCK
// deadline's refusal, a fenced or dead group under BLOCK) are transcripts:
// testdata/overload/ (TestOverloadScenarios).

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
