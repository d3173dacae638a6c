package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// holdBack is shared by every worker's instance of held (the test's
// coordinator, not the processors' state): the items it holds wait until
// released; every item handled is recorded.
type holdBack struct {
	mu      sync.Mutex
	hold    map[any]chan struct{}
	handled []any
	by      map[any]string // item -> the processor instance that handled it
}

func newHoldBack(items ...any) *holdBack {
	h := &holdBack{hold: map[any]chan struct{}{}, by: map[any]string{}}
	for _, it := range items {
		h.hold[it] = make(chan struct{})
	}
	return h
}

func (h *holdBack) release(item any) { close(h.hold[item]) }

func (h *holdBack) seen() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.handled)
}

// processor returns New for the group's processor "p": each worker gets
// an instance of its own, which waits for a held item's release (or the
// stop: then it fails, and the item is not dispatched).
func (h *holdBack) processor() func() (core.Processor, error) {
	return func() (core.Processor, error) {
		return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			if ch, ok := h.hold[ev]; ok {
				select {
				case <-ch:
				case <-c.Context().Done():
					return c.Context().Err()
				}
			}
			h.mu.Lock()
			h.handled = append(h.handled, ev)
			h.by[ev] = c.Processor()
			h.mu.Unlock()
			return nil
		}), nil
	}
}

// parallel is an engine config of one positioned feed "in" (its source
// given) and one group "g" of processor "p" on workers.
func parallel(src engine.Source, workers, maxGap int, h *holdBack) engine.Config {
	return engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: src, Policy: engine.Pause(), QueueSize: 64}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: workers, MaxGap: maxGap, Order: engine.OrderNone,
			Processors: []engine.ProcessorConfig{{Name: "p", New: h.processor()}}}},
		DrainTimeout: time.Second,
	}
}

// An item completed beyond a pending one is remembered, never committed
// past it: with item 1 held, items 2 and 3 complete and the commit stays
// at 0; once 1 completes it moves through all three.
func TestAnAckBeyondAPendingGapLeavesTheCommitAtThePrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack(1)
		e := start(t, parallel(nil, 2, 0, h))
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publishAll(t, f, 1, 3)
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		if got := h.seen(); !slices.Equal(got, []any{2, 3}) {
			t.Fatalf("handled %v, want 2 and 3 while 1 is held", got)
		}
		gs := e.Status().Groups[0]
		if c.Committed() != 0 || len(c.acked) != 0 || gs.Gap != 2 || gs.OldestPending != 1 || gs.InFlight != 1 {
			t.Fatalf("committed %d, acked %v, status %+v: want nothing acknowledged, a gap of 2 behind pending seq 1", c.Committed(), c.acked, gs)
		}
		h.release(1)
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		gs = e.Status().Groups[0]
		if !slices.Equal(c.acked, []int64{1, 2, 3}) || c.Committed() != 3 || gs.Gap != 0 || gs.OldestPending != 0 {
			t.Fatalf("acked %v, committed %d, status %+v: want 1, 2, 3 once 1 completed", c.acked, c.Committed(), gs)
		}
	})
}

// At the gap bound the group claims nothing new until the missing prefix
// completes: with MaxGap 2 and item 1 held, only items 2 and 3 are taken
// (8 workers idle), the rest wait in the queue; the status shows the wait.
func TestTheGapCeilingStopsNewClaimsUntilTheMissingPrefixIsAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack(1)
		e := start(t, parallel(nil, 8, 2, h))
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publishAll(t, f, 1, 10)
		testutil.Advance(time.Second) // the group waits a second of the bubble's clock at the bound
		if got := h.seen(); !slices.Equal(sorted(got), []any{2, 3}) {
			t.Fatalf("handled %v, want only 2 and 3 within the gap of 2 behind held item 1", got)
		}
		gs := e.Status().Groups[0]
		if gs.Gap != 2 || gs.MaxGap != 2 || gs.GapBlocked < time.Second || gs.InFlight != 1 {
			t.Fatalf("status %+v: want gap 2 of 2, blocked at least 1s, one in flight", gs)
		}
		h.release(1)
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		if got := h.seen(); len(got) != 10 || c.Committed() != 10 {
			t.Fatalf("handled %v, committed %d: want all 10 once the prefix moved", got, c.Committed())
		}
	})
}

func sorted(s []any) []any {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b any) int { return a.(int) - b.(int) })
	return s
}

