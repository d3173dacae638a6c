package engine_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// batchComp is a core.BatchCompletion that logs each run with its
// delivery (and calls check with it, if set), failing for the item of
// sequence fail.
type batchComp struct {
	ev    *journalLog
	fail  int64
	check func(*core.Delivery)
}

func (b *batchComp) Complete(d *core.Delivery) error {
	b.ev.add("complete %d offset %d", d.Sequence, d.Position.Offset)
	if b.check != nil {
		b.check(d)
	}
	if d.Sequence == b.fail {
		return errDiskFull
	}
	return nil
}

func (*batchComp) BatchCompletion() {}

// plainComp is an ordinary completion that logs each run.
type plainComp struct{ ev *journalLog }

func (p *plainComp) Complete(d *core.Delivery) error {
	p.ev.add("plain %d offset %d", d.Sequence, d.Position.Offset)
	return nil
}

// runBatch publishes items 1..5 at once to a group of one processor that
// registers bc for every item, and pc as well for the item of sequence
// plainAt; ev logs the hooks and completions in the order they ran. The
// caller stops the engine it returns.
func runBatch(t *testing.T, obs engine.Observer, ev *journalLog, bc *batchComp, plainAt int64) *engine.Engine {
	t.Helper()
	pc := &plainComp{ev}
	p := core.ProcessorFunc(func(c *core.Cycle, _ any) error {
		c.OnComplete(bc)
		if c.Delivery().Sequence == plainAt {
			c.OnComplete(pc)
		}
		return nil
	})
	obs.BeforeComplete = func(_ string, in *engine.Input) error {
		ev.add("stage %d", in.Seq)
		return nil
	}
	obs.AfterDispatch = func(_ string, in *engine.Input) {
		ev.add("after %d", in.Seq)
	}
	e, err := engine.New(engine.Config{
		Feeds:    []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
		Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}},
		Observer: obs,
		Logger:   testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	publishBatch(t, e.Feed("in"), 5)
	synctest.Wait()
	return e
}

// TestItemsWithOnlyBatchCompletionsGoOutInOneFlushAndCompleteAfterItInOrder:
// ready items whose completions are all core.BatchCompletions stay in the
// batch: one Flush writes the rows of all five, and only then does each
// item's completion run, in item order, with its own delivery, followed by
// its AfterDispatch. (Before BatchCompletion, every item with a completion
// flushed the batch: five Flushes.)
func TestItemsWithOnlyBatchCompletionsGoOutInOneFlushAndCompleteAfterItInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &journalLog{}
		obs := engine.Observer{Flush: func(string) error { ev.add("flush"); return nil }}
		e := runBatch(t, obs, ev, &batchComp{ev: ev}, 0)
		if err := e.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		want := []string{"stage 1", "stage 2", "stage 3", "stage 4", "stage 5", "flush",
			"complete 1 offset 1", "after 1", "complete 2 offset 2", "after 2", "complete 3 offset 3", "after 3",
			"complete 4 offset 4", "after 4", "complete 5 offset 5", "after 5"}
		if diff := cmp.Diff(want, ev.all()); diff != "" {
			t.Errorf("hooks (-want +got):\n%s", diff)
		}
		if d := e.Status().Feeds[0].Subscribers[0].Dispatched; d != 5 {
			t.Errorf("dispatched %d, want 5", d)
		}
	})
}

// TestAnOrdinaryCompletionStillRunsRightAfterItsItem: an item that
// registered an ordinary completion beside a BatchCompletion cuts the
// batch: the items before it are written and completed, then its own
// completions run before the next item is handled.
func TestAnOrdinaryCompletionStillRunsRightAfterItsItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &journalLog{}
		obs := engine.Observer{Flush: func(string) error { ev.add("flush"); return nil }}
		e := runBatch(t, obs, ev, &batchComp{ev: ev}, 3)
		if err := e.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		want := []string{"stage 1", "stage 2", "stage 3", "flush",
			"complete 1 offset 1", "after 1", "complete 2 offset 2", "after 2",
			"complete 3 offset 3", "plain 3 offset 3", "after 3",
			"stage 4", "stage 5", "flush",
			"complete 4 offset 4", "after 4", "complete 5 offset 5", "after 5"}
		if diff := cmp.Diff(want, ev.all()); diff != "" {
			t.Errorf("hooks (-want +got):\n%s", diff)
		}
	})
}

