package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// queueOf returns the feed's queue of group g, removed or live.
func queueOf(t *testing.T, st engine.FeedStatus, g string, removed bool) engine.SubscriberStatus {
	t.Helper()
	for _, s := range st.Subscribers {
		if s.Queue == g+"/"+st.Feed && s.Removed == removed {
			return s
		}
	}
	t.Fatalf("no queue %s/%s (removed %v) in %+v", g, st.Feed, removed, st.Subscribers)
	return engine.SubscriberStatus{}
}

// events records, in order, the items each group's processors received and
// the drops told to each group.
func events(log *journalLog) engine.Observer {
	return engine.Observer{
		Received: func(p string, in *engine.Input) { log.add("%s: %v", in.Group, in.Item) },
		Dropped: func(g string, d engine.Drop) {
			log.add("%s: dropped %d seqs %d-%d at %d: %s", g, d.Count, d.FirstSeq, d.LastSeq, d.Offset, d.Reason)
		},
	}
}

// A group unsubscribed with a backlog holds the commit before it for the
// rest of the run, subscribed again or not; the operator's release of
// that queue (by its generation) lets the commit move past it, the feed
// is no longer stalled, and what was released counts: the feed is not
// lossless.
func TestReleasingARemovedGroupsHoldLetsTheCommitMove(t *testing.T) {
	type outcome struct {
		CommittedBefore, CommittedAfter int64
		StalledBefore, StalledAfter     bool
		Unprocessed, First, Last        int64
		Released                        int64
		Lossless                        bool
	}
	for _, tc := range []struct {
		name        string
		resubscribe bool // the group subscribes again; else another group goes on
	}{
		{"unsubscribed and subscribed again", true},
		{"unsubscribed while another group goes on", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gate := newTurnstile(false)
				groups := []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("g", gate)}}
				if !tc.resubscribe {
					groups = append(groups, engine.GroupConfig{Name: "h", Feeds: []string{"in"}, Processors: procs("h", newTurnstile(true))})
				}
				var logs testutil.Logs
				e := start(t, engine.Config{Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 32}}, Groups: groups,
					Logger: logs.Logger()})
				t.Cleanup(gate.openUp)
				f := e.Feed("in")
				c := &committer{}
				f.Intake().SetCommitter(c)
				gate.let(5)
				publish(t, f, 1, 20)
				synctest.Wait() // g processed 1-5 and waits in 6
				if err := e.Unsubscribe("g", "in"); err != nil {
					t.Fatal(err)
				}
				if tc.resubscribe {
					if err := e.Subscribe("g", "in"); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				var got outcome
				got.CommittedBefore = committedAfterPoll(t, f, c)
				st := f.Status()
				got.StalledBefore = st.Stalled != nil
				rel, err := e.Release("in", "g", queueOf(t, st, "g", true).Generation, "the backlog is abandoned")
				if err != nil {
					t.Fatalf("Release: %v", err)
				}
				got.CommittedAfter = committedAfterPoll(t, f, c)
				st = f.Status()
				got.StalledAfter = st.Stalled != nil
				got.Unprocessed, got.First, got.Last = rel.Unprocessed, rel.FirstSeq, rel.LastSeq
				got.Released, got.Lossless = st.Released, st.Lossless
				want := outcome{CommittedBefore: 5, CommittedAfter: 20, StalledBefore: true, StalledAfter: false,
					Unprocessed: 15, First: 6, Last: 20, Released: 15, Lossless: false}
				if got != want {
					t.Errorf("got  %+v\nwant %+v (stalled: %v)", got, want, st.Stalled)
				}
				if warned := "the operator released 15 unprocessed and 0 processed items (seqs 6-20) of queue g/in"; !logs.Has(warned) {
					t.Errorf("warnings:\n%s\nwant one saying %q", logs.String(), warned)
				}
			})
		})
	}
}

