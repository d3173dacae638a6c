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

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// The tests in this file run the engine in a testing/synctest bubble:
// synctest.Wait returns once every goroutine of the engine is parked, so a
// test looks at what the engine did (and did not do) without polling or
// sleeping; the clock is fake, so a wait until a deadline takes no real
// time and shows as elapsed fake time; and synctest.Test fails a test that
// leaves a goroutine behind. A policy that spins (a drop, or a push
// publish's fallback, with a spin above 0) is not used in a bubble: a spin
// watches a clock that does not move while it runs.

// startIn builds and starts an engine inside the current bubble and stops
// it when the test ends. Cleanups registered after it run before the stop:
// a test releases there the processors it blocked.
func startIn(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger(t)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return e
}

// logDone is a completion callback that logs its name when it runs. It is a
// comparable value: registered twice in one delivery it is kept once.
type logDone struct {
	log  *journalLog
	name string
}

func (d logDone) Complete(*core.Delivery) error {
	d.log.add("%s", d.name)
	return nil
}

// subscriber is the status of the queue named queue ("group/feed").
func subscriber(t *testing.T, st engine.FeedStatus, queue string) engine.SubscriberStatus {
	t.Helper()
	for _, s := range st.Subscribers {
		if s.Queue == queue {
			return s
		}
	}
	t.Fatalf("no subscriber %s in %+v", queue, st.Subscribers)
	return engine.SubscriberStatus{}
}

// publish offers items at offsets from..to with TryPublish; each must be
// taken at once.
func publish(t *testing.T, f *engine.Feed, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if !f.Intake().TryPublish(i, core.Position{Offset: int64(i)}) {
			t.Fatalf("TryPublish refused item %d", i)
		}
	}
}

// committedAfterPoll polls acknowledgements once and returns the committed
// offset.
func committedAfterPoll(t *testing.T, f *engine.Feed, c *committer) int64 {
	t.Helper()
	if _, err := f.Intake().PollAcks(); err != nil {
		t.Fatal(err)
	}
	return c.Committed()
}

func TestAFailingProcessorsCallbacksAreDiscardedWhileTheOthersAreKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &journalLog{}
		register := func(name string, fails func() bool) core.Processor {
			return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				c.OnComplete(logDone{log, name})
				if fails() {
					return fmt.Errorf("%s failed", name)
				}
				return nil
			})
		}
		never := func() bool { return false }
		tries := 0
		flaky := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			tries++ // the group's goroutine only
			c.OnComplete(logDone{log, fmt.Sprintf("flaky try %d", tries)})
			if tries == 1 {
				return errors.New("flaky failed")
			}
			return nil
		})
		e := startIn(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Retry: engine.RetryPolicy{Attempts: 2},
				Processors: procs("keep", register("keep", never), "flaky", flaky,
					"broken", register("broken", func() bool { return true }), "after", register("after", never))}}})
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publish(t, f, 1, 1)
		synctest.Wait()
		// flaky's first try and broken's every try failed: their callbacks
		// are discarded; flaky's successful retry registered its own.
		want := []string{"keep", "flaky try 2", "after"}
		if got := log.all(); !slices.Equal(got, want) {
			t.Fatalf("callbacks run %q, want %q", got, want)
		}
		if st := f.Status(); st.Failures != 1 || st.CompletionFailures != 0 {
			t.Fatalf("failures %d completionFailures %d, want 1 0", st.Failures, st.CompletionFailures)
		}
		if got := committedAfterPoll(t, f, c); got != 1 {
			t.Fatalf("committed %d, want 1", got)
		}
	})
}

