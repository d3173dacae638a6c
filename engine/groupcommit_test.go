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

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// publishBatch offers items 1..n at offsets 1..n in one TryPublishBatch:
// the groups see them all at once.
func publishBatch(t *testing.T, f *engine.Feed, n int) {
	t.Helper()
	items, pos := make([]any, n), make([]core.Position, n)
	for i := range n {
		items[i], pos[i] = i+1, core.Position{Offset: int64(i + 1)}
	}
	if k := f.Intake().TryPublishBatch(items, pos); k != n {
		t.Fatalf("TryPublishBatch took %d of %d", k, n)
	}
}

// TestReadyItemsAreFlushedOnceAndCountOnlyAfterTheFlush: the items a group
// finds ready together are one batch: each is handled and staged
// (BeforeComplete), then the observers' Flush runs once, and only then do
// the items' AfterDispatch run, in order, and the queue's dispatched
// counter move.
func TestReadyItemsAreFlushedOnceAndCountOnlyAfterTheFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &journalLog{}
		var e *engine.Engine
		obs := engine.Observer{
			BeforeComplete: func(_ string, in *engine.Input) error {
				ev.add("stage %d", in.Seq)
				return nil
			},
			Flush: func(group string) error {
				ev.add("flush %s, dispatched %d", group, e.Status().Feeds[0].Subscribers[0].Dispatched)
				return nil
			},
			AfterDispatch: func(_ string, in *engine.Input) {
				ev.add("after %d offset %d", in.Seq, in.Delivery.Position.Offset)
			},
		}
		e = start(t, engine.Config{
			Feeds:    []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", core.ProcessorFunc(func(*core.Cycle, any) error { return nil }))}},
			Observer: obs,
		})
		publishBatch(t, e.Feed("in"), 5)
		synctest.Wait()
		want := []string{"stage 1", "stage 2", "stage 3", "stage 4", "stage 5", "flush g, dispatched 0",
			"after 1 offset 1", "after 2 offset 2", "after 3 offset 3", "after 4 offset 4", "after 5 offset 5"}
		if diff := cmp.Diff(want, ev.all()); diff != "" {
			t.Errorf("hooks (-want +got):\n%s", diff)
		}
		if d := e.Status().Feeds[0].Subscribers[0].Dispatched; d != 5 {
			t.Errorf("dispatched %d, want 5", d)
		}
	})
}

// TestAFlushErrorLeavesEveryPendingItemUndispatchedAndTheRestartDeliversThem:
// when the observers' Flush fails, none of the items pending on it counts
// as dispatched (no AfterDispatch, the feed commits nothing), the group
// fails with an *ObserverError of hook Flush naming the oldest of them,
// and a restart delivers every item again; with one worker and with two.
func TestAFlushErrorLeavesEveryPendingItemUndispatchedAndTheRestartDeliversThem(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) { testAFlushError(t, workers) })
	}
}

func testAFlushError(t *testing.T, workers int) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog(1, 2, 3, 4, 5)
		failed := make(chan struct{})
		var once sync.Once
		var mu sync.Mutex
		handled, after := 0, 0
		p := core.ProcessorFunc(func(*core.Cycle, any) error {
			mu.Lock()
			handled++
			mu.Unlock()
			return nil
		})
		obs := engine.Observer{
			Flush: func(string) error {
				once.Do(func() { close(failed) })
				return fmt.Errorf("writing the batch: %w", errDiskFull)
			},
			AfterDispatch: func(string, *engine.Input) {
				mu.Lock()
				after++
				mu.Unlock()
			},
		}
		e, err := engine.New(engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: workers, Order: engine.OrderNone,
				Processors: []engine.ProcessorConfig{{Name: "p", Processor: p, New: func() (core.Processor, error) { return p, nil }}}}},
			Observer: obs,
			Logger:   testutil.Logger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-failed
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		if _, err := e.WaitSettled(ctx); !errors.Is(err, engine.ErrObserver) {
			t.Fatalf("WaitSettled: %v, want ErrObserver", err)
		}
		if err := e.Stop(t.Context()); !errors.Is(err, engine.ErrObserver) {
			t.Errorf("Stop: %v, want ErrObserver", err)
		}
		var oe *engine.ObserverError
		// One worker fails naming the oldest item of the batch, 1; with
		// two, either may fail first, naming the oldest of its own.
		if !errors.As(e.Err(), &oe) || oe.Hook != "Flush" || oe.Feed != "in" || oe.Seq < 1 || oe.Seq > int64(workers) ||
			!errors.Is(oe, errDiskFull) {
			t.Errorf("Err() = %v, want an *ObserverError of hook Flush, in#1 (or up to in#%d with %d workers), wrapping the disk error",
				e.Err(), workers, workers)
		}
		mu.Lock()
		gotHandled, gotAfter := handled, after
		mu.Unlock()
		if gotHandled == 0 || gotAfter != 0 {
			t.Errorf("handled %d, AfterDispatch %d; want some handled, no AfterDispatch", gotHandled, gotAfter)
		}
		st := e.Status()
		if d := st.Feeds[0].Subscribers[0].Dispatched; d != 0 || st.Lossless {
			t.Errorf("dispatched %d, lossless %v; want 0, false", d, st.Lossless)
		}
		if got := log.Committed(); got != 0 {
			t.Errorf("committed offset %d, want 0", got)
		}
		if diff := cmp.Diff([]any{1, 2, 3, 4, 5}, restart(t, log)); diff != "" {
			t.Errorf("the restart delivered (-want +got):\n%s", diff)
		}
	})
}

