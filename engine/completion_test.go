package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// journal collects what processors and callbacks did, in order.
type journalLog struct {
	mu  sync.Mutex
	evs []string
}

func (j *journalLog) add(format string, args ...any) {
	j.mu.Lock()
	j.evs = append(j.evs, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

func (j *journalLog) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.evs...)
}

type saver struct {
	name string
	log  *journalLog
	f    *engine.Feed
	fail int // fail this many times
}

func (s *saver) Complete(d *core.Delivery) error {
	st := s.f.Status()
	s.log.add("%s complete %d dispatched=%d", s.name, d.Position.Offset, st.Subscribers[0].Dispatched)
	if s.fail > 0 {
		s.fail--
		return errors.New("save failed")
	}
	return nil
}

func TestCompletionsRunAfterReentrantWorkAndBeforeTheDispatchedCounter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &journalLog{}
		var e *engine.Engine
		var sa, sb *saver
		a := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			log.add("a %v", ev)
			if ev == 1 {
				c.Queue(10)
			}
			c.OnComplete(sa)
			c.OnComplete(sa) // the same value is kept once
			return nil
		})
		b := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			log.add("b %v", ev)
			if !c.OnComplete(sb) {
				log.add("b no delivery")
			}
			return nil
		})
		e = start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("a", a, "b", b)}}})
		f := e.Feed("in")
		sa, sb = &saver{name: "sa", log: log, f: f}, &saver{name: "sb", log: log, f: f}
		f.Intake().SetCommitter(&committer{})
		publishAll(t, f, 1, 1)
		testutil.WhenBlocked(t, "dispatched", func() bool { return f.Status().Subscribers[0].Dispatched == 1 })
		want := []string{"a 1", "a 10", "b 1", "sa complete 1 dispatched=0", "sb complete 1 dispatched=0"}
		if got := log.all(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("got  %q\nwant %q", got, want)
		}
	})
}

func TestOnCompleteOutsideAPositionedDeliveryKeepsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []bool
		var mu sync.Mutex
		p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			ok := c.OnComplete(core.CompletionFunc(func(*core.Delivery) error { panic("must not run") }))
			mu.Lock()
			got = append(got, ok, c.Delivery() == nil)
			mu.Unlock()
			return nil
		})
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}}})
		e.Feed("in").Publish(t.Context(), "push")
		testutil.WhenBlocked(t, "dispatch", func() bool { return e.Status().Feeds[0].Subscribers[0].Dispatched == 1 })
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 || got[0] || !got[1] {
			t.Fatalf("OnComplete=%v nilDelivery=%v, want false true", got[0], got[1])
		}
	})
}

func TestAFailingCallbackIsRetriedAloneAndSkippedWhenExhausted(t *testing.T) {
	for _, tc := range []struct {
		name         string
		fails        int
		wantLossless bool
		wantCalls    int
	}{
		{"exhausted", 100, false, 3},
		{"succeeds on retry", 1, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &journalLog{}
				var s *saver
				handled := 0
				p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
					handled++
					c.OnComplete(s)
					return nil
				})
				e := start(t, engine.Config{
					Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
					Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Retry: engine.RetryPolicy{Attempts: 3}, Processors: procs("p", p)}}})
				f := e.Feed("in")
				c := &committer{}
				f.Intake().SetCommitter(c)
				s = &saver{name: "s", log: log, f: f, fail: tc.fails}
				publishAll(t, f, 1, 1)
				settleCommit(t, f, c, 1) // acknowledged either way
				st := f.Status()
				if got := len(log.all()); got != tc.wantCalls || handled != 1 {
					t.Fatalf("callback ran %d times, processor %d times; want %d and 1", got, handled, tc.wantCalls)
				}
				if st.Lossless != tc.wantLossless || (st.CompletionFailures == 0) != tc.wantLossless {
					t.Fatalf("lossless %v completionFailures %d, want lossless %v", st.Lossless, st.CompletionFailures, tc.wantLossless)
				}
			})
		})
	}
}