func TestDeliveryAttemptCountsTheFailedAttemptsOfAnItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &journalLog{}
		failsLeft := 2 // the reentrant cycle of item 1 fails twice
		retried := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			d := c.Delivery()
			if ev != "again" {
				log.add("retried %d first attempt %d", d.Position.Offset, d.Attempt)
				c.Queue("again")
				return nil
			}
			log.add("retried %d again attempt %d", d.Position.Offset, d.Attempt)
			if d.Position.Offset == 1 && failsLeft > 0 {
				failsLeft--
				return errors.New("not yet")
			}
			return nil
		})
		next := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			log.add("next %d attempt %d", c.Delivery().Position.Offset, c.Delivery().Attempt)
			return nil
		})
		e := startIn(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Retry: engine.RetryPolicy{Attempts: 3},
				Processors: procs("retried", retried, "next", next)}}})
		f := e.Feed("in")
		publish(t, f, 1, 2)
		synctest.Wait()
		want := []string{
			"retried 1 first attempt 0", "retried 1 again attempt 0",
			"retried 1 first attempt 1", "retried 1 again attempt 1",
			"retried 1 first attempt 2", "retried 1 again attempt 2",
			"next 1 attempt 0",
			"retried 2 first attempt 0", "retried 2 again attempt 0",
			"next 2 attempt 0",
		}
		if got := log.all(); !slices.Equal(got, want) {
			t.Fatalf("got  %q\nwant %q", got, want)
		}
		if st := f.Status(); st.Failures != 0 {
			t.Fatalf("failures %d after a successful retry, want 0", st.Failures)
		}
	})
}

func TestTwoGroupsAcknowledgeAnItemOnlyAfterEveryGroupsCallbacksRan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &journalLog{}
		entered, release := make(chan struct{}), make(chan struct{})
		held := core.CompletionFunc(func(*core.Delivery) error {
			entered <- struct{}{}
			<-release
			log.add("slow saved")
			return nil
		})
		fast := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			c.OnComplete(logDone{log, "fast saved"})
			return nil
		})
		slow := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			c.OnComplete(held)
			return nil
		})
		e := startIn(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{
				{Name: "fast", Feeds: []string{"in"}, Processors: procs("fast", fast)},
				{Name: "slow", Feeds: []string{"in"}, Processors: procs("slow", slow)}}})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		t.Cleanup(releaseOnce)
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publish(t, f, 1, 1)
		<-entered
		synctest.Wait() // the fast group is done with the item and parked
		if st := f.Status(); subscriber(t, st, "fast/in").Dispatched != 1 {
			t.Fatalf("the fast group has not dispatched the item: %+v", st.Subscribers)
		}
		if got := committedAfterPoll(t, f, c); got != 0 {
			t.Fatalf("committed %d while the slow group's callback runs, want 0", got)
		}
		releaseOnce()
		synctest.Wait()
		if got := committedAfterPoll(t, f, c); got != 1 {
			t.Fatalf("committed %d once both groups' callbacks ran, want 1", got)
		}
		if got := log.all(); !slices.Equal(got, []string{"fast saved", "slow saved"}) {
			t.Fatalf("callbacks %q", got)
		}
	})
}

// A checkpoint holds a group's commits at what it made durable; when the
// group then unsubscribes, the hold stays: the removed queue counts as
// processed only up to its durable mark, whatever it dispatched, and a new
// consumer's progress does not move the commit past it.
func TestACheckpointsHeldPositionSurvivesTheGroupsUnsubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		open := core.ProcessorFunc(func(*core.Cycle, any) error { return nil })
		e := startIn(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{
				{Name: "g", Feeds: []string{"in"}, Processors: procs("g", open)},
				{Name: "later", Processors: procs("later", open)}}})
		f, c, cp := heldFeed(t, e)
		publish(t, f, 1, 3)
		synctest.Wait()
		m3 := cp.Mark()
		publish(t, f, 4, 5)
		synctest.Wait()
		cp.DurableThrough(m3)
		if got := committedAfterPoll(t, f, c); got != 3 {
			t.Fatalf("committed %d with 5 processed and 3 durable, want 3", got)
		}
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		if got := committedAfterPoll(t, f, c); got != 3 {
			t.Fatalf("committed %d after the held group unsubscribed, want 3 (what it made durable)", got)
		}
		if err := e.Subscribe("later", "in"); err != nil {
			t.Fatal(err)
		}
		publish(t, f, 6, 7)
		synctest.Wait()
		if got := committedAfterPoll(t, f, c); got != 3 {
			t.Fatalf("committed %d after a new consumer processed 6-7, want 3", got)
		}
		if st := f.Status(); subscriber(t, st, "later/in").Dispatched != 2 || st.Settled {
			t.Fatalf("status %+v: want the new consumer at 2 and the feed not settled", st)
		}
		// The feed says why it is not settled: the removed group's items
		// that were processed but not made durable hold it.
		if st := f.Status(); st.Stalled == nil {
			t.Fatalf("status %+v: want stalled with the reason, got none", st)
		}
	})
}