// A release is a compare-and-swap on the queue's generation: a generation
// that names no queue of the group, or a queue released already (the
// second of two operators acting on one reading; the live queue a release
// replaced), is refused with ErrGeneration and releases nothing.
func TestAReleaseWithAnOldGenerationIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := newTurnstile(false)
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 32}},
			Groups: []engine.GroupConfig{
				{Name: "g", Feeds: []string{"in"}, Processors: procs("g", gate)},
				{Name: "h", Feeds: []string{"in"}, Processors: procs("h", newTurnstile(true))}}})
		t.Cleanup(gate.openUp)
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		gate.let(5)
		publish(t, f, 1, 10)
		synctest.Wait() // g processed 1-5 and waits in 6; h processed 1-10
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		st := f.Status()
		old, other := queueOf(t, st, "g", true).Generation, queueOf(t, st, "h", false).Generation
		if _, err := e.Release("in", "g", old, "first operator"); err != nil {
			t.Fatal(err)
		}
		// g subscribes again, is given 11-12 while it still waits in 6, is
		// fenced, and its fenced queue is released: a new queue replaces it.
		if err := e.Subscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		publish(t, f, 11, 12)
		synctest.Wait()
		if err := e.Fence("g"); err != nil {
			t.Fatal(err)
		}
		fenced := queueOf(t, f.Status(), "g", false).Generation
		rel, err := e.Release("in", "g", fenced, "quarantined")
		if err != nil {
			t.Fatal(err)
		}
		committed, released := committedAfterPoll(t, f, c), f.Status().Released
		if committed != 12 || released != 7 {
			t.Fatalf("committed %d, released %d after two releases: want 12 and 7", committed, released)
		}
		for _, tc := range []struct {
			name string
			gen  int64
		}{
			{"a generation no queue has", 0},
			{"another group's queue", other},
			{"a removed queue released already", old},
			{"a fenced queue a release replaced", fenced},
		} {
			got, err := e.Release("in", "g", tc.gen, "second operator")
			if !errors.Is(err, engine.ErrGeneration) || got != (engine.Released{}) {
				t.Errorf("%s: Release = %+v, %v; want nothing released, ErrGeneration", tc.name, got, err)
			}
		}
		if got := queueOf(t, f.Status(), "g", false).Generation; got != rel.Replacement || got == fenced {
			t.Errorf("the live queue's generation is %d, want the replacement's %d (not the fenced one's %d)", got, rel.Replacement, fenced)
		}
		if got, want := [2]int64{committedAfterPoll(t, f, c), f.Status().Released}, [2]int64{committed, released}; got != want {
			t.Errorf("committed and released %v after the refusals, want %v: unchanged", got, want)
		}
	})
}

// A release that would release nothing is refused, and changes nothing: a
// live queue of a healthy group (it will process what it holds), a removed
// queue that processed everything, a queue of a feed without source
// positions (nothing is held) (ErrNotHeld); an unknown feed or group, a
// group never subscribed to the feed (ErrUnknown); any release once Stop
// began (ErrStopped).
func TestAReleaseThatWouldReleaseNothingIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		open := newTurnstile(true)
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8},
				{Name: "push", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
			Groups: []engine.GroupConfig{
				{Name: "g", Feeds: []string{"in", "push"}, Processors: procs("g", open)},
				{Name: "h", Feeds: []string{"in"}, Processors: procs("h", newTurnstile(true))},
				{Name: "idle", Processors: procs("idle", newTurnstile(true))}}})
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publish(t, f, 1, 3)
		synctest.Wait()
		live := queueOf(t, f.Status(), "h", false).Generation
		done := queueOf(t, f.Status(), "g", false).Generation
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		if err := e.Fence("g"); err != nil {
			t.Fatal(err)
		}
		pushGen := queueOf(t, e.Feed("push").Status(), "g", false).Generation
		for _, tc := range []struct {
			name        string
			feed, group string
			gen         int64
			want        error
		}{
			{"a live queue of a healthy group", "in", "h", live, engine.ErrNotHeld},
			{"a removed queue that processed everything", "in", "g", done, engine.ErrNotHeld},
			{"a fenced queue of a feed without positions", "push", "g", pushGen, engine.ErrNotHeld},
			{"an unknown feed", "nope", "g", done, engine.ErrUnknown},
			{"an unknown group", "in", "nope", done, engine.ErrUnknown},
			{"a group never subscribed to the feed", "in", "idle", done, engine.ErrUnknown},
		} {
			got, err := e.Release(tc.feed, tc.group, tc.gen, "nothing to see")
			if !errors.Is(err, tc.want) || got != (engine.Released{}) {
				t.Errorf("%s: Release = %+v, %v; want nothing released, %v", tc.name, got, err, tc.want)
			}
		}
		if err := e.Unfence("g"); err != nil {
			t.Fatal(err)
		}
		st := e.Status()
		if got := committedAfterPoll(t, f, c); got != 3 || !st.Lossless || st.Feeds[0].Released != 0 {
			t.Errorf("committed %d, lossless %v, released %d after the refusals: want 3, true, 0", got, st.Lossless, st.Feeds[0].Released)
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Release("in", "g", done, "too late"); !errors.Is(err, engine.ErrStopped) {
			t.Errorf("Release after Stop = %v, want ErrStopped", err)
		}
	})
}