// A restart after out-of-order completion delivers again exactly the
// items after the committed prefix (the held one and those completed
// beyond it), and nothing of the prefix.
func TestARestartAfterOutOfOrderCompletionRedeliversOnlyWhatWasNotCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog(1, 2, 3, 4, 5)
		log.Close()
		h := newHoldBack(3)
		e, err := engine.New(parallel(log.Source(), 4, 0, h))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := sorted(h.seen()); !slices.Equal(got, []any{1, 2, 4, 5}) {
			t.Fatalf("run 1 handled %v, want all but the held 3", got)
		}
		// Stop: the held item's processor sees the cancellation and
		// fails; it is not dispatched.
		e.Stop(context.Background())
		if got := log.Committed(); got != 2 {
			t.Fatalf("run 1 committed through %d, want 2 (3 was pending; 4 and 5 lie beyond it)", got)
		}
		h2 := newHoldBack()
		e2, err := engine.New(parallel(log.Source(), 4, 0, h2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e2.RunSettled(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := sorted(h2.seen()); !slices.Equal(got, []any{3, 4, 5}) {
			t.Fatalf("run 2 handled %v, want exactly 3, 4 and 5 again", got)
		}
		if got := log.Committed(); got != 5 {
			t.Fatalf("run 2 committed through %d, want 5", got)
		}
	})
}

// A checkpoint mark made before the group was subscribed again is stale:
// refused with ErrStaleToken, counted, and it moves no commit; a fresh
// mark of the new queue works; a foreign mark is refused too.
func TestAStaleTokenAfterAResubscribeIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack()
		e := start(t, parallel(nil, 2, 0, h))
		f, c, cp := heldFeed(t, e)
		publishAll(t, f, 1, 2)
		synctest.Wait()
		old := cp.Mark()
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		if err := e.Subscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		publishAll(t, f, 3, 4)
		synctest.Wait()
		if err := cp.DurableThrough(old); !errors.Is(err, engine.ErrStaleToken) {
			t.Fatalf("DurableThrough(a mark of the old queue) = %v, want ErrStaleToken", err)
		}
		if err := cp.DurableThrough(core.Mark{}); !errors.Is(err, engine.ErrForeignMark) {
			t.Fatalf("DurableThrough(the zero mark) = %v, want ErrForeignMark", err)
		}
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		if gs := e.Status().Groups[0]; gs.StaleTokens != 1 || c.Committed() != 0 {
			t.Fatalf("stale tokens %d, committed %d: want 1 refused and nothing committed (the hold holds)", gs.StaleTokens, c.Committed())
		}
		if err := cp.DurableThrough(cp.Mark()); err != nil {
			t.Fatal(err)
		}
		cp.Release()
	})
}

// A completion carrying the token of a queue the group no longer has (it
// was unsubscribed and subscribed again while a worker held item 1) is
// refused: counted in staleTokens, and it never moves the new queue, whose
// first item (3) is still being handled at the same queue position. The
// token's generation is the claim's, checked against the queue the group
// has now.
func TestAStaleCompletionAfterAResubscribeIsRefusedAndMovesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack(1, 3)
		e := start(t, parallel(nil, 2, 0, h))
		t.Cleanup(func() { h.release(3) })
		f := e.Feed("in")
		publishAll(t, f, 1, 1)
		synctest.Wait() // a worker holds item 1, claimed at position 1 of the first queue
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		if err := e.Subscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		publishAll(t, f, 3, 3)
		synctest.Wait() // the other worker holds item 3, claimed at position 1 of the new queue
		h.release(1)
		synctest.Wait() // item 1 completes with the old queue's token
		st := e.Status()
		var live engine.SubscriberStatus
		for _, s := range st.Feeds[0].Subscribers {
			if !s.Removed {
				live = s
			}
		}
		if gs := st.Groups[0]; gs.StaleTokens != 1 || live.Dispatched != 0 || gs.OldestPending != 2 {
			t.Fatalf("stale tokens %d, new queue dispatched %d, oldest pending seq %d: want the old completion refused (1), the new queue at 0 with item 3 (seq 2) pending",
				gs.StaleTokens, live.Dispatched, gs.OldestPending)
		}
		if got := h.seen(); !slices.Equal(got, []any{1}) {
			t.Fatalf("handled %v, want only item 1", got)
		}
	})
}