// A consumer removed with a backlog holds the position before it for the
// rest of the run: later unsubscribes of the other consumers (each having
// processed everything it was given), and a consumer that came and went in
// between, never release it.
func TestARemovedConsumersHeldPositionSurvivesALaterUnsubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		open := core.ProcessorFunc(func(*core.Cycle, any) error { return nil })
		tokens := make(chan struct{}, 2)
		tokens <- struct{}{}
		tokens <- struct{}{}
		gated := core.ProcessorFunc(func(*core.Cycle, any) error {
			<-tokens
			return nil
		})
		e := startIn(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{
				{Name: "a", Feeds: []string{"in"}, Processors: procs("a", open)},
				{Name: "b", Feeds: []string{"in"}, Processors: procs("b", gated)},
				{Name: "c", Processors: procs("c", open)}}})
		closeOnce := sync.OnceFunc(func() { close(tokens) })
		t.Cleanup(closeOnce)
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publish(t, f, 1, 5)
		synctest.Wait() // a processed 1-5; b processed 1-2 and waits in 3
		if got := committedAfterPoll(t, f, c); got != 2 {
			t.Fatalf("committed %d, want 2", got)
		}
		if err := e.Unsubscribe("b", "in"); err != nil {
			t.Fatal(err)
		}
		closeOnce() // b finishes the item it was handling, and takes no more
		synctest.Wait()
		if got := committedAfterPoll(t, f, c); got != 3 {
			t.Fatalf("committed %d after b was removed having processed 3 of 5, want 3", got)
		}
		if err := e.Subscribe("c", "in"); err != nil {
			t.Fatal(err)
		}
		publish(t, f, 6, 8)
		synctest.Wait()
		for _, g := range []string{"c", "a"} {
			if err := e.Unsubscribe(g, "in"); err != nil {
				t.Fatal(err)
			}
			if got := committedAfterPoll(t, f, c); got != 3 {
				t.Fatalf("committed %d after %s (which processed everything) unsubscribed, want 3", got, g)
			}
		}
		st := f.Status()
		if a := subscriber(t, st, "a/in"); a.Dispatched != 8 {
			t.Fatalf("a dispatched %d, want 8", a.Dispatched)
		}
		if st.Stalled == nil || st.Settled || !st.Lossless {
			t.Fatalf("stalled %v settled %v lossless %v, want stalled, not settled, lossless", st.Stalled, st.Settled, st.Lossless)
		}
	})
}

// A DROP_AFTER_SPIN override for one group on a PAUSE feed isolates it: its
// full queue drops (counted, for it only) instead of pausing the feed, and
// the other group gets every item, in order, with nothing dropped.
func TestADropOverrideIsolatesOneGroupOnAPauseFeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lossyLog, losslessLog := &journalLog{}, &journalLog{}
		release := make(chan struct{})
		lossy := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			<-release
			lossyLog.add("%v", ev)
			return nil
		})
		lossless := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			losslessLog.add("%v", ev)
			return nil
		})
		e := startIn(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 2,
				Subscribers: map[string]engine.Policy{"lossy": engine.DropAfterSpin(0)}}},
			Groups: []engine.GroupConfig{
				{Name: "lossy", Feeds: []string{"in"}, Processors: procs("lossy", lossy)},
				{Name: "lossless", Feeds: []string{"in"}, Processors: procs("lossless", lossless)}}})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		t.Cleanup(releaseOnce)
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publish(t, f, 1, 1)
		synctest.Wait() // lossy holds item 1
		for i := 2; i <= 10; i++ {
			publish(t, f, i, i)
			synctest.Wait() // the lossless group keeps up
		}
		st := f.Status()
		if st.Paused || st.Pauses != 0 {
			t.Fatalf("paused %v pauses %d: the lossy group's full queue paused the feed", st.Paused, st.Pauses)
		}
		if got := subscriber(t, st, "lossy/in").Dropped; got != 7 {
			t.Fatalf("lossy dropped %d, want 7 (items 4-10: 1 held, 2-3 queued)", got)
		}
		if got := subscriber(t, st, "lossless/in"); got.Dropped != 0 || got.Dispatched != 10 {
			t.Fatalf("lossless queue dropped %d dispatched %d, want 0 10", got.Dropped, got.Dispatched)
		}
		releaseOnce()
		synctest.Wait()
		if got := committedAfterPoll(t, f, c); got != 10 {
			t.Fatalf("committed %d, want 10 (the drops are committed past)", got)
		}
		if got, want := losslessLog.all(), strings.Fields("1 2 3 4 5 6 7 8 9 10"); !slices.Equal(got, want) {
			t.Fatalf("lossless group processed %q, want %q", got, want)
		}
		if got, want := lossyLog.all(), strings.Fields("1 2 3"); !slices.Equal(got, want) {
			t.Fatalf("lossy group processed %q, want %q", got, want)
		}
		if st := f.Status(); st.Lossless || st.Dropped != 7 {
			t.Fatalf("feed lossless %v dropped %d, want false 7", st.Lossless, st.Dropped)
		}
	})
}

