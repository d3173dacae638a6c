package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// A Journal runs under its feed's lock. A TryPublish (or TryPublishBatch)
// it makes into its own feed from inside Append is told the item cannot be
// taken now (false, 0) instead of waiting for that lock for ever; the outer
// item is journalled and delivered, and the source offers the refused item
// again afterwards.
func TestATryPublishFromInsideTheJournalIsRefusedInsteadOfDeadlockingTheFeed(t *testing.T) {
	type nested struct {
		took  bool
		batch int
	}
	var f *engine.Feed
	nestedCh := make(chan nested, 1)
	journal := journalFunc(func(ctx context.Context, feed string, seq int64, item any) error {
		if item == "outer" {
			took := f.Intake().TryPublish("inner", core.Position{Offset: 2})
			batch := f.Intake().TryPublishBatch([]any{"inner"}, []core.Position{{Offset: 2}})
			nestedCh <- nested{took, batch}
		}
		return nil
	})
	seen := make(chan any, 8)
	p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		seen <- ev
		return nil
	})
	e, err := engine.New(engine.Config{Logger: testutil.Logger(t),
		Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8, Journal: journal}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f = e.Feed("in")
	c := &committer{}
	f.Intake().SetCommitter(c)
	returned := make(chan bool, 1)
	go func() { returned <- f.Intake().TryPublish("outer", core.Position{Offset: 1}) }()
	select {
	case took := <-returned:
		if !took {
			t.Fatal("the outer TryPublish took nothing")
		}
	case <-time.After(10 * time.Second):
		// The feed's lock is held for ever: Stop would wait for it too, so
		// the engine is left behind.
		t.Fatal("TryPublish from inside the journal deadlocked the feed: the outer publish has not returned after 10s")
	}
	t.Cleanup(func() {
		if err := e.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if got := <-nestedCh; got.took || got.batch != 0 {
		t.Fatalf("from inside the journal TryPublish took %v and TryPublishBatch %d items, want false and 0", got.took, got.batch)
	}
	if got := <-seen; got != "outer" {
		t.Fatalf("first item dispatched %v, want outer", got)
	}
	if !f.Intake().TryPublish("inner", core.Position{Offset: 2}) {
		t.Fatal("the refused item was not taken when offered again")
	}
	if got := <-seen; got != "inner" {
		t.Fatalf("second item dispatched %v, want inner", got)
	}
	if st := f.Status(); st.Sequence != 2 || st.Dropped != 0 || !st.Lossless {
		t.Fatalf("sequence %d dropped %d lossless %v, want 2 0 true", st.Sequence, st.Dropped, st.Lossless)
	}
}

// A processor that publishes into its own group's full BLOCK_WITH_DEADLINE
// queue with a context derived from Cycle.Context (a context the engine
// served) never waits for room only its own group can make: the item is a
// counted drop, downgraded, at once. With a context of its own making, the
// publish is one from outside: it waits, but never past the policy's
// deadline (no goroutine identity is read to tell the two apart).
func TestAPublishFromACycleWithAServedContextNeverWaitsForItsOwnQueue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ctx      func(c *core.Cycle) context.Context
		wait     time.Duration // how long the overflowing publish waits
		refused  bool          // it is refused at the deadline, not downgraded
		lossless bool
	}{
		{"served", func(c *core.Cycle) context.Context { return c.Context() }, 0, false, false},
		{"derived", func(c *core.Cycle) context.Context {
			ctx, cancel := context.WithTimeout(c.Context(), time.Hour)
			_ = cancel // the publish never waits: nothing to cancel
			return ctx
		}, 0, false, false},
		{"own", func(*core.Cycle) context.Context { return context.Background() }, time.Second, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				type result struct {
					err     error
					elapsed time.Duration
				}
				results := make(chan result, 2)
				seen := &journalLog{}
				var e *engine.Engine
				p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
					seen.add("%v", ev)
					if ev != "first" {
						return nil
					}
					// The first publish fills the queue (one slot, the item
					// being handled was taken); the second finds it full.
					for _, it := range []string{"fills", "overflows"} {
						began := time.Now()
						err := e.Feed("in").Publish(tc.ctx(c), it)
						results <- result{err, time.Since(began)}
					}
					return nil
				})
				e = startIn(t, engine.Config{
					Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.BlockWithDeadline(time.Second).WithSpin(0), QueueSize: 1}},
					Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}}})
				if err := e.Feed("in").Publish(context.Background(), "first"); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if r := <-results; r.err != nil || r.elapsed != 0 {
					t.Fatalf("publish of fills from the cycle returned %v after %s, want nil at once", r.err, r.elapsed)
				}
				r := <-results
				var re *engine.RefusedError
				if refused := errors.As(r.err, &re) && re.Reason == engine.RefusedDeadline; refused != tc.refused || (!tc.refused && r.err != nil) || r.elapsed != tc.wait {
					t.Fatalf("publish of overflows from the cycle returned %v after %s, want refused %v after %s", r.err, r.elapsed, tc.refused, tc.wait)
				}
				synctest.Wait()           // the cycle returned: "fills" is dispatched
				want := [3]int64{1, 1, 0} // downgraded, dropped, refused
				if tc.refused {
					want = [3]int64{0, 0, 1}
				}
				st := e.Status().Feeds[0]
				if got := [3]int64{st.Downgraded, st.Dropped, st.Refused}; got != want || st.Lossless != tc.lossless {
					t.Fatalf("downgraded, dropped, refused %v lossless %v, want %v %v", got, st.Lossless, want, tc.lossless)
				}
				if got := seen.all(); !slices.Equal(got, []string{"first", "fills"}) {
					t.Fatalf("dispatched %q, want [first fills]", got)
				}
			})
		})
	}
}

