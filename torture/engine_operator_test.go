package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
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
			if s.Kind == "kill" && i != len(steps)-1 {
				t.Errorf("draw %d: a kill at step %d of %d: %v", d, i+1, len(steps), steps)
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
		"seek spent", "seek past", "seek back", "seek within", "resume never", "resume other", "resume spent", "kill abandon", "kill finish"} {
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
