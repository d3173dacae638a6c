package incident_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/store"
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
		notAgain   int64
		same       []bool
		lost       bool
		incomplete bool // the recordings have a problem no restart explains
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
			// Both runs delivered through an outbox: the restart's outputs
			// for a position the first run recorded whole were recorded
			// again, never delivered again.
			name:       "applied again through an exactly-once outbox: not delivered again",
			run1:       newRec("p").sink("exactly-once").input("p", 1, 4, "a,1", "o1").input("p", 2, 8, "a,2", "o2", "x"),
			run2:       newRec("p").sink("exactly-once").input("p", 1, 8, "a,2", "o2", "y").end("p"),
			outcomes:   []string{incident.OutcomeAppliedAgain},
			duplicates: 2,
			same:       []bool{true, false},
			notAgain:   2,
		},
		{
			// Only the restart had an outbox: the first run's live sink had
			// the outputs already, and the restart's outbox knows nothing of
			// them.
			name:       "applied again after a live sink: delivered twice",
			run1:       newRec("p").sink(core.SinkLive).input("p", 1, 4, "a,1", "o1").input("p", 2, 8, "a,2", "o2", "x"),
			run2:       newRec("p").sink("exactly-once").input("p", 1, 8, "a,2", "o2", "y").end("p"),
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
			// The restart's recording misses a row (a missing-input
			// problem): not complete, as verify says.
			name:       "a seq the ended restart never recorded is in no run",
			run1:       newRec("p").input("p", 1, 4, "a,1", "o1"),
			run2:       newRec("p").input("p", 2, 8, "a,2", "o2").end("p"),
			outcomes:   []string{},
			lost:       true,
			incomplete: true,
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
			var notDelivered int64
			for _, d := range a.Duplicates {
				if d.NotDelivered {
					notDelivered++
				}
			}
			if a.NotAgain != tt.notAgain || notDelivered != tt.notAgain {
				t.Errorf("not again = %d, %d duplicates not delivered; want %d", a.NotAgain, notDelivered, tt.notAgain)
			}
			for i, s := range tt.same {
				if a.Duplicates[i].Same != s {
					t.Errorf("duplicate %d same = %v, want %v", i, a.Duplicates[i].Same, s)
				}
			}
			if f.Lost != tt.lost {
				t.Fatalf("lost = %v, want %v (%+v %+v)", f.Lost, tt.lost, a.Lost, f.Losses)
			}
			if f.Complete == tt.incomplete {
				t.Fatalf("complete = %v, want %v", f.Complete, !tt.incomplete)
			}
		})
	}
}

// TestTheCommitLagIsWhereTheRestartResumedElseTheLastCommitRow: table of
// the commit lag at a crash.
func TestTheCommitLagIsWhereTheRestartResumedElseTheLastCommitRow(t *testing.T) {
	crashed := func() *rec {
		return newRec("p").input("p", 1, 10, "a", "o").input("p", 2, 20, "b", "o").commit(1, 10).input("p", 3, 30, "c", "o")
	}
	tests := []struct {
		name      string
		runs      []*rec
		want      *incident.Lag // Rows not compared
		committed *incident.Position
	}{
		{"the last COMMIT row, no restart", []*rec{crashed()},
			&incident.Lag{Items: 2, Bytes: 20, From: incident.LagFromCommitRow, CommitSeq: 1}, &incident.Position{Epoch: 1, Offset: 10}},
		{"where the restart resumed, past the last COMMIT row the crash kept", []*rec{crashed(),
			newRec("p").input("p", 1, 30, "c", "o").input("p", 2, 40, "d", "o").end("p")},
			&incident.Lag{Items: 1, Bytes: 10, From: incident.LagFromRestart, CommitSeq: 2}, &incident.Position{Epoch: 1, Offset: 20}},
		{"the restart resumed before the run's first input", []*rec{crashed(),
			newRec("p").input("p", 1, 10, "a").input("p", 2, 20, "b").input("p", 3, 30, "c").end("p")},
			&incident.Lag{Items: 3, Bytes: 30, From: incident.LagFromRestart}, &incident.Position{Epoch: 1}},
		{"no COMMIT row in a version 3 run: nothing committed", []*rec{newRec("p").input("p", 1, 10, "a", "o")},
			&incident.Lag{Items: 1, From: incident.LagFromCommitRow}, nil},
		{"a version 2 recording: not known", []*rec{newRec("p").format(store.FormatV2).input("p", 1, 10, "a", "o")}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recs []incident.Recording
			for i, r := range tt.runs {
				recs = append(recs, r.open(t, fmt.Sprintf("run%d", i+1)))
			}
			got := explain(t, incident.Options{}, recs...).Answers[0].Crashes[0].Lag
			if (got == nil) != (tt.want == nil) {
				t.Fatalf("lag = %+v, want %+v", got, tt.want)
			}
			if got == nil {
				return
			}
			if got.Items != tt.want.Items || got.Bytes != tt.want.Bytes || got.From != tt.want.From || got.CommitSeq != tt.want.CommitSeq {
				t.Errorf("lag = %+v, want %+v", got, tt.want)
			}
			if (got.Committed == nil) != (tt.committed == nil) || got.Committed != nil && *got.Committed != *tt.committed {
				t.Errorf("committed = %+v, want %+v", got.Committed, tt.committed)
			}
		})
	}
}