// A refusal from a waiting publish is still what a caller off the group
// goroutines gets: the group-goroutine test does not turn every blocking
// publish into a drop.
func TestABlockingPublishOffTheGroupGoroutinesStillWaitsAndIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			<-release
			return nil
		})
		e := startIn(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.BlockWithDeadline(time.Second).WithSpin(0), QueueSize: 1}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}}})
		t.Cleanup(func() { close(release) })
		f := e.Feed("in")
		f.Publish(context.Background(), 1)
		synctest.Wait()
		f.Publish(context.Background(), 2)
		began := time.Now()
		err := f.Publish(context.Background(), 3)
		var re *engine.RefusedError
		if !errors.As(err, &re) || re.Reason != engine.RefusedDeadline || time.Since(began) < time.Second {
			t.Fatalf("publish returned %v after %s, want a deadline refusal after 1s", err, time.Since(began))
		}
		if st := f.Status(); st.Downgraded != 0 || st.Dropped != 0 || st.Refused != 1 {
			t.Fatalf("downgraded %d dropped %d refused %d, want 0 0 1", st.Downgraded, st.Dropped, st.Refused)
		}
	})
}

// offerJournal offers "inner" into its own feed (feed) from inside the
// Append that stores "outer", and says what Offer returned on offered.
type offerJournal struct {
	feed    func() *engine.Feed
	offered chan error
}

func (j *offerJournal) Append(_ context.Context, _ string, _ int64, item any) error {
	if item == "outer" {
		j.offered <- j.feed().Offer("inner")
	}
	return nil
}

// offerBatchJournal is an offerJournal that stores batches too.
type offerBatchJournal struct{ *offerJournal }

func (j offerBatchJournal) AppendBatch(ctx context.Context, feed string, first int64, items []any) error {
	for i, it := range items {
		j.Append(ctx, feed, first+int64(i), it)
	}
	return nil
}

// A Feed.Offer a Journal makes into its own feed from inside Append (or
// AppendBatch), which run under the feed's lock, never waits for that lock:
// it is deferred until the item being journalled is placed, then published
// as a nested publish (it never waits for room either). The outer publish
// returns, the offered item follows the outer one, nothing is lost.
func TestAJournalsOfferIntoItsOwnFeedFollowsTheItemInsteadOfHanging(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batch   bool // the journal is a JournalBatch
		publish func(f *engine.Feed) error
	}{
		{"Publish", false, func(f *engine.Feed) error { return f.Publish(context.Background(), "outer") }},
		{"TryPublish", false, func(f *engine.Feed) error {
			if !f.Intake().TryPublish("outer", core.Position{Offset: 1}) {
				return errors.New("TryPublish took nothing")
			}
			return nil
		}},
		{"TryPublishBatch", true, func(f *engine.Feed) error {
			if n := f.Intake().TryPublishBatch([]any{"outer"}, []core.Position{{Offset: 1}}); n != 1 {
				return errors.New("TryPublishBatch took nothing")
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f *engine.Feed
			oj := &offerJournal{feed: func() *engine.Feed { return f }, offered: make(chan error, 1)}
			var journal engine.Journal = oj
			if tc.batch {
				journal = offerBatchJournal{oj}
			}
			seen := make(chan any, 8)
			p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				seen <- ev
				return nil
			})
			e, err := engine.New(engine.Config{Logger: testutil.Logger(t),
				Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8, Journal: journal}},
				Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}}})
			if err != nil {
				t.Fatal(err)
			}
			f = e.Feed("in")
			if err := e.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			returned := make(chan error, 1)
			go func() { returned <- tc.publish(f) }()
			select {
			case err := <-returned:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				// The feed's lock is held for ever: Stop would wait for it
				// too, so the engine is left behind.
				t.Fatal("Offer from inside the journal deadlocked the feed: the outer publish has not returned after 10s")
			}
			t.Cleanup(func() {
				if err := e.Stop(context.Background()); err != nil {
					t.Errorf("Stop: %v", err)
				}
			})
			if err := <-oj.offered; err != nil {
				t.Fatalf("Offer from inside the journal: %v", err)
			}
			for _, want := range []any{"outer", "inner"} {
				if got := <-seen; got != want {
					t.Fatalf("dispatched %v, want %v (outer, then the item offered while journalling it)", got, want)
				}
			}
			if st := f.Status(); st.Sequence != 2 || st.Dropped != 0 || !st.Lossless {
				t.Fatalf("sequence %d dropped %d lossless %v, want 2 0 true", st.Sequence, st.Dropped, st.Lossless)
			}
		})
	}
}
