package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// The operator's counters and warnings of the overload policies: per queue
// (a group's binding to a feed) what it refused, downgraded, dropped, how
// long publishes waited for it and how long it paused its feed; a warning
// for the first loss of each kind of a queue, and for a pause past its
// threshold (docs/GUARANTEES.md, "Overload policies").

// opsEngine starts an engine of feed "in" (fc, named here) and one group
// per name, each with a closed turnstile processor "p-<group>" (every one
// opened before the engine stops).
func opsEngine(t *testing.T, cfg engine.Config, fc engine.FeedConfig, groups ...string) (*engine.Engine, map[string]*turnstile) {
	t.Helper()
	fc.Name = "in"
	cfg.Feeds = []engine.FeedConfig{fc}
	gates := map[string]*turnstile{}
	for _, n := range groups {
		gates[n] = newTurnstile(false)
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: n, Feeds: []string{"in"}, Processors: procs("p-"+n, gates[n])})
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 200 * time.Millisecond
	}
	e := start(t, cfg)
	t.Cleanup(func() { // before the engine stops (cleanups run last first)
		for _, g := range gates {
			g.openUp()
		}
	})
	return e, gates
}

// fillGated publishes item 1, taken (and held) by every closed turnstile,
// then item 2, which fills their queues of one slot.
func fillGated(t *testing.T, e *engine.Engine, gates map[string]*turnstile, publish func(item int)) {
	t.Helper()
	publish(1)
	testutil.WhenBlocked(t, "item 1 taken by every closed group", func() bool {
		for _, g := range gates {
			if !g.isOpen() && g.enteredCount() != 1 {
				return false
			}
		}
		return true
	})
	publish(2)
}

func (g *turnstile) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// pusher publishes an item with Publish, failing the test on an error.
func pusher(t *testing.T, f *engine.Feed) func(item int) {
	return func(item int) {
		t.Helper()
		if err := f.Publish(context.Background(), item); err != nil {
			t.Fatalf("publish %d: %v", item, err)
		}
	}
}

// taker offers item at offset item with TryPublish, failing the test when
// it is not taken.
func taker(t *testing.T, f *engine.Feed) func(item int) {
	return func(item int) {
		t.Helper()
		if !f.Intake().TryPublish(item, core.Position{Offset: int64(item)}) {
			t.Fatalf("item %d not taken", item)
		}
	}
}

// A refusal, a downgrade and a drop are counted on the queue they
// happened to, not only on the feed: a BLOCK queue refuses and downgrades,
// a DROP override drops, an open queue counts nothing.
func TestEachQueueCountsItsOwnRefusalsDowngradesAndDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, gates := opsEngine(t, engine.Config{}, engine.FeedConfig{Policy: engine.BlockWithDeadline(time.Second).WithSpin(0),
			QueueSize: 1, Subscribers: map[string]engine.Policy{"droppy": engine.DropAfterSpin(0)}}, "blocky", "droppy", "easy")
		gates["easy"].openUp()
		f := e.Feed("in")
		fillGated(t, e, gates, pusher(t, f))
		testutil.WhenBlocked(t, "easy's queue empty", func() bool { return gates["easy"].count() == 2 })
		if err := f.Offer(3); err != nil { // blocky: downgraded, then dropped; droppy: dropped
			t.Fatal(err)
		}
		var re *engine.RefusedError
		if err := f.Publish(context.Background(), 4); !errors.Is(err, engine.ErrRefused) || !errors.As(err, &re) || re.Reason != engine.RefusedDeadline {
			t.Fatalf("publish 4: %v, want refused at the deadline", err)
		}
		type counts struct{ dropped, refused, downgraded, blocked int64 }
		want := map[string]counts{
			"blocky/in": {dropped: 1, refused: 1, downgraded: 1, blocked: 1},
			"droppy/in": {dropped: 1},
			"easy/in":   {},
		}
		st := e.Status().Feeds[0]
		for _, s := range st.Subscribers {
			if got := (counts{s.Dropped, s.Refused, s.Downgraded, s.Blocked}); got != want[s.Queue] {
				t.Errorf("%s: got %+v, want %+v", s.Queue, got, want[s.Queue])
			}
		}
		if got, want := [3]int64{st.Dropped, st.Refused, st.Downgraded}, [3]int64{2, 1, 1}; got != want {
			t.Errorf("feed dropped, refused, downgraded %v, want %v", got, want)
		}
	})
}