// TestInFlightIsTheJournalledItemsWithNoRowAndTheInputsCut: a journalled
// feed's items the crashed run journalled but did not record, and an input
// whose OUTPUT rows the crash cut, are in flight.
func TestInFlightIsTheJournalledItemsWithNoRowAndTheInputsCut(t *testing.T) {
	r := newRec("p").journal(1, `"a"`).journal(2, `"b"`).journal(3, `"c"`).indexed("p", 1, 10, "o").indexed("p", 2, 20, "o1", "o2")
	r.rows = r.rows[:len(r.rows)-1] // seq 2's second OUTPUT row cut
	c := explain(t, incident.Options{}, r.open(t, "run1")).Answers[0].Crashes[0]
	if !c.InFlightKnown {
		t.Fatal("in flight not known for a journalled feed")
	}
	var got []string
	for _, in := range c.InFlight {
		got = append(got, fmt.Sprintf("%d %s", in.Seq, in.Line))
	}
	if want := []string{`2 "b"`, `3 "c"`}; !slices.Equal(got, want) {
		t.Errorf("in flight = %q, want %q", got, want)
	}
	if c.LastProcessed == nil || c.LastProcessed.Seq != 1 || c.LastProcessed.Line != `"a"` {
		t.Errorf("last processed = %+v, want seq 1, its JOURNAL line", c.LastProcessed)
	}
}

// TestLossesAreFound: table of what is lost and what is not complete.
func TestLossesAreFound(t *testing.T) {
	tests := []struct {
		name     string
		runs     []*rec
		opts     incident.Options
		kind     string
		complete bool
	}{
		// A problem of the recordings (one a restart does not explain)
		// makes them not complete, as verify, replay and diff say; what is
		// on disk does not.
		{"a commit past an input with no row", []*rec{newRec("p").input("p", 1, 10, "a", "o").commit(2, 20).input("p", 3, 30, "c", "o").end("p")},
			incident.Options{}, incident.LossInNoRun, false},
		{"a pointer at no input's position", []*rec{newRec("p").input("p", 1, 10, "a", "o").end("p")},
			incident.Options{Pointer: &incident.Position{Epoch: 1, Offset: 25}}, incident.LossInNoRun, true},
		{"the last run unfinished", []*rec{newRec("p").input("p", 1, 10, "a", "o")},
			incident.Options{}, incident.LossUnfinish, false},
		{"an index gap", []*rec{func() *rec {
			r := newRec("p").input("p", 1, 10, "a", "o").input("p", 2, 20, "b", "o").end("p")
			r.rows = slices.Delete(r.rows, 3, 4) // seq 1's INLINE row
			return r
		}()}, incident.Options{}, string(store.ProblemGap), false},
		{"a recorded failure", []*rec{newRec("p").input("p", 1, 10, "a", "o").
			add(store.Entry{Processor: "p", Kind: store.KindFailed, Source: "in", Seq: 2, Detail: "boom"}).end("p")},
			incident.Options{}, incident.LossFailed, false},
		{"a LOST row", []*rec{newRec("p").input("p", 1, 10, "a", "o").
			add(store.Lost{Feed: "in", Seq: 1, Epoch: 1, From: 10, To: 90, Items: 1, Reason: "oversized"}.Entry("p", 0)).end("p")},
			incident.Options{}, incident.LossSource, true},
		{"an unknown kind", []*rec{newRec("p").input("p", 1, 10, "a", "o").add(store.Entry{Processor: "p", Kind: "PUDDING"}).end("p")},
			incident.Options{}, string(store.ProblemMalformed), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recs []incident.Recording
			for i, r := range tt.runs {
				recs = append(recs, r.open(t, fmt.Sprintf("run%d", i+1)))
			}
			f := explain(t, tt.opts, recs...)
			var kinds []string
			for _, l := range f.Losses {
				kinds = append(kinds, l.Kind)
			}
			for _, a := range f.Answers {
				for _, l := range a.Lost {
					kinds = append(kinds, l.Kind)
				}
			}
			if !f.Lost || !slices.Contains(kinds, tt.kind) {
				t.Errorf("lost %v, losses %q: want %s", f.Lost, kinds, tt.kind)
			}
			if f.Complete != tt.complete {
				t.Errorf("complete = %v, want %v", f.Complete, tt.complete)
			}
		})
	}
}

