package engine_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// A worker stuck on an item past its group's StallAfter: reported in the
// status and warned of once, never a change of delivery
// (docs/GUARANTEES.md, "Parallel workers").

// stuckWorker starts group "g" of two workers on the positioned feed "in",
// with StallAfter after, and publishes items 1 to 4 at offsets 1 to 4:
// item 2, keyed "held", is held in its worker until released; the others,
// keyed "free", go to the other worker.
func stuckWorker(t *testing.T, after time.Duration, logs *testutil.Logs) (*engine.Engine, *holdBack, *committer) {
	t.Helper()
	h := newHoldBack(2)
	e := start(t, engine.Config{Logger: logs.Logger(), DrainTimeout: time.Second,
		Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 2, StallAfter: after,
			Key: func(item any) string {
				if item == 2 {
					return "held"
				}
				return "free"
			},
			Processors: []engine.ProcessorConfig{{Name: "p", New: h.processor()}}}}})
	c := &committer{}
	f := e.Feed("in")
	f.Intake().SetCommitter(c)
	publishAll(t, f, 1, 4)
	testutil.WhenBlocked(t, "items 1, 3 and 4 handled", func() bool { return len(h.seen()) == 3 })
	return e, h, c
}

// stuckReason is the stalled reason of item 2 of stuckWorker.
func stuckReason(after time.Duration) string {
	return fmt.Sprintf(`worker %s has not completed feed "in" seq 2 (offset 2) within %s`,
		core.WorkerStream("g", engine.WorkerOf("held", 2)), after)
}

// A worker that has not completed an item within StallAfter makes its
// group and the item's feed report stalled, naming the worker and the item
// (feed, sequence, position), not before StallAfter and at most a quarter
// of it later; it is warned of once however long it lasts.
func TestAWorkerStuckPastStallAfterIsReportedOnceNamingItAndItsItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 10 * time.Second
		logs := &testutil.Logs{}
		e, h, _ := stuckWorker(t, after, logs)
		defer h.release(2)
		testutil.Advance(after - time.Millisecond)
		if st := e.Status(); st.Groups[0].Stalled != nil || st.Feeds[0].Stalled != nil {
			t.Fatalf("stalled before StallAfter: group %v, feed %v", deref(st.Groups[0].Stalled), deref(st.Feeds[0].Stalled))
		}
		testutil.Advance(after/4 + time.Millisecond)
		want := stuckReason(after)
		st := e.Status()
		for _, c := range []struct {
			what string
			got  *string
		}{{"group", st.Groups[0].Stalled}, {"feed", st.Feeds[0].Stalled}} {
			if c.got == nil || *c.got != want {
				t.Errorf("%s stalled %q, want %q", c.what, deref(c.got), want)
			}
		}
		testutil.Advance(time.Hour)
		if got := countOf(logs, `blackbox engine: group "g" stalled: `+want); got != 1 {
			t.Errorf("%d warnings of the stuck item, want 1; logged:\n%s", got, logs)
		}
	})
}

// The stalled reason clears when the item completes, and the commit moves
// past it as it would have.
func TestTheStalledReasonClearsWhenTheItemCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, h, c := stuckWorker(t, time.Second, &testutil.Logs{})
		testutil.Advance(2 * time.Second)
		if e.Status().Groups[0].Stalled == nil {
			t.Fatal("not stalled past StallAfter")
		}
		h.release(2)
		synctest.Wait()
		if _, err := e.Feed("in").Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		st := e.Status()
		if st.Groups[0].Stalled != nil || st.Feeds[0].Stalled != nil || c.Committed() != 4 {
			t.Fatalf("group stalled %q, feed stalled %q, committed %d: want neither stalled, 4 committed",
				deref(st.Groups[0].Stalled), deref(st.Feeds[0].Stalled), c.Committed())
		}
	})
}

// A stall is a report, never a change of delivery: with it reported or
// never reported, the same items are handled, the same prefix committed,
// the same gap held.
func TestAStallReportChangesNothingOfTheDelivery(t *testing.T) {
	type delivery struct {
		handled               string
		committed             int64
		gap, oldest, inFlight int64
		stalled               bool
	}
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  delivery
	}{
		{"reported", time.Second, delivery{"[1 3 4]", 1, 2, 2, 1, true}},
		{"never reported", -1, delivery{"[1 3 4]", 1, 2, 2, 1, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, h, c := stuckWorker(t, tc.after, &testutil.Logs{})
				defer h.release(2)
				testutil.Advance(time.Minute)
				if _, err := e.Feed("in").Intake().PollAcks(); err != nil {
					t.Fatal(err)
				}
				handled := h.seen()
				slices.SortFunc(handled, func(a, b any) int { return a.(int) - b.(int) })
				gs := e.Status().Groups[0]
				got := delivery{fmt.Sprint(handled), c.Committed(), gs.Gap, gs.OldestPending, gs.InFlight, gs.Stalled != nil}
				if got != tc.want {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
			})
		})
	}
}

// StallAfter 0 is DefaultStallAfter; a negative one never reports.
func TestStallAfterZeroIsTheDefaultAndANegativeOneNeverReports(t *testing.T) {
	for _, tc := range []struct {
		name       string
		after      time.Duration
		quiet      time.Duration // not stalled after this long
		reportedBy time.Duration // stalled by this long; 0: never
	}{
		{"zero", 0, engine.DefaultStallAfter - time.Millisecond, engine.DefaultStallAfter * 5 / 4},
		{"negative", -1, 24 * time.Hour, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := &testutil.Logs{}
				e, h, _ := stuckWorker(t, tc.after, logs)
				defer h.release(2)
				testutil.Advance(tc.quiet)
				if s := e.Status().Groups[0].Stalled; s != nil || logs.Has("stalled") {
					t.Fatalf("after %s: stalled %q, want not yet; logged:\n%s", tc.quiet, deref(s), logs)
				}
				if tc.reportedBy == 0 {
					return
				}
				testutil.Advance(tc.reportedBy - tc.quiet)
				if s, want := e.Status().Groups[0].Stalled, stuckReason(engine.DefaultStallAfter); s == nil || *s != want {
					t.Fatalf("after %s: stalled %q, want %q", tc.reportedBy, deref(s), want)
				}
			})
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