// A BLOCK publish's wait for room is counted on the queue it waited for
// once it ends, delivered or refused, with its time on the TimerClock: the
// total and the longest. The clock here stands still but when the test
// moves it, so the times are exactly what it moved.
func TestABlockedWaitIsCountedAndTimedOnTheTimerClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := core.NewStepClock(time.Unix(0, 0), 0)
		e, gates := opsEngine(t, engine.Config{TimerClock: clock}, engine.FeedConfig{Policy: engine.BlockWithDeadline(time.Hour), QueueSize: 1}, "g")
		f, g := e.Feed("in"), gates["g"]
		fillGated(t, e, gates, pusher(t, f))
		done := make(chan error, 1)
		go func() { done <- f.Publish(context.Background(), 3) }()
		synctest.Wait() // waiting for room
		clock.Advance(3 * time.Second)
		g.let(1) // item 1 done, 2 taken: room for 3
		if err := <-done; err != nil {
			t.Fatalf("publish 3: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- f.Publish(ctx, 4) }()
		synctest.Wait() // waiting for room again
		clock.Advance(5 * time.Second)
		cancel()
		if err := <-done; !errors.Is(err, engine.ErrRefused) {
			t.Fatalf("publish 4: %v, want refused", err)
		}
		s := e.Status().Feeds[0].Subscribers[0]
		for _, c := range []struct {
			name      string
			got, want any
		}{
			{"blocked", s.Blocked, int64(2)},
			{"blockedNs", s.BlockedTime, 8 * time.Second},
			{"blockedMaxNs", s.BlockedMax, 5 * time.Second},
			{"refused", s.Refused, int64(1)},
		} {
			if c.got != c.want {
				t.Errorf("%s %v, want %v", c.name, c.got, c.want)
			}
		}
	})
}

// A pause is timed on the TimerClock, the current one included while it
// lasts, for the feed and for the queue whose being full paused it; a
// queue that had room when the pause began is not charged with it.
func TestAPauseIsTimedAndChargedToTheQueueThatPausedTheFeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := core.NewStepClock(time.Unix(0, 0), 0)
		e, gates := opsEngine(t, engine.Config{TimerClock: clock}, engine.FeedConfig{Policy: engine.Pause(), QueueSize: 1}, "slow", "fast")
		gates["fast"].openUp()
		f := e.Feed("in")
		take := taker(t, f)
		fillGated(t, e, gates, take)
		testutil.WhenBlocked(t, "fast's queue empty", func() bool { return gates["fast"].count() == 2 })
		if f.Intake().TryPublish(3, core.Position{Offset: 3}) {
			t.Fatal("item 3 taken with slow's queue full")
		}
		clock.Advance(4 * time.Second)
		during := e.Status().Feeds[0]
		gates["slow"].let(1)
		testutil.WhenBlocked(t, "item 2 taken", func() bool { return gates["slow"].enteredCount() == 2 })
		take(3) // the pause ends
		clock.Advance(10 * time.Second)
		after := e.Status().Feeds[0]

		type pause struct {
			paused bool
			pauses int64
			time   time.Duration
		}
		for _, tc := range []struct {
			name       string
			st         engine.FeedStatus
			feed, slow pause
		}{
			{"during the pause", during, pause{true, 1, 4 * time.Second}, pause{true, 1, 4 * time.Second}},
			{"after it", after, pause{false, 1, 4 * time.Second}, pause{false, 1, 4 * time.Second}},
		} {
			queues := map[string]pause{}
			for _, s := range tc.st.Subscribers {
				queues[s.Queue] = pause{s.Paused, s.Pauses, s.PausedTime}
			}
			for _, c := range []struct {
				what      string
				got, want pause
			}{
				{"feed", pause{tc.st.Paused, tc.st.Pauses, tc.st.PausedTime}, tc.feed},
				{"slow/in", queues["slow/in"], tc.slow},
				{"fast/in", queues["fast/in"], pause{}},
			} {
				if c.got != c.want {
					t.Errorf("%s: %s: got %+v, want %+v", tc.name, c.what, c.got, c.want)
				}
			}
		}
	})
}