// TestWorkerStreamsAreOneProcessor: the streams p#w0 and p#w1 are answered
// as processor p, their inputs merged: the last processed input is the
// highest seq of either, and a seq neither recorded in a run that ended is
// in no run.
func TestWorkerStreamsAreOneProcessor(t *testing.T) {
	r1 := newRec("p#w0", "p#w1").input("p#w0", 1, 10, "a", "o").input("p#w1", 2, 20, "b", "o").input("p#w0", 3, 30, "c", "o")
	r2 := newRec("p#w0", "p#w1").input("p#w1", 1, 20, "b", "o").input("p#w0", 2, 30, "c").input("p#w0", 4, 50, "e", "o").end("p#w0", "p#w1")
	f := explain(t, incident.Options{}, r1.open(t, "run1"), r2.open(t, "run2"))
	if len(f.Answers) != 1 || f.Answers[0].Processor != "p" {
		t.Fatalf("answers %+v, want one for processor p", f.Answers)
	}
	a := f.Answers[0]
	if lp := a.Crashes[0].LastProcessed; lp == nil || lp.Seq != 3 || lp.Rows[0].Processor != "p#w0" {
		t.Errorf("last processed = %+v, want seq 3 of p#w0", lp)
	}
	var outcomes []string
	for _, r := range a.Redelivered {
		outcomes = append(outcomes, r.Outcome)
	}
	if want := []string{incident.OutcomeAppliedAgain, incident.OutcomeSkipped}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes = %q, want %q", outcomes, want)
	}
	if len(a.Lost) != 1 || a.Lost[0].Kind != incident.LossInNoRun || a.Lost[0].Run != 2 || a.Lost[0].Count != 1 {
		t.Errorf("lost = %+v, want seq 3 of run 2 in no run", a.Lost)
	}
}

