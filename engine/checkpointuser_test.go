package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// A hold of two parts commits only as far as both parts made durable; a
// part that releases stops counting, and the hold ends with the last.
func TestAHoldOfPartsCommitsOnlyWhatEveryPartMadeDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(false)
		e, f, c := positioned(t, engine.Pause(), 64, map[string]*turnstile{"g": g}, "g")
		parts, err := e.HoldParts("in", "g", 2)
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, f, 1, 5)
		g.let(3)
		testutil.WhenBlocked(t, "3 dispatched", func() bool { return f.Status().Subscribers[0].Dispatched == 3 })
		m3 := parts[1].Mark()
		g.let(2)
		testutil.WhenBlocked(t, "5 dispatched", func() bool { return f.Status().Subscribers[0].Dispatched == 5 })
		if err := parts[0].DurableThrough(parts[0].Mark()); err != nil {
			t.Fatal(err)
		}
		settleCommit(t, f, c, 0) // part 1 made nothing durable
		if err := parts[1].DurableThrough(m3); err != nil {
			t.Fatal(err)
		}
		settleCommit(t, f, c, 3) // the least of 5 and 3
		parts[1].Release()
		settleCommit(t, f, c, 5) // part 0 alone: 5
		g.openUp()
		publishAll(t, f, 6, 7)
		settleCommit(t, f, c, 5) // part 0 still holds
		parts[0].Release()
		settleCommit(t, f, c, 7) // the hold ended
		if _, err := e.HoldParts("in", "g", 0); err == nil {
			t.Error("HoldParts of 0 parts: no error")
		}
	})
}

// startCommitting builds and starts an engine of cfg and gives its feed
// "in" a committer; the test stops the engine itself (what Stop returns is
// one of its checks).
func startCommitting(t *testing.T, cfg engine.Config) (*engine.Engine, *engine.Feed, *committer) {
	t.Helper()
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := e.Feed("in")
	c := &committer{}
	f.Intake().SetCommitter(c)
	return e, f, c
}

// batchSaver is a CheckpointUser that saves when the test says so; with
// broken set, its last save (CloseCheckpoint) fails with it.
type batchSaver struct {
	mu      sync.Mutex
	cps     map[string]core.Checkpoint
	closed  int
	handled int
	broken  error
}

func (s *batchSaver) OnEvent(*core.Cycle, any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handled++
	return nil
}

func (s *batchSaver) UseCheckpoint(feed string, cp core.Checkpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cps[feed] = cp
}

// save makes everything dispatched so far durable (the test calls it with
// every item handled).
func (s *batchSaver) save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cp := range s.cps {
		if err := cp.DurableThrough(cp.Mark()); err != nil {
			return err
		}
	}
	return nil
}

func (s *batchSaver) CloseCheckpoint() error {
	s.mu.Lock()
	s.closed++
	broken := s.broken
	s.mu.Unlock()
	if broken != nil {
		return broken
	}
	return s.save()
}

// Start gives each worker's instance implementing CheckpointUser a part
// of one hold per feed: the feed commits nothing until every worker
// saved, then what both saved; Stop calls CloseCheckpoint on each, whose
// saves its last commit then carries.
func TestEveryWorkersCheckpointUserHoldsTheCommitUntilAllSavedAndStopClosesThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var savers []*batchSaver
		cfg := engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 2, Order: engine.OrderNone,
				Processors: []engine.ProcessorConfig{{Name: "p", New: func() (core.Processor, error) {
					s := &batchSaver{cps: map[string]core.Checkpoint{}}
					savers = append(savers, s)
					return s, nil
				}}}}},
			Logger: testutil.Logger(t),
		}
		before, _ := testutil.CountGoroutines()
		e, f, c := startCommitting(t, cfg)
		if len(savers) != 2 || savers[0].cps["in"] == nil || savers[1].cps["in"] == nil {
			t.Fatalf("%d instances, checkpoints %v: want 2, each given one for feed in by Start", len(savers), savers)
		}
		publishAll(t, f, 1, 4)
		synctest.Wait()
		settleCommit(t, f, c, 0)
		if err := savers[0].save(); err != nil {
			t.Fatal(err)
		}
		settleCommit(t, f, c, 0) // worker 1 saved nothing
		if err := savers[1].save(); err != nil {
			t.Fatal(err)
		}
		settleCommit(t, f, c, 4)
		publishAll(t, f, 5, 6)
		synctest.Wait()
		settleCommit(t, f, c, 4)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.Committed(); got != 6 || savers[0].closed != 1 || savers[1].closed != 1 {
			t.Errorf("after Stop: committed %d, closed %d and %d times; want 6, once each", got, savers[0].closed, savers[1].closed)
		}
		testutil.CheckNoLeak(t, before)
	})
}