// Once a group is unsubscribed from a feed its workers handle nothing more
// of that queue: the items claimed and handed to a worker, waiting behind
// the one it holds, are not handled (as a group of one worker takes
// nothing more of a removed queue). Only the item being handled when the
// unsubscribe came finishes.
func TestWorkersHandleNothingMoreOfAnUnsubscribedQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack(1)
		cfg := parallel(nil, 2, 0, h)
		cfg.Groups[0].Order = engine.OrderKey
		cfg.Groups[0].Key = func(any) string { return "one key" } // every item to one worker, in order
		e := start(t, cfg)
		f := e.Feed("in")
		publishAll(t, f, 1, 5)
		synctest.Wait() // the worker holds item 1; items 2-5 are claimed and handed to it
		if gs := e.Status().Groups[0]; gs.InFlight != 5 {
			t.Fatalf("in flight %d, want the 5 items claimed", gs.InFlight)
		}
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		h.release(1)
		synctest.Wait()
		if got := h.seen(); !slices.Equal(got, []any{1}) {
			t.Fatalf("handled %v after the unsubscribe, want only item 1 (being handled when it came)", got)
		}
		if gs := e.Status().Groups[0]; gs.InFlight != 0 {
			t.Fatalf("in flight %d, want nothing left with the workers", gs.InFlight)
		}
	})
}

// With several workers each gets instances of its own, named
// core.WorkerStream; an item of one key always goes to the same worker, and a
// group of one worker is the group of old (its processor, its name).
func TestEachWorkerRunsItsOwnInstancesAndAKeyStaysOnOneWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		built := 0
		owner := map[string]string{}
		newP := func() (core.Processor, error) {
			mu.Lock()
			built++
			mu.Unlock()
			return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				mu.Lock()
				defer mu.Unlock()
				k := ev.(string)[:1]
				if o, ok := owner[k]; ok && o != c.Processor() {
					return fmt.Errorf("key %s on %s and %s", k, o, c.Processor())
				}
				owner[k] = c.Processor()
				return nil
			}), nil
		}
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 4, Key: func(it any) string { return it.(string)[:1] },
				Processors: []engine.ProcessorConfig{{Name: "p", New: newP}}}},
		})
		for i := range 40 {
			if err := e.Feed("in").Publish(context.Background(), fmt.Sprintf("%c%d", 'a'+i%7, i)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		st := e.Status()
		if built != 4 || st.Feeds[0].Failures != 0 || st.Groups[0].Workers != 4 {
			t.Fatalf("built %d instances, failures %d, status %+v: want 4 instances and every key on one worker", built, st.Feeds[0].Failures, st.Groups[0])
		}
		for _, o := range owner {
			if !slices.Contains([]string{core.WorkerStream("p", 0), core.WorkerStream("p", 1), core.WorkerStream("p", 2), core.WorkerStream("p", 3)}, o) {
				t.Fatalf("owner %q is not a worker instance's name", o)
			}
		}
	})
}

// Per-key order holds under random processing times, and every commit
// covers only completed items: 100,000 items of 64 keys on 8 workers, an
// observer of the committer checking at each acknowledgement that the
// item and everything before it completed.
func TestPerKeyOrderAndTheCommitPrefixHoldUnderRandomProcessingTimes(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	var (
		mu        sync.Mutex
		completed = make([]bool, n+1) // by offset (item i at offset i+1)
		lastOfKey = map[int]int{}
		problems  []string
	)
	key := func(it any) string { return fmt.Sprint(it.(int) % 64) }
	newP := func() (core.Processor, error) {
		rng := rand.New(rand.NewPCG(1, 2))
		return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			for range rng.IntN(2000) { // a random amount of work, not a wait
				_ = rng.Uint64()
			}
			i := ev.(int)
			c.OnComplete(core.CompletionFunc(func(d *core.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				if last, ok := lastOfKey[i%64]; ok && last > i {
					problems = append(problems, fmt.Sprintf("key %d: item %d after %d", i%64, i, last))
				}
				lastOfKey[i%64] = i
				completed[d.Position.Offset] = true
				return nil
			}))
			return nil
		}), nil
	}
	check := &prefixCheck{completed: completed, mu: &mu}
	src := &checkedSource{n: n, check: check}
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: src, Policy: engine.Pause(), QueueSize: 256}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 8, Key: key, MaxGap: 512,
			Processors: []engine.ProcessorConfig{{Name: "p", New: newP}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := e.RunSettled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 || len(check.problems) > 0 {
		t.Fatalf("order: %v\ncommits: %v", problems[:min(5, len(problems))], check.problems[:min(5, len(check.problems))])
	}
	if got := src.committed.Load(); got != int64(n) || !st.Lossless || check.acks != n {
		t.Fatalf("committed %d, acks %d, status %+v: want all %d", got, check.acks, st, n)
	}
}

