package incident_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/store"
)

// state adds a STATE row: group g's binding to feed "in" changed from to.
func (r *rec) state(from, to string, at time.Duration, reason string) *rec {
	return r.add(store.State{Feed: "in", Group: "g", From: from, To: to, Reason: reason, At: t0.Add(at), Observed: t0.Add(at)}.Entry(0))
}

// Explain lists each run's loss state changes (its STATE rows) in the
// run's summary, and a binding whose last change in the run is to LATCHED
// (never cleared) is a loss of that run: the refusal that latched it has
// no other row. A latch the operator cleared is no loss of its own.
func TestExplainListsEachRunsLossStateChangesAndALatchNeverClearedIsALoss(t *testing.T) {
	refused := "a BLOCK_WITH_DEADLINE queue promises no loss: queue g/in: a publish was refused (deadline)"
	cleared := "cleared by the operator (Engine.ClearOverload): accepted"
	run1 := newRec("p").input("p", 1, 10, `"a"`).state(store.StateUp, store.StateLatched, time.Second, refused).
		state(store.StateLatched, store.StateUp, 2*time.Second, cleared).input("p", 2, 20, `"b"`).end("p")
	run2 := newRec("p").input("p", 1, 30, `"c"`).state(store.StateUp, store.StateLatched, 3*time.Second, refused).end("p")
	for _, tc := range []struct {
		name       string
		runs       []*rec
		wantStates [][]string // per run: from->to
		wantLost   bool
	}{
		{"latched and cleared", []*rec{run1}, [][]string{{"UP->LATCHED", "LATCHED->UP"}}, false},
		{"latched, never cleared", []*rec{run1, run2}, [][]string{{"UP->LATCHED", "LATCHED->UP"}, {"UP->LATCHED"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []incident.Recording
			for i, r := range tc.runs {
				recs = append(recs, r.open(t, "run"+string(rune('1'+i))+".csv"))
			}
			f := explain(t, incident.Options{}, recs...)
			var got [][]string
			for _, r := range f.Runs {
				var s []string
				for _, c := range r.States {
					s = append(s, c.From+"->"+c.To)
				}
				got = append(got, s)
			}
			if d := cmp.Diff(tc.wantStates, got); d != "" {
				t.Errorf("states per run (-want +got):\n%s", d)
			}
			var latched []incident.Loss
			for _, l := range f.Losses {
				if l.Kind == incident.LossLatched {
					latched = append(latched, l)
				}
			}
			if f.Lost != tc.wantLost || len(latched) != map[bool]int{true: 1}[tc.wantLost] {
				t.Fatalf("lost %v, latched losses %+v; want lost %v", f.Lost, latched, tc.wantLost)
			}
			if !f.Complete {
				t.Errorf("not complete: %+v", f.Runs)
			}
			if tc.wantLost {
				want := incident.Loss{Kind: incident.LossLatched, Run: 2, Rows: []incident.Ref{{Run: 2, Index: 2, Kind: store.KindState}},
					Detail: `feed "in" group "g" latched at 2024-03-01T08:00:03Z and never cleared: ` + refused}
				if d := cmp.Diff(want, latched[0]); d != "" {
					t.Errorf("the latch's loss (-want +got):\n%s", d)
				}
			}
			var b strings.Builder
			if err := f.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				"  loss state changes: 2\n",
				`    feed "in" group "g": UP -> LATCHED at 2024-03-01T08:00:01Z: ` + refused + " (r1 STATE:2)\n",
				`    feed "in" group "g": LATCHED -> UP at 2024-03-01T08:00:02Z: ` + cleared + " (r1 STATE:3)\n",
			} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("text does not say %q:\n%s", want, b.String())
				}
			}
		})
	}
}