// Under TryPublish a full BLOCK_WITH_DEADLINE queue pauses the source, as
// PAUSE does: it returns false at once (no wait for the deadline), numbers,
// drops and refuses nothing, and the source is signalled Ready when there
// is room.
func TestBlockUnderTryPublishPausesInsteadOfWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &journalLog{}
		release := make(chan struct{})
		gated := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			<-release
			log.add("%v", ev)
			return nil
		})
		e := startIn(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.BlockWithDeadline(time.Second).WithSpin(0), QueueSize: 1}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("g", gated)}}})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		t.Cleanup(releaseOnce)
		f := e.Feed("in")
		publish(t, f, 1, 1)
		synctest.Wait() // item 1 taken, the group blocked in it
		publish(t, f, 2, 2)
		began := time.Now()
		took := f.Intake().TryPublish(3, core.Position{Offset: 3})
		if elapsed := time.Since(began); took || elapsed != 0 {
			t.Fatalf("TryPublish into a full BLOCK queue took the item %v after %s, want false at once", took, elapsed)
		}
		st := f.Status()
		if st.Sequence != 2 || !st.Paused || st.Pauses != 1 || st.Dropped != 0 || st.Refused != 0 || st.Downgraded != 0 {
			t.Fatalf("sequence %d paused %v pauses %d dropped %d refused %d downgraded %d, want 2 true 1 0 0 0",
				st.Sequence, st.Paused, st.Pauses, st.Dropped, st.Refused, st.Downgraded)
		}
		releaseOnce()
		synctest.Wait()
		select {
		case <-f.Intake().Ready():
		default:
			t.Fatal("the paused source was not signalled Ready once the queue emptied")
		}
		publish(t, f, 3, 3)
		synctest.Wait()
		if got := log.all(); !slices.Equal(got, []string{"1", "2", "3"}) {
			t.Fatalf("dispatched %q, want [1 2 3]", got)
		}
	})
}

// A publish nested in another feed's publish (feed a's Journal publishing
// into feed b, with the ctx it is given) never waits for room in b's full
// BLOCK_WITH_DEADLINE queue while a's lock is held: it falls back to a
// counted drop, downgraded, at once.
func TestAPublishNestedInAnotherFeedsPublishNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type result struct {
			err     error
			elapsed time.Duration
		}
		results := make(chan result, 1)
		var e *engine.Engine
		journal := journalFunc(func(ctx context.Context, feed string, seq int64, item any) error {
			if item == "go" {
				began := time.Now()
				err := e.Feed("b").Publish(ctx, "nested")
				results <- result{err, time.Since(began)}
			}
			return nil
		})
		release := make(chan struct{})
		gated := core.ProcessorFunc(func(*core.Cycle, any) error { <-release; return nil })
		log := &journalLog{}
		e = startIn(t, engine.Config{
			Feeds: []engine.FeedConfig{
				{Name: "a", Policy: engine.DropAfterSpin(0), QueueSize: 8, Journal: journal},
				{Name: "b", Policy: engine.BlockWithDeadline(time.Second).WithSpin(0), QueueSize: 1}},
			Groups: []engine.GroupConfig{
				{Name: "ga", Feeds: []string{"a"}, Processors: procs("ga", core.ProcessorFunc(func(c *core.Cycle, ev any) error {
					log.add("ga %v", ev)
					return nil
				}))},
				{Name: "gb", Feeds: []string{"b"}, Processors: procs("gb", gated)}}})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		t.Cleanup(releaseOnce)
		b := e.Feed("b")
		ctx := context.Background()
		b.Publish(ctx, 1)
		synctest.Wait() // gb holds item 1
		b.Publish(ctx, 2)
		if err := e.Feed("a").Publish(ctx, "go"); err != nil {
			t.Fatal(err)
		}
		if r := <-results; r.err != nil || r.elapsed != 0 {
			t.Fatalf("the nested publish into b returned %v after %s, want nil at once", r.err, r.elapsed)
		}
		st := b.Status()
		if st.Downgraded != 1 || st.Dropped != 1 || st.Refused != 0 || st.Sequence != 3 {
			t.Fatalf("b: downgraded %d dropped %d refused %d sequence %d, want 1 1 0 3", st.Downgraded, st.Dropped, st.Refused, st.Sequence)
		}
		synctest.Wait()
		if got := log.all(); !slices.Equal(got, []string{"ga go"}) {
			t.Fatalf("feed a dispatched %q, want [ga go]", got)
		}
	})
}

