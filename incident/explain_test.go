package incident_test

import (
	"errors"
	"testing"

	"github.com/blackbox-audit/blackbox/incident"
)

func TestExplainRefusesNoRecording(t *testing.T) {
	if _, err := incident.Explain(nil, incident.Options{}); !errors.Is(err, incident.ErrNoRecording) {
		t.Fatalf("err = %v, want ErrNoRecording", err)
	}
}

// TestTheLastProcessedInputIsTheHighestSeqWithAllItsRows: the crashed run's
// last input with every OUTPUT row written is the answer, not the input
// whose OUTPUT rows the crash cut.
func TestTheLastProcessedInputIsTheHighestSeqWithAllItsRows(t *testing.T) {
	r1 := newRec("p").input("p", 1, 4, "a,1", "o1").input("p", 2, 8, "a,2", "o2")
	// seq 3 declares two outputs and has one: its rows were cut.
	r1.input("p", 3, 12, "a,3", "o3", "o4")
	r1.rows = r1.rows[:len(r1.rows)-1]
	f := explain(t, incident.Options{}, r1.open(t, "run1"))
	if !f.Runs[0].Crashed || f.Runs[0].Ended {
		t.Fatalf("run 1 crashed=%v ended=%v, want crashed", f.Runs[0].Crashed, f.Runs[0].Ended)
	}
	c := f.Answers[0].Crashes[0]
	if c.LastProcessed == nil || c.LastProcessed.Seq != 2 || c.LastProcessed.Line != "a,2" || c.LastProcessed.Position.Offset != 8 {
		t.Fatalf("last processed = %+v, want seq 2 at offset 8", c.LastProcessed)
	}
	if got := c.LastProcessed.Rows; len(got) != 2 || got[0].Index != 5 || got[1].Index != 6 {
		t.Fatalf("proving rows = %+v, want DELIVERY 5 and INLINE 6", got)
	}
}

// TestARestartsRedeliveriesAreSkippedOrAppliedAgain: table of a crashed run
// and its restart: which inputs came again, the outcome, the duplicates,
// and whether anything was lost.
func TestARestartsRedeliveriesAreSkippedOrAppliedAgain(t *testing.T) {
	tests := []struct {
		name       string
		run1, run2 *rec
		outcomes   []string
		duplicates int
		same       []bool
		lost       bool
	}{
		{
			name:     "skipped: no output the second time",
			run1:     newRec("p").input("p", 1, 4, "a,1", "o1").input("p", 2, 8, "a,2", "o2"),
			run2:     newRec("p").input("p", 1, 8, "a,2").input("p", 2, 12, "a,3", "o3").end("p"),
			outcomes: []string{incident.OutcomeSkipped},
		},
		{
			name:       "applied again: outputs the second time, one different",
			run1:       newRec("p").input("p", 1, 4, "a,1", "o1").input("p", 2, 8, "a,2", "o2", "x"),
			run2:       newRec("p").input("p", 1, 8, "a,2", "o2", "y").end("p"),
			outcomes:   []string{incident.OutcomeAppliedAgain},
			duplicates: 2,
			same:       []bool{true, false},
		},
		{
			name:     "undetermined: no output either time",
			run1:     newRec("p").input("p", 1, 4, "a,1"),
			run2:     newRec("p").input("p", 1, 4, "a,1").end("p"),
			outcomes: []string{incident.OutcomeUndetermined},
		},
		{
			name:     "a drop in the restart is lost",
			run1:     newRec("p").input("p", 1, 4, "a,1", "o1"),
			run2:     newRec("p").dropped("p", 1, 2).input("p", 3, 12, "a,3", "o3").end("p"),
			outcomes: []string{},
			lost:     true,
		},
		{
			name:     "a seq the ended restart never recorded is in no run",
			run1:     newRec("p").input("p", 1, 4, "a,1", "o1"),
			run2:     newRec("p").input("p", 2, 8, "a,2", "o2").end("p"),
			outcomes: []string{},
			lost:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := explain(t, incident.Options{}, tt.run1.open(t, "run1"), tt.run2.open(t, "run2"))
			a := f.Answers[0]
			var got []string
			for _, r := range a.Redelivered {
				got = append(got, r.Outcome)
			}
			if len(got) != len(tt.outcomes) {
				t.Fatalf("outcomes = %v, want %v", got, tt.outcomes)
			}
			for i := range got {
				if got[i] != tt.outcomes[i] {
					t.Fatalf("outcomes = %v, want %v", got, tt.outcomes)
				}
			}
			if len(a.Duplicates) != tt.duplicates {
				t.Fatalf("duplicates = %+v, want %d", a.Duplicates, tt.duplicates)
			}
			for i, s := range tt.same {
				if a.Duplicates[i].Same != s {
					t.Errorf("duplicate %d same = %v, want %v", i, a.Duplicates[i].Same, s)
				}
			}
			if f.Lost != tt.lost {
				t.Fatalf("lost = %v, want %v (%+v %+v)", f.Lost, tt.lost, a.Lost, f.Losses)
			}
			if !f.Complete {
				t.Fatal("not complete")
			}
		})
	}
}