// TestACrashedKafkaMembersCommitLagCoversEveryPartitionItProcessed: a
// member processed records of two partitions of a topic (epoch 3, its
// incarnation) and was killed with each partition's commit behind; its
// last input is of t/0. The commit lag counts, per partition, the records
// processed past that partition's commit, and their sum, whether it comes
// from the COMMIT rows (no restart) or from where a restart resumed each
// partition (under a later group generation: the same epoch, a
// partition's offsets go on); the restart's records at positions the
// crashed member processed are redelivered. A run reading the topic
// created again (another epoch, its offsets from 0 again) resumed nothing
// of the crashed member's: its records at the same offsets are others, not
// redelivered, and the lag is the COMMIT rows'.
func TestACrashedKafkaMembersCommitLagCoversEveryPartitionItProcessed(t *testing.T) {
	crashed := func() *rec {
		return newRec("p").
			kinput("p", 1, 3, "t/0", 1, "a", "o").kinput("p", 2, 3, "t/1", 1, "b", "o").kcommit(2, 3, "t/0", 1).kcommit(2, 3, "t/1", 1).
			kinput("p", 3, 3, "t/0", 2, "c", "o").kinput("p", 4, 3, "t/1", 2, "d", "o").kcommit(4, 3, "t/1", 2).
			kinput("p", 5, 3, "t/1", 3, "e", "o").kinput("p", 6, 3, "t/1", 4, "f", "o").kinput("p", 7, 3, "t/0", 3, "g", "o")
	}
	restartOf := func(epoch int64) *rec {
		return newRec("p").
			kinput("p", 1, epoch, "t/0", 2, "c", "o").kinput("p", 2, epoch, "t/1", 3, "e", "o").kinput("p", 3, epoch, "t/0", 3, "g", "o").
			kinput("p", 4, epoch, "t/1", 4, "f", "o").kinput("p", 5, epoch, "t/1", 5, "h", "o").end("p")
	}
	type keyLag struct {
		key         string
		items, offs int64
		committed   int64
	}
	tests := []struct {
		name        string
		runs        []*rec
		from        string
		keys        []keyLag
		redelivered int
	}{
		{"the COMMIT rows, no restart", []*rec{crashed()}, incident.LagFromCommitRow,
			[]keyLag{{"t/0", 2, 2, 1}, {"t/1", 2, 2, 2}}, 0},
		{"where the restart resumed each partition", []*rec{crashed(), restartOf(3)}, incident.LagFromRestart,
			[]keyLag{{"t/0", 2, 2, 1}, {"t/1", 2, 2, 2}}, 4},
		{"a run on the topic created again", []*rec{crashed(), restartOf(8)}, incident.LagFromCommitRow,
			[]keyLag{{"t/0", 2, 2, 1}, {"t/1", 2, 2, 2}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recs []incident.Recording
			for i, r := range tt.runs {
				recs = append(recs, r.open(t, fmt.Sprintf("run%d", i+1)))
			}
			a := explain(t, incident.Options{}, recs...).Answers[0]
			got := a.Crashes[0].Lag
			if got == nil {
				t.Fatal("no commit lag")
			}
			var items, offs int64
			for _, k := range tt.keys {
				items, offs = items+k.items, offs+k.offs
			}
			if got.Items != items || got.Bytes != offs || got.From != tt.from {
				t.Errorf("lag %d items, %d offsets, from %s; want %d, %d, from %s (every partition)", got.Items, got.Bytes, got.From, items, offs, tt.from)
			}
			if len(got.Keys) != len(tt.keys) {
				t.Fatalf("lag of %d keys %+v, want %d", len(got.Keys), got.Keys, len(tt.keys))
			}
			for i, k := range tt.keys {
				g := got.Keys[i]
				if g.Key != k.key || g.Items != k.items || g.Bytes != k.offs || g.From != tt.from || g.Committed == nil ||
					*g.Committed != (incident.Position{Epoch: 3, Key: k.key, Offset: k.committed}) {
					t.Errorf("lag of key %d = %+v (committed %+v), want %+v", i, g, g.Committed, k)
				}
			}
			if len(a.Redelivered) != tt.redelivered {
				t.Errorf("%d redelivered, want %d: %+v", len(a.Redelivered), tt.redelivered, a.Redelivered)
			}
		})
	}
}

// TestACleanStopsUndrainedItemsAreInFlightNotLost: a run that stopped
// cleanly with its drain cut short lists in its END rows the items it
// left unprocessed (and uncommitted); explain answers them as in flight
// at that stop, not as inputs in no run, and the restart that processes
// them loses nothing. (Explain said "lost: in-no-run" for them.)
func TestACleanStopsUndrainedItemsAreInFlightNotLost(t *testing.T) {
	r1 := newRec("p").journal(1, `"a"`).journal(2, `"b"`).journal(3, `"c"`).journal(4, `"d"`).
		indexed("p", 1, 10, "o").indexed("p", 2, 20, "o").commit(2, 20).end("p")
	r1.rows[len(r1.rows)-1].Detail = store.EndDetail([]store.Unprocessed{{Feed: "in", First: 3, Last: 4}})
	r2 := newRec("p").input("p", 1, 30, `"c"`, "o").input("p", 2, 40, `"d"`, "o").commit(2, 40).end("p")
	f := explain(t, incident.Options{}, r1.open(t, "run1"), r2.open(t, "run2"))
	if f.Lost || !f.Complete {
		t.Errorf("lost %v, complete %v, want false, true: losses %+v, answers %+v", f.Lost, f.Complete, f.Losses, f.Answers)
	}
	a := f.Answers[0]
	if len(a.Lost) != 0 {
		t.Errorf("lost %+v, want none", a.Lost)
	}
	if len(a.Crashes) != 1 || !a.Crashes[0].Stopped || a.Crashes[0].Run != 1 {
		t.Fatalf("crashes %+v, want run 1's clean stop", a.Crashes)
	}
	c := a.Crashes[0]
	var got []string
	for _, in := range c.InFlight {
		got = append(got, fmt.Sprintf("%d %s", in.Seq, in.Line))
	}
	if want := []string{`3 "c"`, `4 "d"`}; !slices.Equal(got, want) {
		t.Errorf("in flight = %q, want %q", got, want)
	}
	if c.MaybeInFlight != nil || c.LastProcessed == nil || c.LastProcessed.Seq != 2 {
		t.Errorf("maybe in flight %+v, last processed %+v: want none, seq 2", c.MaybeInFlight, c.LastProcessed)
	}
	var b strings.Builder
	if err := f.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "clean stop of run 1") || !strings.Contains(b.String(), "2 in flight: 2") {
		t.Errorf("text:\n%s", b.String())
	}
}