// TestABatchWhoseWriteOrCompletionFailsCountsNoItemFromTheFailureOn: a
// Flush error runs none of the pending items' completions and counts none
// of them; a deferred completion whose failure the CompletionFailed
// observer refuses fails the group there: the items before it count, it
// and the later ones neither complete nor count.
func TestABatchWhoseWriteOrCompletionFailsCountsNoItemFromTheFailureOn(t *testing.T) {
	tests := []struct {
		name           string
		flushErr       error
		failAt         int64
		wantHook       string
		wantSeq        int64
		wantDispatched int64
		wantTail       []string // after the five stages
	}{
		{name: "flush fails", flushErr: errDiskFull, wantHook: "Flush", wantSeq: 1, wantTail: []string{"flush"}},
		{name: "completion fails", failAt: 3, wantHook: "CompletionFailed", wantSeq: 3, wantDispatched: 2,
			wantTail: []string{"flush", "complete 1 offset 1", "after 1", "complete 2 offset 2", "after 2",
				"complete 3 offset 3", "completion failed 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ev := &journalLog{}
				obs := engine.Observer{
					Flush: func(string) error { ev.add("flush"); return tt.flushErr },
					CompletionFailed: func(_ string, in *engine.Input, err error) error {
						ev.add("completion failed %d", in.Seq)
						return err
					},
				}
				e := runBatch(t, obs, ev, &batchComp{ev: ev, fail: tt.failAt}, 0)
				if err := e.Stop(t.Context()); !errors.Is(err, engine.ErrObserver) {
					t.Errorf("Stop: %v, want ErrObserver", err)
				}
				want := append([]string{"stage 1", "stage 2", "stage 3", "stage 4", "stage 5"}, tt.wantTail...)
				if diff := cmp.Diff(want, ev.all()); diff != "" {
					t.Errorf("hooks (-want +got):\n%s", diff)
				}
				if d := e.Status().Feeds[0].Subscribers[0].Dispatched; d != tt.wantDispatched {
					t.Errorf("dispatched %d, want %d", d, tt.wantDispatched)
				}
				var oe *engine.ObserverError
				if !errors.As(e.Err(), &oe) || oe.Hook != tt.wantHook || oe.Seq != tt.wantSeq || !errors.Is(oe, errDiskFull) {
					t.Errorf("Err() = %v, want an *ObserverError of hook %s, seq %d, wrapping the disk error", e.Err(), tt.wantHook, tt.wantSeq)
				}
			})
		})
	}
}

// TestWorkersRunEachDeferredCompletionOnceAfterTheirChunksFlush: with
// several workers, the items of a chunk whose completions are all
// BatchCompletions are written with one Flush per chunk, not one per
// item, and every item's completion runs exactly once, after the Flush of
// its chunk, before the item counts as dispatched.
func TestWorkersRunEachDeferredCompletionOnceAfterTheirChunksFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		var mu sync.Mutex
		flushed := map[int64]bool{}     // items whose rows a Flush wrote
		pending := map[string][]int64{} // per worker: items staged, not yet flushed
		completed := map[int64]int{}
		flushes := 0
		ev := &journalLog{}
		bc := &batchComp{ev: ev, check: func(d *core.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			if !flushed[d.Sequence] {
				t.Errorf("item %d completed before its rows were flushed", d.Sequence)
			}
			completed[d.Sequence]++
		}}
		p := core.ProcessorFunc(func(c *core.Cycle, _ any) error {
			c.OnComplete(bc)
			return nil
		})
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 2, Order: engine.OrderNone,
				Processors: []engine.ProcessorConfig{{Name: "p", Processor: p, New: func() (core.Processor, error) { return p, nil }}}}},
			Observer: engine.Observer{
				BeforeComplete: func(group string, in *engine.Input) error {
					mu.Lock()
					defer mu.Unlock()
					pending[group] = append(pending[group], in.Seq)
					return nil
				},
				Flush: func(group string) error {
					mu.Lock()
					defer mu.Unlock()
					flushes++
					for _, s := range pending[group] {
						flushed[s] = true
					}
					pending[group] = pending[group][:0]
					return nil
				},
			},
		})
		publishBatch(t, e.Feed("in"), n)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if flushes >= n {
			t.Errorf("%d Flushes for %d items, want fewer", flushes, n)
		}
		for seq := int64(1); seq <= n; seq++ {
			if completed[seq] != 1 {
				t.Errorf("item %d completed %d times, want once", seq, completed[seq])
			}
		}
		if d := e.Status().Feeds[0].Subscribers[0].Dispatched; d != n {
			t.Errorf("dispatched %d, want %d", d, n)
		}
	})
}