// The new status fields marshal in lowerCamel, as the others.
func TestTheNewStatusFieldsAreInTheJSONInLowerCamel(t *testing.T) {
	for _, tc := range []struct {
		v    any
		keys []string
	}{
		{engine.FeedStatus{}, []string{"pausedNs"}},
		{engine.SubscriberStatus{}, []string{"refused", "downgraded", "blocked", "blockedNs", "blockedMaxNs", "paused", "pauses", "pausedNs"}},
		{engine.GroupStatus{}, []string{"stalled"}},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range tc.keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%T: no %q in %s", tc.v, k, b)
			}
		}
	}
}

// countOf is how many messages logged contain sub.
func countOf(logs *testutil.Logs, sub string) int {
	n := 0
	for _, m := range strings.Split(logs.String(), "\n") {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// The first drop, refusal and downgrade of a queue are each warned once,
// naming the queue; the next ones are counted, never warned per item.
func TestTheFirstLossOfEachKindOfAQueueIsWarnedOnceNotPerItem(t *testing.T) {
	const n = 5 // losses of each kind per queue
	for _, tc := range []struct {
		name   string
		policy engine.Policy
		groups []string
		lose   func(t *testing.T, f *engine.Feed)
		want   map[string]int // message part -> messages containing it
	}{
		{
			name: "drops", policy: engine.DropAfterSpin(0), groups: []string{"a", "b"},
			lose: func(t *testing.T, f *engine.Feed) {
				for i := range n {
					pusher(t, f)(3 + i)
				}
			},
			want: map[string]int{"queue a/in: first drop": 1, "queue b/in: first drop": 1, "first drop": 2},
		},
		{
			name: "refusals", policy: engine.BlockWithDeadline(10 * time.Millisecond), groups: []string{"a"},
			lose: func(t *testing.T, f *engine.Feed) {
				for i := range n {
					if err := f.Publish(context.Background(), 3+i); !errors.Is(err, engine.ErrRefused) {
						t.Fatalf("publish %d: %v, want refused", 3+i, err)
					}
				}
			},
			want: map[string]int{"queue a/in: first refused publish (deadline)": 1, "first refused": 1},
		},
		{
			name: "downgrades", policy: engine.BlockWithDeadline(time.Hour).WithSpin(0), groups: []string{"a"},
			lose: func(t *testing.T, f *engine.Feed) {
				for i := range n {
					if err := f.Offer(3 + i); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: map[string]int{"queue a/in: first downgraded publish": 1, "queue a/in: first drop": 1, "first": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := &testutil.Logs{}
				e, gates := opsEngine(t, engine.Config{Logger: logs.Logger()}, engine.FeedConfig{Policy: tc.policy, QueueSize: 1}, tc.groups...)
				f := e.Feed("in")
				fillGated(t, e, gates, pusher(t, f))
				tc.lose(t, f)
				for sub, want := range tc.want {
					if got := countOf(logs, sub); got != want {
						t.Errorf("%d messages with %q, want %d; logged:\n%s", got, sub, want, logs)
					}
				}
				for _, s := range e.Status().Feeds[0].Subscribers {
					if got := s.Dropped + s.Refused + s.Downgraded; got < n {
						t.Errorf("%s counted %d losses, want at least %d", s.Queue, got, n)
					}
				}
			})
		})
	}
}

// statusLogger is a slog.Handler that reads the engine's status on every
// record (as a handler showing the status with each warning would).
type statusLogger struct {
	testutil.Logs
	e atomic.Pointer[engine.Engine]
}

func (h *statusLogger) Handle(ctx context.Context, r slog.Record) error {
	if e := h.e.Load(); e != nil {
		e.Status() // takes every feed's lock
	}
	return h.Logs.Handle(ctx, r)
}

// The Logger is never called under a feed's lock: a handler that reads
// the status (which takes the lock) on each warning does not deadlock the
// publisher that warns, of a downgrade, a drop or a refusal. (Outside a
// synctest bubble: a goroutine waiting for a lock is not durably blocked,
// so a deadlock would hang a bubble; here it fails after a bound.)
func TestTheLoggerIsNeverCalledUnderAFeedsLock(t *testing.T) {
	h := &statusLogger{}
	entered, release := make(chan struct{}, 8), make(chan struct{})
	held := core.ProcessorFunc(func(*core.Cycle, any) error {
		entered <- struct{}{}
		<-release
		return nil
	})
	e, err := engine.New(engine.Config{Logger: slog.New(h), DrainTimeout: time.Second,
		Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.BlockWithDeadline(time.Millisecond).WithSpin(0), QueueSize: 1}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", held)}}})
	if err != nil {
		t.Fatal(err)
	}
	h.e.Store(e)
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	deadlocked := false
	t.Cleanup(func() {
		close(release)
		if deadlocked {
			return // Stop would wait for the lock too
		}
		if err := e.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	f := e.Feed("in")
	if err := f.Publish(ctx, 1); err != nil {
		t.Fatal(err)
	}
	<-entered                                 // item 1 held by the group
	if err := f.Publish(ctx, 2); err != nil { // the queue is full
		t.Fatal(err)
	}
	go func() {
		if err := f.Offer(3); err != nil { // a downgrade and a drop: two warnings
			done <- err
			return
		}
		if err := f.Publish(ctx, 4); !errors.Is(err, engine.ErrRefused) { // a refusal: one more
			done <- fmt.Errorf("publish 4: %v, want refused", err)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		deadlocked = true
		t.Fatal("the publisher did not return: the Logger was called under the feed's lock")
	}
	if got := countOf(&h.Logs, "first"); got != 3 {
		t.Errorf("%d first-loss warnings, want 3; logged:\n%s", got, &h.Logs)
	}
}

// pauseFeed starts feed "in" under PAUSE with one closed group "g" and
// pauses it: g holds item 1, item 2 fills its queue, item 3 is refused.
func pauseFeed(t *testing.T, warnAfter time.Duration, logs *testutil.Logs) (*engine.Engine, *turnstile) {
	t.Helper()
	e, gates := opsEngine(t, engine.Config{Logger: logs.Logger()}, engine.FeedConfig{Policy: engine.Pause(), QueueSize: 1, PauseWarnAfter: warnAfter}, "g")
	f := e.Feed("in")
	fillGated(t, e, gates, taker(t, f))
	if f.Intake().TryPublish(3, core.Position{Offset: 3}) {
		t.Fatal("item 3 taken with the queue full")
	}
	return e, gates["g"]
}

// A pause that lasts past FeedConfig.PauseWarnAfter is warned of once,
// naming what paused the feed, however long it lasts, and not before; its
// end is logged (Info); the next pause that lasts as long is warned of
// again.
func TestAPauseLongerThanItsThresholdIsWarnedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testutil.Logs{}
		e, g := pauseFeed(t, time.Minute, logs)
		const warned = `blackbox engine: feed "in" has been paused for 1m0s (the source is refused every item): queue g/in full`
		for _, step := range []struct {
			advance time.Duration
			want    int
		}{
			{time.Minute - time.Millisecond, 0},
			{time.Millisecond, 1},
			{10 * time.Minute, 1},
		} {
			testutil.Advance(step.advance)
			if got := countOf(logs, warned); got != step.want {
				t.Fatalf("after %s more: %d warnings, want %d; logged:\n%s", step.advance, got, step.want, logs)
			}
		}
		g.let(1)
		testutil.WhenBlocked(t, "item 2 taken", func() bool { return g.enteredCount() == 2 })
		taker(t, e.Feed("in"))(3)
		if !logs.Has(`feed "in" resumed after a pause of 11m0s`) {
			t.Errorf("the end of the pause not logged:\n%s", logs)
		}
		if e.Feed("in").Intake().TryPublish(4, core.Position{Offset: 4}) {
			t.Fatal("item 4 taken with the queue full")
		}
		testutil.Advance(2 * time.Minute)
		if got := countOf(logs, warned); got != 2 {
			t.Errorf("%d warnings after a second long pause, want 2", got)
		}
	})
}

// PauseWarnAfter 0 is DefaultPauseWarnAfter; a negative one never warns.
func TestPauseWarnAfterZeroIsTheDefaultAndANegativeOneNeverWarns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		warnAfter time.Duration
		quiet     time.Duration // no warning after this long
		warnedBy  time.Duration // one by this long; 0: never
	}{
		{"zero", 0, engine.DefaultPauseWarnAfter - time.Millisecond, engine.DefaultPauseWarnAfter},
		{"negative", -1, 24 * time.Hour, 0},
		{"five seconds", 5 * time.Second, 5*time.Second - time.Millisecond, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := &testutil.Logs{}
				pauseFeed(t, tc.warnAfter, logs)
				testutil.Advance(tc.quiet)
				if got := countOf(logs, "has been paused for"); got != 0 {
					t.Fatalf("after %s: %d warnings, want none", tc.quiet, got)
				}
				if tc.warnedBy == 0 {
					return
				}
				testutil.Advance(tc.warnedBy - tc.quiet)
				if got := countOf(logs, "has been paused for"); got != 1 {
					t.Fatalf("after %s: %d warnings, want 1", tc.warnedBy, got)
				}
			})
		})
	}
}