func TestAPanicIsAFailureOfTheItemNeverACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var failed []error
		calls := 0
		p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			calls++
			if calls == 1 {
				panic("boom")
			}
			return nil
		})
		e := start(t, engine.Config{
			Observer: engine.Observer{Failed: func(_ string, _ *engine.Input, err error) { mu.Lock(); failed = append(failed, err); mu.Unlock() }},
			Feeds:    []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Retry: engine.RetryPolicy{Attempts: 2}, Processors: procs("p", p)}}})
		e.Feed("in").Publish(t.Context(), 1)
		e.Feed("in").Publish(t.Context(), 2)
		testutil.WhenBlocked(t, "both", func() bool { return e.Status().Feeds[0].Subscribers[0].Dispatched == 2 })
		mu.Lock()
		defer mu.Unlock()
		var pe *core.PanicError
		if len(failed) != 1 || !errors.As(failed[0], &pe) || calls != 3 {
			t.Fatalf("failures %v calls %d: want one *PanicError, then a retry and the next item", failed, calls)
		}
		if st := e.Status().Feeds[0]; st.Failures != 0 || st.Retries != 1 {
			t.Fatalf("failures %d retries %d after a successful retry, want 0 and 1", st.Failures, st.Retries)
		}
	})
}

// TestAnExhaustedFailureSkipsTheItemAndItIsAcknowledged: the source commits
// past an item whose processor failed past its retries, and the feed is not
// lossless: the item was not applied.
func TestAnExhaustedFailureSkipsTheItemAndItIsAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := core.ProcessorFunc(func(c *core.Cycle, ev any) error { return errors.New("always") })
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Retry: engine.RetryPolicy{Attempts: 2}, Processors: procs("p", p)}}})
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publishAll(t, f, 1, 3)
		settleCommit(t, f, c, 3)
		if st := f.Status(); st.Failures != 3 || st.Retries != 3 || st.Lossless {
			t.Fatalf("failures %d retries %d lossless %v, want 3 (one retry of each item) 3 false", st.Failures, st.Retries, st.Lossless)
		}
	})
}

func TestACheckpointHoldsTheCommitUntilStateIsDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(false)
		e, f, c := positioned(t, engine.Pause(), 64, map[string]*turnstile{"g": g}, "g")
		cp, err := e.Hold("in", "g")
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, f, 1, 5)
		g.let(3)
		testutil.WhenBlocked(t, "3 dispatched", func() bool { return f.Status().Subscribers[0].Dispatched == 3 })
		settleCommit(t, f, c, 0)
		m3 := cp.Mark()
		g.let(2)
		testutil.WhenBlocked(t, "5 dispatched", func() bool { return f.Status().Subscribers[0].Dispatched == 5 })
		settleCommit(t, f, c, 0)
		cp.DurableThrough(m3)
		settleCommit(t, f, c, 3)
		cp.DurableThrough(cp.Mark())
		settleCommit(t, f, c, 5)
		cp.DurableThrough(m3) // marks only advance
		cp.Release()
		g.openUp()
		publishAll(t, f, 6, 7)
		settleCommit(t, f, c, 7)
	})
}

func TestARebindStartsANewBindingHeldAtNothingDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTurnstile(true)
		e, f, c := positioned(t, engine.Pause(), 64, map[string]*turnstile{"g": g}, "g")
		cp, err := e.Hold("in", "g")
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, f, 1, 3)
		testutil.WhenBlocked(t, "3", func() bool { return g.count() == 3 })
		old := cp.Mark()
		cp.DurableThrough(old)
		settleCommit(t, f, c, 3)
		e.Unsubscribe("g", "in")
		e.Subscribe("g", "in")
		publishAll(t, f, 4, 6)
		testutil.WhenBlocked(t, "6", func() bool { return g.count() == 6 })
		cp.DurableThrough(core.Mark{}) // the zero Mark: ignored
		cp.DurableThrough(old)         // the old binding's mark: ignored
		settleCommit(t, f, c, 3)
		cp.DurableThrough(cp.Mark())
		settleCommit(t, f, c, 6)
	})
}