// batchJournal records its calls; it fails them with err.
type batchJournal struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (j *batchJournal) Append(_ context.Context, feed string, seq int64, item any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, fmt.Sprintf("Append %s#%d %v", feed, seq, item))
	return j.err
}

func (j *batchJournal) AppendBatch(_ context.Context, feed string, first int64, items []any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, fmt.Sprintf("AppendBatch %s#%d %v", feed, first, items))
	return j.err
}

// plainJournal is a Journal without AppendBatch.
type plainJournal struct{ j *batchJournal }

func (p plainJournal) Append(ctx context.Context, feed string, seq int64, item any) error {
	return p.j.Append(ctx, feed, seq, item)
}

// TestAJournalBatchStoresAPublishedBatchInOneCall: a Journal that
// implements JournalBatch journals the items of one TryPublishBatch with
// one AppendBatch, before any is dispatched; a plain Journal still gets one
// Append per item; a failed AppendBatch loses every item of the batch for
// the queues (drops), refusing none.
func TestAJournalBatchStoresAPublishedBatchInOneCall(t *testing.T) {
	tests := []struct {
		name      string
		plain     bool
		err       error
		wantCalls []string
		wantSeen  []any
	}{
		{name: "batch", wantCalls: []string{"AppendBatch in#1 [1 2 3 4]"}, wantSeen: []any{1, 2, 3, 4}},
		{name: "plain", plain: true, wantCalls: []string{"Append in#1 1", "Append in#2 2", "Append in#3 3", "Append in#4 4"},
			wantSeen: []any{1, 2, 3, 4}},
		{name: "failed", err: errDiskFull, wantCalls: []string{"AppendBatch in#1 [1 2 3 4]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bj := &batchJournal{err: tt.err}
				var j engine.Journal = bj
				if tt.plain {
					j = plainJournal{bj}
				}
				var mu sync.Mutex
				var seen []any
				p := core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
					mu.Lock()
					seen = append(seen, ev)
					mu.Unlock()
					return nil
				})
				e := start(t, engine.Config{
					Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64, Journal: j}},
					Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}},
				})
				publishBatch(t, e.Feed("in"), 4)
				synctest.Wait()
				bj.mu.Lock()
				calls := slices.Clone(bj.calls)
				bj.mu.Unlock()
				if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
					t.Errorf("journal calls (-want +got):\n%s", diff)
				}
				mu.Lock()
				gotSeen := slices.Clone(seen)
				mu.Unlock()
				if diff := cmp.Diff(tt.wantSeen, gotSeen); diff != "" {
					t.Errorf("handled (-want +got):\n%s", diff)
				}
				sub := e.Status().Feeds[0].Subscribers[0]
				if wantDropped := int64(4 - len(tt.wantSeen)); sub.Dropped != wantDropped {
					t.Errorf("dropped %d, want %d", sub.Dropped, wantDropped)
				}
			})
		})
	}
}

// TestThenChainsFlush: Observer.Then calls the first observer's Flush,
// then the next's, and not the next's when the first fails.
func TestThenChainsFlush(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var calls []string
		first := engine.Observer{Flush: func(g string) error {
			calls = append(calls, "first "+g)
			if fail {
				return errDiskFull
			}
			return nil
		}}
		next := engine.Observer{Flush: func(g string) error {
			calls = append(calls, "next "+g)
			return nil
		}}
		err := first.Then(next).Flush("g")
		want := []string{"first g", "next g"}
		if fail {
			want = want[:1]
		}
		if errors.Is(err, errDiskFull) != fail {
			t.Errorf("fail %v: Flush returned %v", fail, err)
		}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("fail %v: calls (-want +got):\n%s", fail, diff)
		}
	}
}