// prefixCheck checks each acknowledgement: the item acknowledged, and
// every one before it, completed.
type prefixCheck struct {
	mu        *sync.Mutex
	completed []bool
	through   int64 // every offset up to it checked complete
	acks      int
	problems  []string
}

func (p *prefixCheck) acknowledged(pos core.Position) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acks++
	for o := p.through + 1; o <= pos.Offset; o++ {
		if !p.completed[o] {
			p.problems = append(p.problems, fmt.Sprintf("offset %d acknowledged with %d not completed", pos.Offset, o))
		}
	}
	p.through = max(p.through, pos.Offset)
}

// checkedSource publishes n positioned items (item i at offset i+1), its
// committer checked by a prefixCheck; it ends once all are acknowledged.
type checkedSource struct {
	n         int
	check     *prefixCheck
	committed atomic.Int64
	pending   int64
}

func (s *checkedSource) DefaultPolicy() engine.Policy { return engine.Pause() }

func (s *checkedSource) Acknowledged(_, _ int64, pos core.Position) {
	s.check.acknowledged(pos)
	s.pending = pos.Offset
}

func (s *checkedSource) Commit() error { s.committed.Store(s.pending); return nil }

func (s *checkedSource) Run(ctx context.Context, in *engine.Intake) error {
	in.SetCommitter(s)
	in.SetBounded(true)
	in.SetState(engine.StateBehind, "")
	t := time.NewTicker(100 * time.Microsecond)
	defer t.Stop()
	for next := 0; ; {
		if _, err := in.PollAcks(); err != nil {
			return err
		}
		for next < s.n && in.TryPublish(next, core.Position{Offset: int64(next + 1)}) {
			next++
		}
		if next == s.n {
			in.SetState(engine.StateEndOfStream, "")
		}
		select {
		case <-ctx.Done():
			_, err := in.PollAcks()
			return err
		case <-in.Ready():
		case <-t.C:
		}
	}
}

// With several workers, failures, retries and drops keep their meaning per
// item: an item failing past its retries is counted and skipped (the
// commit moves past it), a dropped item is counted and reported in every
// worker's streams (Observer.Dropped, once per worker).
func TestFailuresRetriesAndDropsKeepTheirMeaningWithWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		tries := map[any]int{}
		newP := func() (core.Processor, error) {
			return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				mu.Lock()
				tries[ev]++
				mu.Unlock()
				if ev == 2 {
					return errors.New("item 2 always fails")
				}
				return nil
			}), nil
		}
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 16}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 3, Order: engine.OrderNone,
				Retry:      engine.RetryPolicy{Attempts: 3},
				Processors: []engine.ProcessorConfig{{Name: "p", New: newP}}}},
		})
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publishAll(t, f, 1, 4)
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		st := e.Status()
		if tries[2] != 3 || tries[1] != 1 || tries[4] != 1 || st.Feeds[0].Failures != 1 || st.Feeds[0].Lossless || c.Committed() != 4 {
			t.Fatalf("tries %v, failures %d, lossless %v, committed %d: want item 2 tried 3 times, counted, skipped, the commit at 4",
				tries, st.Feeds[0].Failures, st.Feeds[0].Lossless, c.Committed())
		}
	})
	// A push feed dropping under DROP_AFTER_SPIN while the workers are
	// held: the drop is reported once in each worker's streams.
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack(1, 2, 3)
		var mu sync.Mutex
		droppedIn := map[string]int64{}
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 1}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 2, Order: engine.OrderNone, MaxGap: 1,
				Processors: []engine.ProcessorConfig{{Name: "p", New: h.processor()}}}},
			Observer: engine.Observer{Dropped: func(group string, d engine.Drop) {
				mu.Lock()
				droppedIn[group] += d.Count
				mu.Unlock()
			}},
		})
		f := e.Feed("in")
		for i := 1; i <= 6; i++ {
			if err := f.Publish(context.Background(), i); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		h.release(1)
		h.release(2)
		h.release(3)
		synctest.Wait()
		st := e.Status().Feeds[0]
		mu.Lock()
		defer mu.Unlock()
		if st.Dropped == 0 || droppedIn[core.WorkerStream("g", 0)] != st.Dropped || droppedIn[core.WorkerStream("g", 1)] != st.Dropped {
			t.Fatalf("dropped %d, reported %v: want every drop reported once in each worker's streams", st.Dropped, droppedIn)
		}
	})
}