// A CheckpointUser whose saves keep failing says so (Checkpoint.Fail): its
// group fails as when the recorder cannot write. It takes no more items,
// the feed commits nothing past the last mark made durable (not even at
// Stop), is stalled, not lossless and never settled, and Err, WaitSettled
// and Stop return a *DurableError wrapping the holder's error, so that a
// launcher stops the run instead of waiting for a commit that cannot come.
func TestACheckpointUserThatCannotSaveFailsItsGroupAndNothingPastItsLastSaveIsCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errDisk := errors.New("state st.json: disk full")
		s := &batchSaver{cps: map[string]core.Checkpoint{}}
		before, _ := testutil.CountGoroutines()
		var ended []string // the streams ended cleanly (Observer.Stopped): none of a failed group
		e, f, c := startCommitting(t, engine.Config{
			Feeds:    []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", s)}},
			Observer: engine.Observer{Stopped: func(p string) error { ended = append(ended, p); return nil }},
			Logger:   testutil.Logger(t),
		})
		publishAll(t, f, 1, 4)
		synctest.Wait()
		if err := s.save(); err != nil {
			t.Fatal(err)
		}
		settleCommit(t, f, c, 4)
		publishAll(t, f, 5, 6) // handled, never saved
		synctest.Wait()
		s.mu.Lock()
		s.broken = errDisk
		s.mu.Unlock()
		s.cps["in"].Fail(errDisk)
		synctest.Wait()
		f.Intake().TryPublish(7, core.Position{Offset: 7}) // taken or refused: never handled
		synctest.Wait()

		err := e.Err()
		var de *engine.DurableError
		if !errors.As(err, &de) || de.Group != "g" || de.Feed != "in" || !errors.Is(err, engine.ErrNotDurable) || !errors.Is(err, errDisk) {
			t.Errorf("Err: %v, want a *DurableError of group g, feed in, wrapping the holder's error", err)
		}
		if _, err := e.WaitSettled(context.Background()); !errors.Is(err, errDisk) {
			t.Errorf("WaitSettled: %v, want the holder's error", err)
		}
		st := e.Status()
		fs := st.Feeds[0]
		s.mu.Lock()
		handled := s.handled
		s.mu.Unlock()
		if handled != 6 || st.Settled || fs.Lossless || fs.Stalled == nil {
			t.Errorf("handled %d, settled %v, lossless %v, stalled %v; want 6 handled (none after the failure), not settled, not lossless, stalled",
				handled, st.Settled, fs.Lossless, fs.Stalled)
		}
		settleCommit(t, f, c, 4)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Stop(ctx); !errors.Is(err, engine.ErrNotDurable) || !errors.Is(err, errDisk) {
			t.Errorf("Stop: %v, want the *DurableError", err)
		}
		if got := c.Committed(); got != 4 || len(ended) > 0 {
			t.Errorf("after Stop: committed %d, streams ended %v; want 4 (the last save), none ended", got, ended)
		}
		testutil.CheckNoLeak(t, before)
	})
}

// itemSaver saves its state in each delivery's completion: it releases its
// checkpoint (its completions save before an item counts) and keeps it to
// Fail. From item failAt on, its save fails: it reports it (Fail) before
// its completion returns the error.
type itemSaver struct {
	mu     sync.Mutex
	cp     core.Checkpoint
	failAt int
	saved  int // the last item saved
}

func (s *itemSaver) UseCheckpoint(_ string, cp core.Checkpoint) {
	cp.Release()
	s.mu.Lock()
	s.cp = cp
	s.mu.Unlock()
}

func (s *itemSaver) CloseCheckpoint() error { return nil }

func (s *itemSaver) OnEvent(c *core.Cycle, ev any) error {
	item := ev.(int)
	c.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if item >= s.failAt {
			err := fmt.Errorf("state: item %d not saved", item)
			s.cp.Fail(err)
			return err
		}
		s.saved = item
		return nil
	}))
	return nil
}

// A completion that fails once its group failed (its holder's
// Checkpoint.Fail, called by the completion itself: a save per item that
// keeps failing) is neither retried nor skipped: its item does not count
// as dispatched, so the feed never commits it, and no completion failure
// is counted. A completion skipped after its retries used to count, and
// the item was committed though its state was never saved (torture seed
// 1796193496913655314).
func TestACompletionThatFailsOnceItsGroupFailedDoesNotCountItsItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &itemSaver{failAt: 3}
		e, f, c := startCommitting(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", s), Retry: engine.RetryPolicy{Attempts: 3}}},
			Logger: testutil.Logger(t),
		})
		publishAll(t, f, 1, 5)
		synctest.Wait()
		if err := e.Err(); !errors.Is(err, engine.ErrNotDurable) {
			t.Errorf("Err: %v, want the holder's failure", err)
		}
		settleCommit(t, f, c, 2)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Stop(ctx); !errors.Is(err, engine.ErrNotDurable) {
			t.Errorf("Stop: %v, want the holder's failure", err)
		}
		fs := e.Status().Feeds[0]
		if got := c.Committed(); got != 2 || fs.CompletionFailures != 0 || s.saved != 2 {
			t.Errorf("after Stop: committed %d, completion failures %d, saved through %d; want 2, 0, 2", got, fs.CompletionFailures, s.saved)
		}
	})
}
