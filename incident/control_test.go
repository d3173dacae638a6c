package incident_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/store"
)

// Explain lists each run's operator actions (its CONTROL rows) in the
// run's summary, with the row that proves each, and its text says who did
// what, when and why. An action is no loss of its own.
func TestExplainListsEachRunsOperatorActions(t *testing.T) {
	pause := store.Control{Feed: "in", Group: "g", Action: store.ControlPause, Who: "alice", Reason: "sink deploy",
		At: t0.Add(time.Second), Before: 1, After: 1, Until: t0.Add(time.Minute)}
	resume := store.Control{Feed: "in", Group: "g", Action: store.ControlResume, Who: "bob", Reason: "deployed",
		At: t0.Add(2 * time.Second), Before: 1, After: 1}
	run := newRec("p").input("p", 1, 10, `"a"`).add(pause.Entry(0)).add(resume.Entry(0)).input("p", 2, 20, `"b"`).end("p")
	f := explain(t, incident.Options{}, run.open(t, "run1.csv"))
	var got []incident.ControlAction
	for _, c := range f.Runs[0].Controls {
		c.Row = incident.Ref{}
		got = append(got, c)
	}
	want := []incident.ControlAction{
		{Feed: "in", Group: "g", Action: "pause", Who: "alice", Reason: "sink deploy", At: pause.At, Before: 1, After: 1, Until: pause.Until},
		{Feed: "in", Group: "g", Action: "resume", Who: "bob", Reason: "deployed", At: resume.At, Before: 1, After: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("controls (-want +got):\n%s", d)
	}
	for _, c := range f.Runs[0].Controls {
		if c.Row.Kind != store.KindControl {
			t.Errorf("action %s proved by %+v, want its CONTROL row", c.Action, c.Row)
		}
	}
	if len(f.Losses) != 0 {
		t.Errorf("losses %+v, want none", f.Losses)
	}
	var b strings.Builder
	if err := f.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"operator actions: 2", `alice: pause feed "in" group "g" (position 1 -> 1) until`, `bob: resume feed "in" group "g"`} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("text lacks %q:\n%s", line, b.String())
		}
	}
}