// An item being handled when its queue is released completes afterwards:
// its completion is refused (counted in staleTokens), so it counts once, as
// released, and the queue's dispatched count stays where the release
// found it; with several workers, an item completed beyond the one being
// handled was processed (its rows are written): released as processed.
func TestACompletionOfAReleasedItemIsRefused(t *testing.T) {
	type outcome struct {
		Unprocessed, Processed int64
		Dispatched, Stale      int64
		Committed              int64
	}
	for _, tc := range []struct {
		name    string
		workers int
		remove  func(e *engine.Engine) error
		want    outcome
	}{
		{"one worker, unsubscribed", 1, func(e *engine.Engine) error { return e.Unsubscribe("g", "in") },
			outcome{Unprocessed: 3, Dispatched: 2, Stale: 1, Committed: 5}},
		{"one worker, fenced", 1, func(e *engine.Engine) error { return e.Fence("g") },
			outcome{Unprocessed: 3, Dispatched: 2, Stale: 1, Committed: 5}},
		{"two workers, unsubscribed", 2, func(e *engine.Engine) error { return e.Unsubscribe("g", "in") },
			outcome{Unprocessed: 1, Processed: 2, Dispatched: 2, Stale: 1, Committed: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, f, c, h, gen := heldAtThree(t, tc.workers)
				if err := tc.remove(e); err != nil {
					t.Fatal(err)
				}
				rel, err := e.Release("in", "g", gen, "abandoned")
				if err != nil {
					t.Fatal(err)
				}
				committed := committedAfterPoll(t, f, c)
				h.release(3)
				synctest.Wait() // item 3 completes, after its release
				st := e.Status()
				var released engine.SubscriberStatus
				for _, s := range st.Feeds[0].Subscribers {
					if s.Generation == gen {
						released = s
					}
				}
				got := outcome{Unprocessed: rel.Unprocessed, Processed: rel.Processed, Dispatched: released.Dispatched,
					Stale: st.Groups[0].StaleTokens, Committed: max(committed, committedAfterPoll(t, f, c))}
				if got != tc.want {
					t.Errorf("got  %+v\nwant %+v", got, tc.want)
				}
				if !slices.Contains(h.seen(), any(3)) {
					t.Errorf("handled %v: want item 3 handled to its end", h.seen())
				}
			})
		})
	}
}

