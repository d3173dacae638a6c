package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// logEngine builds and starts an engine reading log into group "g" of one
// processor "p"; the test stops it.
func logEngine(t *testing.T, log *memsource.Log, p core.Processor, retry engine.RetryPolicy, obs engine.Observer) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 8}},
		Groups:       []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Retry: retry, Processors: procs("p", p)}},
		Observer:     obs,
		DrainTimeout: time.Millisecond, // a retry waiting out its backoff never drains
		Logger:       testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return e
}

// restart runs a new engine over log (closed first, so the run is bounded)
// until it is settled, and returns the items it delivered.
func restart(t *testing.T, log *memsource.Log) []any {
	t.Helper()
	log.Close()
	var mu sync.Mutex
	var seen []any
	p := core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		mu.Lock()
		seen = append(seen, ev)
		mu.Unlock()
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
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if st, err := e.RunSettled(ctx); err != nil || !st.Lossless {
		t.Fatalf("restart: %v, lossless %v", err, st.Lossless)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(seen)
}

// TestStopDuringARetryBackoffHoldsTheCommit: an item whose processor (or
// completion callback) failed and waits out its retry backoff when Stop
// comes did not complete: it does not count as dispatched, nothing after
// it is handled or committed, no failure is counted, and a restart delivers
// it again.
func TestStopDuringARetryBackoffHoldsTheCommit(t *testing.T) {
	for _, where := range []string{"processor", "completion"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := memsource.NewLog("a", "b", "c")
				failed := make(chan struct{})
				var once sync.Once
				var mu sync.Mutex
				var handled, completed []any
				p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
					mu.Lock()
					handled = append(handled, ev)
					mu.Unlock()
					if ev == "b" && where == "processor" {
						once.Do(func() { close(failed) })
						return errors.New("b fails")
					}
					c.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
						if ev == "b" && where == "completion" {
							once.Do(func() { close(failed) })
							return errors.New("saving b fails")
						}
						mu.Lock()
						completed = append(completed, ev)
						mu.Unlock()
						return nil
					}))
					return nil
				})
				e := logEngine(t, log, p, engine.RetryPolicy{Attempts: 3, Backoff: time.Hour}, engine.Observer{})
				<-failed
				if err := e.Stop(t.Context()); err != nil {
					t.Fatalf("Stop: %v", err)
				}
				fs := e.Status().Feeds[0]
				if got := log.Committed(); got != 1 {
					t.Errorf("committed offset %d, want 1 (b did not complete)", got)
				}
				if d := fs.Subscribers[0].Dispatched; d != 1 {
					t.Errorf("dispatched %d, want 1", d)
				}
				if fs.Failures != 0 || fs.CompletionFailures != 0 || fs.Settled {
					t.Errorf("failures %d, completion failures %d, settled %v; want 0, 0, false", fs.Failures, fs.CompletionFailures, fs.Settled)
				}
				mu.Lock()
				gotHandled, gotCompleted := slices.Clone(handled), slices.Clone(completed)
				mu.Unlock()
				if diff := cmp.Diff([]any{"a", "b"}, gotHandled); diff != "" {
					t.Errorf("handled (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]any{"a"}, gotCompleted); diff != "" {
					t.Errorf("completed (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]any{"b", "c"}, restart(t, log)); diff != "" {
					t.Errorf("the restart delivered (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestBeforeCompleteRunsAfterEveryProcessorAndBeforeTheCompletions: the
// observer's BeforeComplete sees the item once every processor of the group
// handled it, and before any completion callback runs (the recorder writes
// the item's rows there, ahead of what completions make durable).
func TestBeforeCompleteRunsAfterEveryProcessorAndBeforeTheCompletions(t *testing.T) {
	log := memsource.NewLog("x")
	ev := &journalLog{}
	done := make(chan struct{})
	proc := func(name string) core.Processor {
		return core.ProcessorFunc(func(c *core.Cycle, item any) error {
			ev.add("%s handles %v", name, item)
			c.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
				ev.add("%s completes", name)
				return nil
			}))
			return nil
		})
	}
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 8}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("a", proc("a"), "b", proc("b"))}},
		Observer: engine.Observer{
			BeforeComplete: func(group string, in *engine.Input) error {
				ev.add("before complete %s %s#%d", group, in.Feed, in.Seq)
				return nil
			},
			AfterDispatch: func(string, *engine.Input) { close(done) },
		},
		Logger: testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := e.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"a handles x", "b handles x", "before complete g in#1", "a completes", "b completes"}
	if diff := cmp.Diff(want, ev.all()); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

var errDiskFull = errors.New("no space left on device")

// TestAFailingObserverHoldsItsItemAndStopsTheGroup: when BeforeComplete
// fails (the recorder cannot write item 3), item 3's completions do not
// run, it does not count as dispatched, the group takes nothing more, the
// feed commits nothing past item 2 and reports itself stalled and not
// lossless, naming the error; Err, WaitSettled and Stop return an
// *ObserverError; a restart delivers item 3 and what follows.
func TestAFailingObserverHoldsItsItemAndStopsTheGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog(1, 2, 3, 4, 5)
		failing := make(chan struct{})
		var mu sync.Mutex
		var completed []any
		p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			c.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
				mu.Lock()
				completed = append(completed, ev)
				mu.Unlock()
				return nil
			}))
			return nil
		})
		obs := engine.Observer{BeforeComplete: func(_ string, in *engine.Input) error {
			if in.Seq == 3 {
				close(failing)
				return fmt.Errorf("writing seq %d: %w", in.Seq, errDiskFull)
			}
			return nil
		}}
		e := logEngine(t, log, p, engine.RetryPolicy{}, obs)
		<-failing
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		if _, err := e.WaitSettled(ctx); !errors.Is(err, engine.ErrObserver) {
			t.Fatalf("WaitSettled: %v, want ErrObserver", err)
		}
		stopErr := e.Stop(t.Context())
		var oe *engine.ObserverError
		if !errors.As(e.Err(), &oe) || oe.Group != "g" || oe.Hook != "BeforeComplete" || oe.Feed != "in" || oe.Seq != 3 ||
			!errors.Is(e.Err(), errDiskFull) {
			t.Errorf("Err() = %v, want an *ObserverError of group g, BeforeComplete, in#3, wrapping the disk error", e.Err())
		}
		if !errors.Is(stopErr, engine.ErrObserver) {
			t.Errorf("Stop: %v, want ErrObserver", stopErr)
		}
		mu.Lock()
		gotCompleted := slices.Clone(completed)
		mu.Unlock()
		if diff := cmp.Diff([]any{1, 2}, gotCompleted); diff != "" {
			t.Errorf("completions ran for (-want +got):\n%s", diff)
		}
		if got := log.Committed(); got != 2 {
			t.Errorf("committed offset %d, want 2", got)
		}
		st := e.Status()
		fs := st.Feeds[0]
		if st.Lossless || fs.Lossless || st.Settled || fs.Subscribers[0].Dispatched != 2 {
			t.Errorf("lossless %v/%v, settled %v, dispatched %d; want false, false, false, 2", st.Lossless, fs.Lossless, st.Settled, fs.Subscribers[0].Dispatched)
		}
		if fs.Stalled == nil || !strings.Contains(*fs.Stalled, "consumer g/in failed") || !strings.Contains(*fs.Stalled, errDiskFull.Error()) {
			t.Errorf("stalled %v, want it to name the failed consumer and the error", fs.Stalled)
		}
		if diff := cmp.Diff([]any{3, 4, 5}, restart(t, log)); diff != "" {
			t.Errorf("the restart delivered (-want +got):\n%s", diff)
		}
	})
}
