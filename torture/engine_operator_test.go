package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// TestOperatorStepListsDrawEveryAction: a step list is the seed's (the
// same draw gives the same list), and 300 draws hold every action, every
// refused attempt and every way of each: a check the oracle makes on an
// action never drawn would prove nothing.
func TestOperatorStepListsDrawEveryAction(t *testing.T) {
	got := map[string]int{}
	for d := range uint64(300) {
		groups := 1 + int(d%2)
		steps := genOpSteps(rand.New(rand.NewPCG(d, 1)), 100, groups)
		if again := genOpSteps(rand.New(rand.NewPCG(d, 1)), 100, groups); !slices.Equal(steps, again) {
			t.Fatalf("draw %d: two step lists\n%v\n%v", d, steps, again)
		}
		published := 0
		for i, s := range steps {
			got[s.Kind]++
			if (s.Kind == "kill" || s.Kind == "back") && i != len(steps)-1 {
				t.Errorf("draw %d: a %s at step %d of %d: %v", d, s.Kind, i+1, len(steps), steps)
			}
			if s.Kind == "publish" {
				published += s.N
			}
			for _, k := range []string{s.Via, s.Wrong} {
				if k != "" {
					got[s.Kind+" "+k]++
				}
			}
			if s.Stuck > 0 {
				got["let held back"]++
			}
		}
		if published > 100 {
			t.Errorf("draw %d: %d items published of 100", d, published)
		}
	}
	for _, want := range []string{"publish", "let", "let held back", "fence", "offer", "clear", "resume Resume", "resume Unfence",
		"release", "release never", "release other", "release spent", "seek latest", "seek last", "seek never", "seek other",
		"seek spent", "seek past", "seek back", "seek within", "resume never", "resume other", "resume spent", "kill abandon", "kill finish",
		"back", "back never", "back other", "back unfenced"} {
		if got[want] == 0 {
			t.Errorf("300 step lists drew no %q (drew %v)", want, got)
		}
	}
}

// TestOperatorScenariosMeetEveryOutcome runs operator scenarios and
// counts what the engine did in them: releases and seeks that took
// unprocessed and processed items, ones refused for a queue holding
// nothing, clears taken and refused, kills. Every scenario passes, and
// each outcome the oracle judges comes up.
func TestOperatorScenariosMeetEveryOutcome(t *testing.T) {
	outcomes := map[string]*regexp.Regexp{
		"released unprocessed":  regexp.MustCompile(`released \{.*Unprocessed:[1-9]`),
		"taken as processed":    regexp.MustCompile(`(released|sought) \{.*Processed:[1-9]`),
		"skipped unprocessed":   regexp.MustCompile(`sought \{.*Unprocessed:[1-9]`),
		"sought nothing held":   regexp.MustCompile(`sought \{.*Loss:false`),
		"release holds none":    regexp.MustCompile(`\(holds nothing\): engine: the queue holds nothing`),
		"release not fenced":    regexp.MustCompile(`\(not fenced\): engine: the queue holds nothing`),
		"seek not fenced":       regexp.MustCompile(`\(not fenced, dry run false\): engine: the group is not fenced`),
		"seek backwards":        regexp.MustCompile(`\(back;.*seek not supported`),
		"seek within the queue": regexp.MustCompile(`\(within;.*seek not supported`),
		"clear taken":           regexp.MustCompile(`step \d+: clear [ab]\n(step|$)`),
		"clear refused":         regexp.MustCompile(`not latched\): engine: not latched`),
		"kill":                  regexp.MustCompile(`step \d+: kill`),
		"sought back":           regexp.MustCompile(`sought back \{.*Redelivery:true`),
		"back not fenced":       regexp.MustCompile(`back to \d+ \(not fenced\): engine: the group is not fenced`),
		"back stale generation": regexp.MustCompile(`back, generation \d+ \((never|other)\): engine: generation does not match`),
	}
	got := map[string]int{}
	for d := range uint64(60) {
		var events, fails []string
		e := engineSpec{Property: "operator", Items: 20 + int(d*37%200), Workers: 2 + int(d%6), Draw: d}
		err := operatorRun(context.Background(), e, func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) },
			func(ev string) { events = append(events, ev) })
		if err != nil || len(fails) > 0 {
			t.Errorf("draw %d: %v %s\n%s", d, err, strings.Join(fails, "\n"), strings.Join(events, "\n"))
		}
		all := strings.Join(events, "\n")
		for k, re := range outcomes {
			got[k] += len(re.FindAllString(all, -1))
		}
	}
	t.Logf("outcomes %v", got)
	for k := range outcomes {
		if got[k] == 0 {
			t.Errorf("60 operator scenarios met no %q (met %v)", k, got)
		}
	}
}