// The live queue of a fenced or dead group released is replaced by an
// empty one of a new generation: the commit moves past the released items
// at once, the group's streams are told of them as one drop (before the
// next item it takes), the group never handles them, and the feed still
// pauses until the fence lifts (Unfence) or the dead group is
// unsubscribed; it then goes on with item 11.
func TestAReleasedFencedOrDeadQueueIsReplacedByANewGeneration(t *testing.T) {
	errDisk := errors.New("disk full")
	for _, tc := range []struct {
		name    string
		fail    bool                         // the group fails at item 7 (an observer cannot write), else it is fenced in 6
		lift    func(e *engine.Engine) error // what lets the feed go on
		wantG   []string                     // g's events
		stalled string                       // why the feed is stalled between the release and the lift
	}{
		{"fenced", false, func(e *engine.Engine) error { return e.Unfence("g") },
			[]string{"g: 1", "g: 2", "g: 3", "g: 4", "g: 5", "g: 6",
				"g: dropped 4 seqs 7-10 at 10: " + engine.ReleasedReason + "quarantined", "g: 11"},
			"consumer g/in fenced or dead"},
		{"dead", true, func(e *engine.Engine) error { return e.Unsubscribe("g", "in") },
			[]string{"g: 1", "g: 2", "g: 3", "g: 4", "g: 5", "g: 6", "g: 7",
				"g: dropped 4 seqs 7-10 at 10: " + engine.ReleasedReason + "quarantined"},
			"consumer g/in failed: disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &journalLog{}
				gate := newTurnstile(false)
				obs := events(log)
				obs.BeforeComplete = func(g string, in *engine.Input) error {
					if tc.fail && g == "g" && in.Seq == 7 {
						return errDisk
					}
					return nil
				}
				e := startAllowing(t, engine.Config{
					Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 32}},
					Groups: []engine.GroupConfig{
						{Name: "g", Feeds: []string{"in"}, Processors: procs("g", gate)},
						{Name: "h", Feeds: []string{"in"}, Processors: procs("h", newTurnstile(true))}},
					Observer: obs}, engine.ErrObserver)
				t.Cleanup(gate.openUp)
				f := e.Feed("in")
				c := &committer{}
				f.Intake().SetCommitter(c)
				gate.let(5)
				publish(t, f, 1, 10)
				synctest.Wait() // g processed 1-5 and waits in 6
				if tc.fail {
					gate.let(2) // 6 completes; g fails at 7 and takes nothing more
				} else {
					if err := e.Fence("g"); err != nil {
						t.Fatal(err)
					}
					gate.let(1) // 6 completes; fenced, g takes nothing more
				}
				synctest.Wait()
				old := queueOf(t, f.Status(), "g", false).Generation
				if got := committedAfterPoll(t, f, c); got != 6 {
					t.Fatalf("committed %d before the release, want 6", got)
				}
				rel, err := e.Release("in", "g", old, "quarantined")
				if err != nil {
					t.Fatal(err)
				}
				if rel.Unprocessed != 4 || rel.FirstSeq != 7 || rel.LastSeq != 10 || rel.Replacement == 0 || rel.Replacement == old {
					t.Fatalf("released %+v: want 4 unprocessed, seqs 7-10, replaced by a new generation", rel)
				}
				synctest.Wait()
				st := f.Status()
				stalled := "<nil>"
				if st.Stalled != nil {
					stalled = *st.Stalled
				}
				if got := committedAfterPoll(t, f, c); got != 10 || stalled != tc.stalled || queueOf(t, st, "g", false).Generation != rel.Replacement {
					t.Fatalf("committed %d, stalled %q, live queue %+v: want 10, %q, the replacement (%d) live", got, stalled, queueOf(t, st, "g", false), tc.stalled, rel.Replacement)
				}
				if f.Intake().TryPublish(11, core.Position{Offset: 11}) {
					t.Fatal("item 11 taken while g is fenced or dead: want the feed paused")
				}
				if err := tc.lift(e); err != nil {
					t.Fatal(err)
				}
				gate.openUp()
				publish(t, f, 11, 11)
				synctest.Wait()
				var gotG []string
				for _, ev := range log.all() {
					if ev[:2] == "g:" {
						gotG = append(gotG, ev)
					}
				}
				if !slices.Equal(gotG, tc.wantG) {
					t.Errorf("g's events\n%q\nwant\n%q", gotG, tc.wantG)
				}
				if got := committedAfterPoll(t, f, c); got != 11 {
					t.Errorf("committed %d after the lift, want 11", got)
				}
			})
		})
	}
}

