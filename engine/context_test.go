package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// blockedOnContext is a processor that waits on its cycle's context and
// returns its error. It says on entered that it is waiting, and on sawDone
// what the context said when it let go.
type blockedOnContext struct {
	entered chan struct{}
	sawDone chan error
}

func newBlockedOnContext() *blockedOnContext {
	return &blockedOnContext{entered: make(chan struct{}, 1), sawDone: make(chan error, 1)}
}

func (p *blockedOnContext) OnEvent(c *core.Cycle, ev any) error {
	ctx := c.Context()
	p.entered <- struct{}{}
	<-ctx.Done()
	p.sawDone <- ctx.Err()
	return ctx.Err()
}

// A processor blocked on Cycle.Context lets Stop return: the context is
// cancelled when the drain bound (DrainTimeout) passes, and Stop returns
// then, with no error and every goroutine of the engine ended (the bubble
// would report one left blocked).
func TestAProcessorBlockedOnItsContextLetsStopReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, p := startBlockedOnContext(t, 3*time.Second)
		began := time.Now()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if got, want := time.Since(began), 3*time.Second; got != want {
			t.Errorf("Stop took %s, want the drain bound %s", got, want)
		}
		if got := <-p.sawDone; !errors.Is(got, context.Canceled) {
			t.Errorf("the processor's context ended with %v, want context.Canceled", got)
		}
	})
}

// When Stop's own ctx ends before the drain bound, the processors'
// contexts are cancelled then: Stop returns at that moment (reporting the
// group if it had not ended yet) and the group's goroutine ends.
func TestAProcessorBlockedOnItsContextLetsStopReturnWhenStopsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, p := startBlockedOnContext(t, time.Hour)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		began := time.Now()
		err := e.Stop(ctx)
		if got, want := time.Since(began), time.Second; got != want {
			t.Errorf("Stop took %s, want Stop's ctx timeout %s", got, want)
		}
		// Whether the group had ended when Stop looked is a race with
		// Stop's ctx, already done: either is reported honestly.
		if err != nil && !errors.Is(err, engine.ErrStopped) {
			t.Errorf("Stop: %v, want nil or ErrStopped", err)
		}
		if got := <-p.sawDone; !errors.Is(got, context.Canceled) {
			t.Errorf("the processor's context ended with %v, want context.Canceled", got)
		}
		// Stop returned before the group's goroutine ended: let it end (it
		// logs through t) before the test does.
		synctest.Wait()
	})
}

// An item whose processor, or completion callback, gives up because Stop
// cancelled its context did not complete: it is not dispatched, not counted
// as a failure, not committed; the next run delivers it again.
func TestAnItemThatFailedOnTheCancelledContextIsNotCommitted(t *testing.T) {
	for _, where := range []string{"processor", "completion"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				entered := make(chan struct{}, 1)
				p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
					ctx := c.Context()
					wait := func() error {
						entered <- struct{}{}
						<-ctx.Done()
						return ctx.Err()
					}
					if where == "processor" {
						return wait()
					}
					c.OnComplete(core.CompletionFunc(func(*core.Delivery) error { return wait() }))
					return nil
				})
				e, err := engine.New(engine.Config{
					Feeds:        []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 4}},
					Groups:       []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}},
					DrainTimeout: time.Second,
					Logger:       testutil.Logger(t),
				})
				if err != nil {
					t.Fatal(err)
				}
				c := &committer{}
				f := e.Feed("in")
				f.Intake().SetCommitter(c)
				if err := e.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				if !f.Intake().TryPublish("x", core.Position{Offset: 1}) {
					t.Fatal("TryPublish refused the first item")
				}
				<-entered
				if err := e.Stop(context.Background()); err != nil {
					t.Fatalf("Stop: %v", err)
				}
				st := f.Status()
				if st.Failures != 0 || st.CompletionFailures != 0 || st.Subscribers[0].Dispatched != 0 {
					t.Errorf("failures %d completionFailures %d dispatched %d, want 0 0 0",
						st.Failures, st.CompletionFailures, st.Subscribers[0].Dispatched)
				}
				if got := c.Committed(); got != 0 {
					t.Errorf("committed offset %d, want 0 (the item is delivered again)", got)
				}
			})
		})
	}
}

// countingSource counts how often the engine ran it.
type countingSource struct{ runs atomic.Int64 }