// TestAKilledRunsItemsAreInFlightNotLostAndItSaysWhy: a run an operator
// killed lists in its END rows the reason and the items it left
// unprocessed (queued or in flight at the kill, uncommitted); explain
// names the run killed and why, answers those items as in flight at the
// kill, not lost, and the restart that processes them loses nothing.
func TestAKilledRunsItemsAreInFlightNotLostAndItSaysWhy(t *testing.T) {
	r1 := newRec("p").journal(1, `"a"`).journal(2, `"b"`).journal(3, `"c"`).journal(4, `"d"`).
		indexed("p", 1, 10, "o").indexed("p", 2, 20, "o").commit(2, 20).end("p")
	r1.rows[len(r1.rows)-1].Detail = store.End{Killed: "disk full", Unprocessed: []store.Unprocessed{{Feed: "in", First: 3, Last: 4}}}.Detail()
	r2 := newRec("p").input("p", 1, 30, `"c"`, "o").input("p", 2, 40, `"d"`, "o").commit(2, 40).end("p")
	f := explain(t, incident.Options{}, r1.open(t, "run1"), r2.open(t, "run2"))
	if f.Lost || !f.Complete {
		t.Errorf("lost %v, complete %v, want false, true: losses %+v, answers %+v", f.Lost, f.Complete, f.Losses, f.Answers)
	}
	if f.Runs[0].Killed != "disk full" || !f.Runs[0].Ended || f.Runs[0].Crashed || f.Runs[1].Killed != "" {
		t.Errorf("runs %+v: want run 1 ended, killed for \"disk full\", run 2 not killed", f.Runs)
	}
	a := f.Answers[0]
	if len(a.Lost) != 0 {
		t.Errorf("lost %+v, want none", a.Lost)
	}
	if len(a.Crashes) != 1 || !a.Crashes[0].Stopped || a.Crashes[0].Killed != "disk full" {
		t.Fatalf("crashes %+v, want run 1's kill", a.Crashes)
	}
	var got []int64
	for _, in := range a.Crashes[0].InFlight {
		got = append(got, in.Seq)
	}
	if !slices.Equal(got, []int64{3, 4}) {
		t.Errorf("in flight %v, want 3 and 4", got)
	}
	var b strings.Builder
	if err := f.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`killed (END: "disk full")`, `kill of run 1 ("disk full"), items left unprocessed`, "2 in flight: 2", "nothing lost"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// TestItemsNotHandedAgainAreNeitherInFlightNorLost: a crashed run's
// COMPLETED row (items its group completed in an earlier run, not handed
// again) covers its journalled seqs: they are not in flight; explain lists
// the row under the processor, and nothing is lost.
func TestItemsNotHandedAgainAreNeitherInFlightNorLost(t *testing.T) {
	r := newRec("p").journal(1, `"a"`).journal(2, `"b"`).journal(3, `"c"`).journal(4, `"d"`).
		add(store.Completed{Feed: "in", Seq: 1, Items: 2, Epoch: 1, From: 10, Last: 20}.Entry("p", 0)).
		indexed("p", 3, 30, "o")
	a := explain(t, incident.Options{}, r.open(t, "run1")).Answers[0]
	var got []int64
	for _, in := range a.Crashes[0].InFlight {
		got = append(got, in.Seq)
	}
	if want := []int64{4}; !slices.Equal(got, want) {
		t.Errorf("in flight = %v, want %v (seqs 1 and 2 were completed in an earlier run)", got, want)
	}
	want := store.Completed{Feed: "in", Seq: 1, Items: 2, Epoch: 1, From: 10, Last: 20}
	if len(a.NotHandedAgain) != 1 || a.NotHandedAgain[0].Completed != want || a.NotHandedAgain[0].Run != 1 {
		t.Errorf("not handed again = %+v, want the one row of %+v in run 1", a.NotHandedAgain, want)
	}
	if len(a.Lost) != 0 || len(a.Redelivered) != 0 {
		t.Errorf("lost %+v, redelivered %+v: want none", a.Lost, a.Redelivered)
	}
}