// A release tells the group's streams, with the released items, the drops
// its queue had marked and not yet reported (the group would have reported
// them before its next item of the queue, which it never takes): every seq
// the commit passes has a row.
func TestAReleaseReportsTheDropsItsQueueHadNotReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &journalLog{}
		gate := newTurnstile(false)
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 2,
				Subscribers: map[string]engine.Policy{"g": engine.DropAfterSpin(0)}}},
			Groups: []engine.GroupConfig{
				{Name: "g", Feeds: []string{"in"}, Processors: procs("g", gate)},
				{Name: "h", Feeds: []string{"in"}, Processors: procs("h", newTurnstile(true))}},
			Observer: events(log)})
		f := e.Feed("in")
		c := &committer{}
		f.Intake().SetCommitter(c)
		publishAll(t, f, 1, 1)
		synctest.Wait() // g waits in 1
		publishAll(t, f, 2, 6)
		synctest.Wait() // g's queue holds 2-3 (or more: its capacity is at least 2); the rest were dropped for it
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		gate.openUp() // 1 completes; g takes nothing more of the removed queue
		synctest.Wait()
		st := f.Status()
		if _, err := e.Release("in", "g", queueOf(t, st, "g", true).Generation, "gone"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := committedAfterPoll(t, f, c); got != 6 {
			t.Fatalf("committed %d, want 6", got)
		}
		// Every seq 2-6 is in exactly one drop told to g, in order.
		var seqs []int64
		for _, ev := range log.all() {
			var n, first, last, off int64
			if _, err := fmt.Sscanf(ev, "g: dropped %d seqs %d-%d at %d:", &n, &first, &last, &off); err == nil {
				if last-first+1 != n {
					t.Errorf("drop %q: count %d for seqs %d-%d", ev, n, first, last)
				}
				for s := first; s <= last; s++ {
					seqs = append(seqs, s)
				}
			}
		}
		if want := []int64{2, 3, 4, 5, 6}; !slices.Equal(seqs, want) {
			t.Errorf("seqs told dropped to g: %v, want %v\n%s", seqs, want, log.all())
		}
	})
}

// A queue held by a processing checkpoint holds the commit at what its
// holder made durable, after an unsubscribe too; its release releases the
// items processed and not made durable as processed (their rows stand: no
// drop is told to the group), and the commit moves past them.
func TestAReleaseOfAHeldQueueReleasesWhatItsCheckpointHadNotMadeDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &journalLog{}
		e := start(t, engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups: []engine.GroupConfig{
				{Name: "g", Feeds: []string{"in"}, Processors: procs("g", newTurnstile(true))},
				{Name: "h", Feeds: []string{"in"}, Processors: procs("h", newTurnstile(true))}},
			Observer: events(log)})
		f, c, cp := heldFeed(t, e)
		publish(t, f, 1, 3)
		synctest.Wait()
		m3 := cp.Mark()
		publish(t, f, 4, 5)
		synctest.Wait()
		if err := cp.DurableThrough(m3); err != nil {
			t.Fatal(err)
		}
		if err := e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		type outcome struct {
			Before, After          int64
			Unprocessed, Processed int64
			First, Last            int64
		}
		got := outcome{Before: committedAfterPoll(t, f, c)}
		rel, err := e.Release("in", "g", queueOf(t, f.Status(), "g", true).Generation, "state lost")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got.After = committedAfterPoll(t, f, c)
		got.Unprocessed, got.Processed, got.First, got.Last = rel.Unprocessed, rel.Processed, rel.FirstSeq, rel.LastSeq
		if want := (outcome{Before: 3, After: 5, Processed: 2, First: 4, Last: 5}); got != want {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
		for _, ev := range log.all() {
			if strings.Contains(ev, "dropped") {
				t.Errorf("told %q: want no drop (the items were processed)", ev)
			}
		}
		if st := f.Status(); st.Released != 2 || st.Lossless {
			t.Errorf("released %d, lossless %v: want 2 and not lossless", st.Released, st.Lossless)
		}
	})
}