// refusingCommitter fails its commits while refuse is set.
type refusingCommitter struct {
	committer
	refuse atomic.Bool
}

func (c *refusingCommitter) Commit() error {
	if c.refuse.Load() {
		return errors.New("broker down")
	}
	return c.committer.Commit()
}

// The age of the oldest uncommitted item is timed on the TimerClock from
// when the feed took it: the ack window's oldest entry, or the oldest told
// to the committer while its commit has not succeeded; 0 once every item
// is committed. The clock stands still but when the test moves it.
func TestTheOldestUncommittedItemIsTimedFromWhenTheFeedTookIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := core.NewStepClock(time.Unix(0, 0), 0)
		e, gates := opsEngine(t, engine.Config{TimerClock: clock}, engine.FeedConfig{Policy: engine.Pause(), QueueSize: 8}, "g")
		f, g := e.Feed("in"), gates["g"]
		c := &refusingCommitter{}
		f.Intake().SetCommitter(c)
		age := func(when string, want time.Duration) {
			t.Helper()
			if got := e.Status().Feeds[0].OldestUncommitted; got != want {
				t.Errorf("%s: oldest uncommitted %s, want %s", when, got, want)
			}
		}
		poll := func(wantErr bool) {
			t.Helper()
			synctest.Wait() // the group handled what it was let through
			if _, err := f.Intake().PollAcks(); (err != nil) != wantErr {
				t.Fatalf("PollAcks: %v, want an error %v", err, wantErr)
			}
		}
		age("before any item", 0)
		taker(t, f)(1) // t=0s
		clock.Advance(2 * time.Second)
		age("item 1 taken 2s ago", 2*time.Second)
		if n := f.Intake().TryPublishBatch([]any{2, 3}, []core.Position{{Offset: 2}, {Offset: 3}}); n != 2 { // t=2s
			t.Fatalf("batch: %d items taken, want 2", n)
		}
		clock.Advance(3 * time.Second)
		age("items 2, 3 taken after item 1", 5*time.Second)
		g.let(1)
		c.refuse.Store(true)
		poll(true)
		clock.Advance(time.Second)
		age("item 1 told to the committer, its commit failed", 6*time.Second)
		c.refuse.Store(false)
		poll(false)
		age("item 1 committed: item 2 is the oldest", 4*time.Second)
		g.let(2)
		poll(false)
		age("every item committed", 0)
	})
}
