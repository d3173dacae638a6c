package replayer_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// keyed is a ledger input without transfers: each output (the account's
// running balance, or a rejection) depends only on its account's lines, so
// it is the same whichever worker has the account. Outputs still carry
// "at", a reading of the clock the workers share: diffs ignore it.
var keyed = []string{"alice,100", "bob,50", "carol,7", "oops", "alice,-5", "bob,2000", "dave,1", "alice,1",
	"erin,3", "bob,-1"}

var ignoreAt = replayer.DiffOptions{Ignore: []string{"at"}}

// workerInputs counts the inputs of each worker stream of processor p.
func workerInputs(t *testing.T, r store.Reader, p string, workers int) []int {
	t.Helper()
	n := make([]int, workers)
	for _, e := range rows(t, r) {
		if q, w, ok := core.ParseWorkerStream(e.Processor); ok && q == p && e.Kind.IsInput() {
			n[w]++
		}
	}
	return n
}

// spread fails unless more than one worker stream has inputs: a recording
// where one worker had everything would not test the merge.
func spread(t *testing.T, n []int) {
	t.Helper()
	busy := 0
	for _, k := range n {
		if k > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Fatalf("inputs per worker %v: want at least two busy workers", n)
	}
}

// TestDiffOfOneWorkerAndFourWorkersOfAKeyOrderedAppIsSame: the four worker
// streams of the ledger are compared as one processor "ledger", input by
// input, with the single stream of a one-worker run of the same input.
func TestDiffOfOneWorkerAndFourWorkersOfAKeyOrderedAppIsSame(t *testing.T) {
	one := run{}.memory(t, keyed...)
	four := run{workers: 4}.memory(t, keyed...)
	spread(t, workerInputs(t, four, "ledger", 4))

	rep := diff(t, []store.Reader{one}, []store.Reader{four}, ignoreAt)
	if rep.Verdict != replayer.DiffSame {
		t.Fatalf("verdict %q, want same:\n%s", rep.Verdict, diffText(t, rep))
	}
	if len(rep.Processors) != 1 {
		t.Fatalf("processors %d, want one (ledger):\n%s", len(rep.Processors), diffText(t, rep))
	}
	p := rep.Processors[0]
	if p.Processor != "ledger" || p.WorkersA != 0 || p.WorkersB != 4 || p.InputsA != 10 || p.InputsB != 10 || p.Common != 10 {
		t.Errorf("processor %q workers %d/%d inputs %d/%d common %d, want ledger 0/4 10/10 10", p.Processor,
			p.WorkersA, p.WorkersB, p.InputsA, p.InputsB, p.Common)
	}
	if want := `processor "ledger" (4 workers in B): 10 inputs in A, 10 inputs in B, 10 common`; !strings.Contains(diffText(t, rep), want) {
		t.Errorf("text lacks %q:\n%s", want, diffText(t, rep))
	}
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"processor":"ledger","workersB":4,`) {
		t.Errorf("JSON lacks the workers of B:\n%s", js.String())
	}

	// And the other way round, workers on both sides.
	rep = diff(t, []store.Reader{four}, []store.Reader{run{workers: 2}.memory(t, keyed...)}, ignoreAt)
	if rep.Verdict != replayer.DiffSame || !strings.Contains(diffText(t, rep), `processor "ledger" (4 workers in A, 2 workers in B)`) {
		t.Errorf("4 workers against 2: verdict %q, want same:\n%s", rep.Verdict, diffText(t, rep))
	}
}

// TestDiffNamesTheInputWhoseOutputChangedInOneWorkerStream: one output of
// one worker's stream edited; the diff of the merged processor names that
// input, and the worker's stream that had it.
func TestDiffNamesTheInputWhoseOutputChangedInOneWorkerStream(t *testing.T) {
	one := run{}.memory(t, keyed...)
	rs := rows(t, run{workers: 4}.memory(t, keyed...))
	edited := ""
	for i, e := range rs {
		if e.Kind == store.KindOutput && strings.Contains(string(e.Payload), `"balance":2050,`) { // bob,2000
			rs[i].Payload = bytes.Replace(e.Payload, []byte(`"balance":2050,`), []byte(`"balance":2051,`), 1)
			edited = e.Processor
		}
	}
	if _, _, ok := core.ParseWorkerStream(edited); !ok {
		t.Fatalf("bob's output is in stream %q, want a worker's", edited)
	}
	rep := diff(t, []store.Reader{one}, []store.Reader{reopen(t, rs)}, ignoreAt)
	if rep.Verdict != replayer.DiffDifferent || len(rep.Processors) != 1 {
		t.Fatalf("verdict %q with %d processors, want different, one processor:\n%s", rep.Verdict, len(rep.Processors), diffText(t, rep))
	}
	p := rep.Processors[0]
	if diff := cmp.Diff(replayer.DiffCounts{Different: 1}, p.Counts); diff != "" {
		t.Fatalf("counts (-want +got):\n%s\n%s", diff, diffText(t, rep))
	}
	d := p.Different[0]
	if d.Offset != 6 || d.Input != `"bob,2000"` || d.B == nil || d.B.Stream != edited || d.B.Offset != 6 {
		t.Errorf("different %+v (B %+v), want offset 6 \"bob,2000\", in B the stream %s", d.InputRef, d.B, edited)
	}
	if want := `    in B: feed "input" position 6 (run 1 ` + edited + ` seq 6 epoch 1): "bob,2000"`; !strings.Contains(diffText(t, rep), want) {
		t.Errorf("text lacks %q:\n%s", want, diffText(t, rep))
	}
}

// TestDiffStitchedFourWorkerRunsAgainstAOneWorkerRun: run 1, four workers
// with a state file each, applies lines 1-6 and is killed before its
// source committed them; run 2, four workers on the same state files,
// starts over: each worker skips the lines it applied (the same account
// goes to the same worker). Stitched, the eight worker streams are one
// processor the same as a clean one-worker run's, lines 1-6 processed
// twice, once per run.
func TestDiffStitchedFourWorkerRunsAgainstAOneWorkerRun(t *testing.T) {
	state := filepath.Join(t.TempDir(), "ledger.json")
	run1 := killed(t, run{workers: 4, state: state}.memory(t, keyed[:6]...))
	run2 := run{workers: 4, state: state}.memory(t, keyed...)
	spread(t, workerInputs(t, run2, "ledger", 4))
	clean := run{}.memory(t, keyed...)

	rep := diff(t, []store.Reader{run1, run2}, []store.Reader{clean}, ignoreAt)
	if rep.Verdict != replayer.DiffSame {
		t.Fatalf("verdict %q, want same:\n%s", rep.Verdict, diffText(t, rep))
	}
	p := rep.Processors[0]
	if diff := cmp.Diff(replayer.DiffCounts{Twice: 6}, p.Counts); diff != "" || p.WorkersA != 4 || p.InputsA != 16 || p.InputsB != 10 || p.Common != 10 {
		t.Errorf("counts (-want +got):\n%s\n%s", diff, diffText(t, rep))
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5, 6}, offsets(p.Twice)); diff != "" {
		t.Errorf("twice offsets (-want +got):\n%s", diff)
	}
	for _, r := range p.Twice {
		if _, _, ok := core.ParseWorkerStream(r.Stream); r.Side != "A" || r.Run != 2 || !ok {
			t.Errorf("twice %+v, want side A run 2 in a worker's stream", r)
		}
	}
	if rep.Expected != 4 || len(rep.Problems) != 4 {
		t.Errorf("problems %v (%d expected), want run 1's four unfinished worker streams, expected", rep.Problems, rep.Expected)
	}
}

// timers turns the first input of each worker stream of rs into that
// worker's timer number 1 (its DELIVERY row removed), outputs kept; the
// feed's later seqs are numbered down past the seqs that became timers, so
// that the recording still holds a row for every seq its COMMIT rows cover.
func timers(t *testing.T, rs []store.Entry, workers int) []store.Entry {
	t.Helper()
	var gone []int64
	feed := ""
	for w := range workers {
		s := core.WorkerStream("ledger", w)
		i := find(t, rs, s, store.KindDelivery, 1)
		feed = rs[i].Source
		rs = remove(rs, i, i+1)
		if !rs[i].Kind.IsInput() || rs[i].Processor != s {
			t.Fatalf("row %d is %+v, want %s's input", i, rs[i], s)
		}
		gone = append(gone, rs[i].Seq)
		rs[i].Kind, rs[i].Source, rs[i].Payload, rs[i].Seq = store.KindTimer, "", nil, 1
	}
	for i := range rs {
		e := &rs[i]
		if e.Source != feed || e.Kind == store.KindOutput {
			continue
		}
		below := int64(0)
		for _, g := range gone {
			if g < e.Seq {
				below++
			}
		}
		e.Seq -= below
	}
	return rs
}

// TestDiffNamesATimerByItsPlaceAmongTheSidesTimersAndItsWorker: the timers
// of a processor's workers align by what they emitted, whichever worker
// fired them; a timer whose output changed is named by its place among
// the side's timers (#2: worker 1's first timer is the side's second) and
// the worker's stream that fired it.
func TestDiffNamesATimerByItsPlaceAmongTheSidesTimersAndItsWorker(t *testing.T) {
	rs := rows(t, run{workers: 2}.memory(t, keyed...))
	spread(t, workerInputs(t, reopen(t, rs), "ledger", 2))
	rs = timers(t, rs, 2)
	a := reopen(t, rs)
	changed := false
	for _, e := range rs {
		if e.Processor == "ledger#w1" && e.Kind == store.KindTimer {
			j := find(t, rs, "ledger#w1", store.KindOutput, 1)
			if rs[j].Index != e.Index+1 {
				t.Fatalf("worker 1's first output %+v is not its timer's", rs[j])
			}
			rs[j].Payload = []byte(`{"changed":true}`)
			changed = true
		}
	}
	if !changed {
		t.Fatal("no timer in ledger#w1")
	}
	if rep := diff(t, []store.Reader{a}, []store.Reader{a}, ignoreAt); rep.Verdict != replayer.DiffSame || rep.Processors[0].Common != 10 {
		t.Fatalf("a recording with worker timers against itself: verdict %q, want same with 10 common:\n%s", rep.Verdict, diffText(t, rep))
	}
	rep := diff(t, []store.Reader{a}, []store.Reader{reopen(t, rs)}, ignoreAt)
	if rep.Verdict != replayer.DiffDifferent || rep.Processors[0].Counts.Different != 1 {
		t.Fatalf("verdict %q, want one input different:\n%s", rep.Verdict, diffText(t, rep))
	}
	d := rep.Processors[0].Different[0]
	if d.Key != "timer" || d.Feed != "" || d.Offset != 2 || d.Stream != "ledger#w1" {
		t.Errorf("different %+v, want timer #2 of ledger#w1", d.InputRef)
	}
	if want := "different: timer #2 of ledger#w1 (number 1 in run 1)"; !strings.Contains(diffText(t, rep), want) {
		t.Errorf("text lacks %q:\n%s", want, diffText(t, rep))
	}
}

// payments is README step 1's payments.txt: a transfer, a line the ledger
// rejects, and a tick (a timer).
var payments = []string{"alice,100", "bob,-2000", "transfer,alice,bob,40", "alice,1500", "oops", "tick", "carol,5"}

// TestDiffAlignsTheTimersOfOneWorkerWithThoseOfFour: README step 1's
// payments on one worker against four: the tick's timer (worker 0's timer
// 1 on four workers) aligns with the one worker's timer 1, as an input of
// both sides, never "only in A" and "only in B". What differs is what the
// ledger documents (apps.Key): the credit of a transfer to another
// worker's account, and a summary of one worker's accounts.
func TestDiffAlignsTheTimersOfOneWorkerWithThoseOfFour(t *testing.T) {
	one := run{}.memory(t, payments...)
	four := run{workers: 4}.memory(t, payments...)
	spread(t, workerInputs(t, four, "ledger", 4))
	rep := diff(t, []store.Reader{one}, []store.Reader{four}, ignoreAt)
	p := rep.Processors[0]
	if p.Counts.OnlyA != 0 || p.Counts.OnlyB != 0 || p.Common != 8 {
		t.Fatalf("only in A %d, only in B %d, common %d, want 0, 0, 8 (7 lines and the timer):\n%s", p.Counts.OnlyA, p.Counts.OnlyB,
			p.Common, diffText(t, rep))
	}
	var got []string
	for _, d := range p.Different {
		got = append(got, d.Input)
	}
	if want := []string{`"transfer,alice,bob,40"`, "timer 1"}; !slices.Equal(got, want) {
		t.Errorf("different %q, want %q:\n%s", got, want, diffText(t, rep))
	}
}