func (s *countingSource) Run(ctx context.Context, f *engine.Intake) error {
	s.runs.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// Start with a ctx that is already done returns its error and starts
// nothing: no group goroutine (no Started hook ran), no source. The engine
// can then be started with a live ctx.
func TestStartWithADoneContextStartsNothing(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"deadline exceeded", expired, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &countingSource{}
				var started atomic.Int64
				e, err := engine.New(engine.Config{
					Feeds:  []engine.FeedConfig{{Name: "in", Source: src, Policy: engine.Pause(), QueueSize: 4}},
					Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", newTurnstile(true))}},
					Observer: engine.Observer{Started: func(string, core.Processor) error {
						started.Add(1)
						return nil
					}},
					Logger: testutil.Logger(t),
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Start(tc.ctx); !errors.Is(err, tc.want) {
					t.Fatalf("Start: %v, want %v", err, tc.want)
				}
				synctest.Wait()
				if s, r := started.Load(), src.runs.Load(); s != 0 || r != 0 {
					t.Fatalf("after a refused Start: %d groups started, %d sources run; want 0 0", s, r)
				}
				if err := e.Start(context.Background()); err != nil {
					t.Fatalf("Start after a refused Start: %v", err)
				}
				synctest.Wait()
				if s, r := started.Load(), src.runs.Load(); s != 1 || r != 1 {
					t.Errorf("after Start: %d groups started, %d sources run; want 1 1", s, r)
				}
				if err := e.Stop(context.Background()); err != nil {
					t.Errorf("Stop: %v", err)
				}
			})
		})
	}
}

// No nil context: every function of the engine that takes one refuses nil
// with ErrNilContext, and does nothing (a refused Stop leaves the engine
// running: a Stop with a context stops it).
func TestANilContextIsRefused(t *testing.T) {
	var nilCtx context.Context
	for _, tc := range []struct {
		name string
		call func(e *engine.Engine) error
	}{
		{"Start", func(e *engine.Engine) error { return e.Start(nilCtx) }},
		{"Stop", func(e *engine.Engine) error { return e.Stop(nilCtx) }},
		{"WaitSettled", func(e *engine.Engine) error { _, err := e.WaitSettled(nilCtx); return err }},
		{"RunSettled", func(e *engine.Engine) error { _, err := e.RunSettled(nilCtx); return err }},
		{"Feed.Publish", func(e *engine.Engine) error { return e.Feed("in").Publish(nilCtx, "x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newTurnstile(true)
				e, err := engine.New(engine.Config{
					Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 4}},
					Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", g)}},
					Logger: testutil.Logger(t),
				})
				if err != nil {
					t.Fatal(err)
				}
				if tc.name != "Start" && tc.name != "RunSettled" {
					if err := e.Start(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if err := tc.call(e); !errors.Is(err, engine.ErrNilContext) {
					t.Errorf("%s(nil): %v, want ErrNilContext", tc.name, err)
				}
				synctest.Wait()
				if got := g.count(); got != 0 {
					t.Errorf("%d items handled after %s(nil), want 0", got, tc.name)
				}
				// The engine still works: it starts (if the refused call
				// was a start), takes an item, and stops.
				if tc.name == "Start" || tc.name == "RunSettled" {
					if err := e.Start(context.Background()); err != nil {
						t.Fatalf("Start after %s(nil): %v", tc.name, err)
					}
				}
				if err := e.Feed("in").Publish(context.Background(), "y"); err != nil {
					t.Fatalf("Publish after %s(nil): %v", tc.name, err)
				}
				if err := e.Stop(context.Background()); err != nil {
					t.Errorf("Stop: %v", err)
				}
				if got := g.count(); got != 1 {
					t.Errorf("%d items handled, want 1", got)
				}
			})
		})
	}
}

// Feed.Offer never waits for room, even where the publish is not
// given a context the engine served: here a Host driven directly, whose
// Cycle.Context is context.Background. A full BLOCK queue is a counted drop
// at once (Feed.Publish with that context would wait out the deadline).
func TestFeedOfferNeverWaitsForAFullBlockingQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(false)
		e := startIn(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "out", Policy: engine.BlockWithDeadline(time.Second).WithSpin(0), QueueSize: 1}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"out"}, Processors: procs("p", g)}}})
		defer g.openUp()
		out := e.Feed("out")
		// "a" is taken and held in the turnstile; "b" fills the queue.
		for _, it := range []string{"a", "b"} {
			if err := out.Publish(context.Background(), it); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		var pubErr error
		h := core.NewHost("direct", core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			pubErr = out.Offer(ev)
			return nil
		}), core.SystemClock())
		began := time.Now()
		if tr := h.Handle(nil, "c"); tr.Err != nil {
			t.Fatal(tr.Err)
		}
		if elapsed := time.Since(began); pubErr != nil || elapsed != 0 {
			t.Fatalf("Feed.Offer returned %v after %s, want nil at once", pubErr, elapsed)
		}
		st := out.Status()
		if st.Downgraded != 1 || st.Dropped != 1 || st.Refused != 0 {
			t.Fatalf("downgraded %d dropped %d refused %d, want 1 1 0", st.Downgraded, st.Dropped, st.Refused)
		}
	})
}

// startBlockedOnContext starts an engine with drain bound drain whose one
// processor is blocked on its Cycle.Context, handling the one item
// published.
func startBlockedOnContext(t *testing.T, drain time.Duration) (*engine.Engine, *blockedOnContext) {
	t.Helper()
	p := newBlockedOnContext()
	e, err := engine.New(engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 4}},
		Groups:       []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}},
		DrainTimeout: drain,
		Logger:       testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Feed("in").Publish(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	<-p.entered
	return e, p
}