func TestStatusJSONHasEveryField(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", newTurnstile(true))}}})
		b, err := json.Marshal(e.Status())
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]any
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatal(err)
		}
		feed := top["feeds"].([]any)[0].(map[string]any)
		sub := feed["subscribers"].([]any)[0].(map[string]any)
		for _, tc := range []struct {
			obj  map[string]any
			keys string
		}{
			{top, "settled lossless feeds"},
			{feed, "feed state bounded sequence detail drained settled lossless policy dropped refused downgraded paused pauses acknowledged pendingAcks consumers stalled unterminated completionFailures failures subscribers"},
			{sub, "queue policy position dispatched drained dropped"},
		} {
			var missing []string
			for _, k := range strings.Fields(tc.keys) {
				if _, ok := tc.obj[k]; !ok {
					missing = append(missing, k)
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Errorf("missing %v in %s", missing, b)
			}
		}
	})
}

func TestBadConfigurationFailsAtNew(t *testing.T) {
	p := core.ProcessorFunc(func(*core.Cycle, any) error { return nil })
	group := func(name string, feeds ...string) engine.GroupConfig {
		return engine.GroupConfig{Name: name, Feeds: feeds, Processors: procs("p-"+name, p)}
	}
	feed := func(name string, pol engine.Policy) engine.FeedConfig {
		return engine.FeedConfig{Name: name, Policy: pol, QueueSize: 8}
	}
	for _, tc := range []struct {
		name             string
		cfg              engine.Config
		feed, group, key string
	}{
		{"missing policy", engine.Config{Feeds: []engine.FeedConfig{{Name: "f", QueueSize: 8}}}, "f", "", "policy"},
		{"deadline on drop", engine.Config{Feeds: []engine.FeedConfig{feed("f", engine.Policy{Kind: engine.DropAfterSpinKind, Deadline: time.Second})}}, "f", "", "deadline"},
		{"deadline on pause", engine.Config{Feeds: []engine.FeedConfig{feed("f", engine.Policy{Kind: engine.PauseKind, Deadline: time.Second})}}, "f", "", "deadline"},
		{"no deadline on block", engine.Config{Feeds: []engine.FeedConfig{feed("f", engine.BlockWithDeadline(0))}}, "f", "", "deadline"},
		{"negative spin", engine.Config{Feeds: []engine.FeedConfig{feed("f", engine.DropAfterSpin(-1))}}, "f", "", "spin"},
		{"zero queue", engine.Config{Feeds: []engine.FeedConfig{{Name: "f", Policy: engine.Pause()}}}, "f", "", "queueSize"},
		{"override for unknown group", engine.Config{Feeds: []engine.FeedConfig{{Name: "f", Policy: engine.Pause(), QueueSize: 8,
			Subscribers: map[string]engine.Policy{"ghost": engine.DropAfterSpin(0)}}}}, "f", "ghost", "subscribers.ghost"},
		{"bad override", engine.Config{Feeds: []engine.FeedConfig{{Name: "f", Policy: engine.Pause(), QueueSize: 8,
			Subscribers: map[string]engine.Policy{"g": engine.DropAfterSpin(-1)}}}, Groups: []engine.GroupConfig{group("g", "f")}}, "f", "g", "subscribers.g.spin"},
		{"duplicate feed", engine.Config{Feeds: []engine.FeedConfig{feed("f", engine.Pause()), feed("f", engine.Pause())}}, "f", "", "name"},
		{"duplicate group", engine.Config{Feeds: []engine.FeedConfig{feed("f", engine.Pause())}, Groups: []engine.GroupConfig{group("g", "f"), {Name: "g", Feeds: []string{"f"}, Processors: procs("other", p)}}}, "", "g", "name"},
		{"unknown feed", engine.Config{Groups: []engine.GroupConfig{group("g", "nope")}}, "nope", "g", "feeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engine.New(tc.cfg)
			var ce *engine.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, engine.ErrConfig) {
				t.Fatalf("err %v, want a *ConfigError", err)
			}
			if ce.Feed != tc.feed || ce.Group != tc.group || ce.Key != tc.key {
				t.Fatalf("got feed %q group %q key %q, want %q %q %q", ce.Feed, ce.Group, ce.Key, tc.feed, tc.group, tc.key)
			}
		})
	}
}