// TestTheOperatorOracleHoldsTheDropsToWhatWasTaken: the oracle's reading
// of the Drops a run told, against a release that took seqs 3-5 of group
// a (one worker), 3 unprocessed: the right Drops pass; a Drop missing,
// told twice, outside the range, with another reason, or with a refused
// attempt's reason fails.
func TestTheOperatorOracleHoldsTheDropsToWhatWasTaken(t *testing.T) {
	const reason = engine.ReleasedReason + "torture step 4: release a"
	drop := func(first, last int64, why string) opDrop {
		return opDrop{stream: "a", d: engine.Drop{Feed: "f", Group: "a", Count: last - first + 1, FirstSeq: first, LastSeq: last,
			Offset: last, Reason: why}}
	}
	for _, tc := range []struct {
		name  string
		drops []opDrop
		want  string // a part of the failure; "" for none
	}{
		{"one Drop of the range", []opDrop{drop(3, 5, reason)}, ""},
		{"two runs of it", []opDrop{drop(3, 3, reason), drop(4, 5, reason)}, ""},
		{"none", nil, "count 0 items, want the 3 unprocessed"},
		{"part of it", []opDrop{drop(3, 4, reason)}, "count 2 items, want the 3 unprocessed"},
		{"told twice", []opDrop{drop(3, 5, reason), drop(3, 5, reason)}, "was told the Drop of seqs 3-5 2 times"},
		{"outside the range", []opDrop{drop(3, 6, reason)}, "lies outside what step 4 took"},
		{"another reason", []opDrop{drop(3, 5, engine.ReleasedReason+"someone else")}, "that no release or seek took"},
		{"a refused attempt's reason", []opDrop{drop(3, 5, reason), drop(6, 6, engine.ReleasedReason+"torture step 2: refused")},
			"a Drop for an action the engine refused"},
		{"a seq twice", []opDrop{drop(3, 4, reason), drop(4, 5, reason)}, "told seq 4 twice"},
		{"not consecutive", []opDrop{{stream: "a", d: engine.Drop{Feed: "f", Group: "a", Count: 2, FirstSeq: 3, LastSeq: 5, Offset: 5,
			Reason: reason}}}, "want a run of consecutive seqs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &opGroup{name: "a", workers: 1, changed: make(chan struct{}), entered: make([]atomic.Int32, 11),
				handled: make([]atomic.Int32, 11), completed: make([]atomic.Int32, 11),
				lost:      []opLoss{{step: 4, reason: reason, first: 3, last: 5, unprocessed: 3}},
				refusedRs: []string{"torture step 2: refused"}}
			eng, err := engine.New(engine.Config{Logger: quiet, Feeds: []engine.FeedConfig{{Name: "f", Policy: engine.Pause(), QueueSize: 8}, {Name: "push", Policy: engine.Pause(), QueueSize: 8}},
				Groups: []engine.GroupConfig{{Name: "a", Feeds: []string{"f", "push"},
					Processors: []engine.ProcessorConfig{{Name: "a", Processor: g, New: func() (core.Processor, error) { return g, nil }}}}}})
			if err != nil {
				t.Fatal(err)
			}
			var fails []string
			o := &opRun{n: 10, groups: []*opGroup{g}, eng: eng, f: eng.Feed("f"), push: eng.Feed("push"),
				obs: &opObserver{drops: tc.drops}, fail: func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }}
			o.checkLosses(true)
			got := strings.Join(fails, "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("the oracle said %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTheOperatorOracleHoldsABackwardsSeekToItsReDelivery: the oracle's
// reading of a backwards seek of group a (one worker) to seq 2, the feed
// at seq 5 (items 3-5 read again as seqs 6-8), group b of two workers: a
// handling each item of the range once more and b's streams told seqs 6-8
// as not handed again pass; an item not re-delivered, one re-delivered
// twice, b told too few or the wrong seqs, a told any, fail.
func TestTheOperatorOracleHoldsABackwardsSeekToItsReDelivery(t *testing.T) {
	run := func(first, last, at int64) engine.Completed {
		return engine.Completed{First: engine.Commit{Seq: first, Position: core.Position{Offset: at}},
			Last: engine.Commit{Seq: last, Position: core.Position{Offset: at + last - first}}}
	}
	good := map[string][]engine.Completed{"b": {run(6, 8, 3), run(6, 8, 3)}}
	for _, tc := range []struct {
		name  string
		again []int32 // a's handlings (and completions) of items 1-5
		runs  map[string][]engine.Completed
		want  string // a part of the failure; "" for none
	}{
		{"re-delivered once", []int32{1, 1, 2, 2, 2}, good, ""},
		{"an item not re-delivered", []int32{1, 1, 2, 1, 2}, good, "handled item 4 0 more times"},
		{"an item re-delivered twice", []int32{1, 1, 2, 3, 2}, good, "handled item 4 2 more times"},
		{"b told one stream only", []int32{1, 1, 2, 2, 2}, map[string][]engine.Completed{"b": {run(6, 8, 3)}}, "b's streams were told 3 items"},
		{"b told the old seqs", []int32{1, 1, 2, 2, 2}, map[string][]engine.Completed{"b": {run(3, 5, 3), run(3, 5, 3)}}, "want within the range read again"},
		{"a told items not handed", []int32{1, 1, 2, 2, 2}, map[string][]engine.Completed{"b": good["b"], "a": {run(6, 6, 3)}}, "a's streams were told 1 items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mk := func(name string, workers int) *opGroup {
				return &opGroup{name: name, workers: workers, handled: make([]atomic.Int32, 6), completed: make([]atomic.Int32, 6)}
			}
			a, b := mk("a", 1), mk("b", 2)
			back := &opBack{to: 2, through: 5, handled: []int32{0, 1, 1, 1, 1, 1}, completed: []int32{0, 1, 1, 1, 1, 1}}
			a.back = back
			for i, n := range tc.again {
				a.handled[i+1].Store(n)
				a.completed[i+1].Store(n)
				b.handled[i+1].Store(1)
				b.completed[i+1].Store(1)
			}
			var fails []string
			o := &opRun{n: 5, groups: []*opGroup{a, b}, obs: &opObserver{back: back, sought: a, completedRuns: tc.runs},
				fail: func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }}
			o.checkBack()
			got := strings.Join(fails, "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("the oracle said %q, want %q", got, tc.want)
			}
		})
	}
}