// A group unsubscribed while a BLOCK_WITH_DEADLINE publisher waits for room
// in its queue releases the publisher: the unsubscribe does not wait for it,
// the publisher re-evaluates against the remaining queues, which have room,
// and delivers to them, well before its deadline; nothing is refused or
// dropped, and the removed queue is not given the item. With one queue
// remaining the publish takes the short way (a single hand-off), with two
// the general one.
func TestAnUnsubscribeWhileABlockPublisherWaitsReleasesThePublisher(t *testing.T) {
	for _, remaining := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d queues remain", remaining), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				unsubscribeUnderAWaitingBlockPublisher(t, remaining)
			})
		})
	}
}

func unsubscribeUnderAWaitingBlockPublisher(t *testing.T, remaining int) {
	release := make(chan struct{})
	gatedLog := &journalLog{}
	gated := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		<-release
		gatedLog.add("%v", ev)
		return nil
	})
	const deadline = time.Second
	cfg := engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.BlockWithDeadline(deadline).WithSpin(0), QueueSize: 1}},
		Groups: []engine.GroupConfig{{Name: "gated", Feeds: []string{"in"}, Processors: procs("gated", gated)}}}
	openLogs := make([]*journalLog, remaining)
	for i := range openLogs {
		l := &journalLog{}
		openLogs[i] = l
		name := fmt.Sprintf("open%d", i)
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: name, Feeds: []string{"in"},
			Processors: procs(name, core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				l.add("%v", ev)
				return nil
			}))})
	}
	e := startIn(t, cfg)
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	f := e.Feed("in")
	ctx := context.Background()
	f.Publish(ctx, 1)
	synctest.Wait() // gated holds item 1
	f.Publish(ctx, 2)
	synctest.Wait() // the open groups processed 1 and 2; gated's queue is full
	type result struct {
		err     error
		elapsed time.Duration
	}
	results := make(chan result, 1)
	began := time.Now()
	go func() {
		err := f.Publish(ctx, 3)
		results <- result{err, time.Since(began)}
	}()
	synctest.Wait()
	select {
	case r := <-results:
		t.Fatalf("publish returned %v before the unsubscribe; the test needs it waiting", r.err)
	default:
	}
	if err := e.Unsubscribe("gated", "in"); err != nil {
		t.Fatal(err)
	}
	r := <-results
	if r.err != nil || r.elapsed >= deadline {
		t.Fatalf("publish returned %v after %s, want it delivered to the remaining queues before the %s deadline", r.err, r.elapsed, deadline)
	}
	releaseOnce()
	synctest.Wait()
	st := f.Status()
	if st.Sequence != 3 || st.Refused != 0 || st.Dropped != 0 || !st.Lossless {
		t.Fatalf("sequence %d refused %d dropped %d lossless %v, want 3 0 0 true", st.Sequence, st.Refused, st.Dropped, st.Lossless)
	}
	if g := subscriber(t, st, "gated/in"); !g.Removed || g.Position != 2 {
		t.Fatalf("gated queue %+v: want removed at position 2 (item 3 never queued for it)", g)
	}
	for i, l := range openLogs {
		if got := l.all(); !slices.Equal(got, []string{"1", "2", "3"}) {
			t.Fatalf("open%d dispatched %q, want [1 2 3]", i, got)
		}
	}
	if got := gatedLog.all(); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("gated dispatched %q, want [1]: it was removed while handling item 1", got)
	}
}