// A release racing the group that works through the queue counts each
// item once: dispatched before the release, or released, and, when the
// group completed it after the release (it was being handled, or waiting
// in the group's batch), refused as stale; with two workers, an item
// completed beyond one not completed is released as processed. The commit
// passes every item.
func TestAReleaseRacingTheGroupCountsEachItemOnce(t *testing.T) {
	const n = 200
	raced := 0
	for round := range 20 {
		synctest.Test(t, func(t *testing.T) {
			var handled atomic.Int64
			work := core.ProcessorFunc(func(*core.Cycle, any) error {
				handled.Add(1)
				for range round % 5 * 20 {
					runtime.Gosched()
				}
				return nil
			})
			gc := engine.GroupConfig{Name: "g", Feeds: []string{"in"}, Processors: procs("g", work)}
			if round%2 == 1 { // two workers: completions beyond the prefix are released as processed
				gc.Workers = 2
				gc.Processors = []engine.ProcessorConfig{{Name: "g", New: func() (core.Processor, error) { return work, nil }}}
			}
			e := start(t, engine.Config{Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: n}},
				Groups: []engine.GroupConfig{gc}})
			f := e.Feed("in")
			c := &committer{}
			f.Intake().SetCommitter(c)
			publish(t, f, 1, n)
			for handled.Load() < int64(10+round*5) { // the group is under way
				runtime.Gosched()
			}
			if err := e.Unsubscribe("g", "in"); err != nil {
				t.Fatal(err)
			}
			rel, err := e.Release("in", "g", queueOf(t, f.Status(), "g", true).Generation, "raced")
			synctest.Wait()
			st := e.Status()
			q := queueOf(t, st.Feeds[0], "g", true)
			if errors.Is(err, engine.ErrNotHeld) && q.Dispatched == n {
				return // the group was done first
			} else if err != nil {
				t.Fatal(err)
			}
			raced++
			type count struct{ Dispatched, Released, Handled, Committed int64 }
			got := count{q.Dispatched, rel.Unprocessed + rel.Processed, handled.Load(), committedAfterPoll(t, f, c)}
			want := count{q.Dispatched, n - q.Dispatched, q.Dispatched + rel.Processed + st.Groups[0].StaleTokens, n}
			if got != want {
				t.Errorf("round %d: got %+v, want %+v", round, got, want)
			}
		})
	}
	t.Logf("%d of 20 rounds released part of the queue", raced)
}

// heldAtThree starts an engine of group g on tc workers whose item 3 is
// held back (holdBack), its committer c, and publishes 1 to 5 one at a
// time, each to an idle worker: item 3 is being handled, 1 and 2
// completed (and 4 and 5, by the other of two workers). It returns the
// engine, feed "in", c, the hold and g's queue generation.
func heldAtThree(t *testing.T, workers int) (*engine.Engine, *engine.Feed, *committer, *holdBack, int64) {
	t.Helper()
	h := newHoldBack(3)
	cfg := parallel(nil, workers, 0, h)
	if workers == 1 {
		p, _ := h.processor()()
		cfg.Groups[0].Processors = []engine.ProcessorConfig{{Name: "p", Processor: p}}
	}
	e := start(t, cfg)
	f := e.Feed("in")
	c := &committer{}
	f.Intake().SetCommitter(c)
	for i := 1; i <= 5; i++ {
		publishAll(t, f, i, i)
		synctest.Wait()
	}
	return e, f, c, h, queueOf(t, f.Status(), "g", false).Generation
}
