package replayer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

var ten = []string{"alice,100", "bob,50", "transfer,alice,bob,30", "carol,7", "oops", "alice,-5",
	"bob,2000", "transfer,bob,carol,1", "dave,1", "alice,1"}

func diff(t *testing.T, a, b []store.Reader, opts replayer.DiffOptions) *replayer.DiffReport {
	t.Helper()
	rep, err := replayer.Diff(context.Background(), a, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func diffText(t *testing.T, rep *replayer.DiffReport) string {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// killed returns the rows of m without its END and COMMIT rows (the rows
// of no processor numbered again): the recording of a run killed after it
// processed everything and before its source committed any of it (kill -9
// leaves no END), whose inputs its restart delivers again.
func killed(t *testing.T, m store.Reader) *store.Memory {
	t.Helper()
	return without(t, m, store.KindEnd, store.KindCommit)
}

// without returns the rows of m but those of kinds (the rows of no
// processor numbered again).
func without(t *testing.T, m store.Reader, kinds ...store.Kind) *store.Memory {
	t.Helper()
	var rs []store.Entry
	var global int64
	for _, e := range rows(t, m) {
		switch {
		case slices.Contains(kinds, e.Kind):
			continue
		case e.Kind.IsGlobal():
			global++
			e.Index = global
		}
		rs = append(rs, e)
	}
	return reopen(t, rs)
}

// offsets lists the refs' offsets.
func offsets(refs []replayer.InputRef) []int64 {
	var out []int64
	for _, r := range refs {
		out = append(out, r.Offset)
	}
	return out
}

// TestDiffCrashedRunAgainstACleanRun: run 1 applies lines 1-6 (state saved
// through line 6) and is killed before its source committed them; run 2
// starts over from the committed offset (0) with the ledger's state file,
// so lines 1-6 are delivered again and skipped. Stitched, the two runs show
// no output difference from a clean run of the same input: lines 1-6 are
// "processed twice, once per run".
func TestDiffCrashedRunAgainstACleanRun(t *testing.T) {
	state := filepath.Join(t.TempDir(), "ledger.json")
	run1 := killed(t, run{state: state, journal: true}.memory(t, ten[:6]...))
	run2 := run{state: state, journal: true}.memory(t, ten...)
	clean := run{}.memory(t, ten...)

	if rep := replay(t, run1, replayer.Options{}); !rep.Identical || rep.Complete {
		t.Fatalf("run 1 replays identical but unfinished:\n%s", text(t, rep))
	}
	if rep := replay(t, run2, replayer.Options{}); !rep.Identical || !rep.Complete {
		t.Fatalf("run 2 replays identical, skips included:\n%s", text(t, rep))
	}

	rep := diff(t, []store.Reader{run1, run2}, []store.Reader{clean}, replayer.DiffOptions{Ignore: []string{"at"}})
	if !rep.Same {
		t.Fatalf("stitched crashed run differs from the clean run:\n%s", diffText(t, rep))
	}
	p := rep.Processors[0]
	want := replayer.DiffCounts{Twice: 6}
	if diff := cmp.Diff(want, p.Counts); diff != "" || p.InputsA != 16 || p.InputsB != 10 || p.Common != 10 {
		t.Errorf("counts (-want +got):\n%s\n%s", diff, diffText(t, rep))
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5, 6}, offsets(p.Twice)); diff != "" {
		t.Errorf("twice offsets (-want +got):\n%s", diff)
	}
	if r := p.Twice[2]; r.Side != "A" || r.Run != 2 || r.Seq != 3 || r.Input != `"transfer,alice,bob,30"` {
		t.Errorf("twice[2] = %+v, want side A run 2 seq 3 with its input", r)
	}
	if len(rep.Problems) != 1 || !errors.Is(&rep.Problems[0], store.ErrUnfinished) {
		t.Errorf("problems %v, want run 1's unfinished stream", rep.Problems)
	}
	if !strings.Contains(diffText(t, rep), `processed twice, once per run: side A feed "input" position 3 (run 2 seq 3 epoch 1): "transfer,alice,bob,30"`) {
		t.Errorf("text:\n%s", diffText(t, rep))
	}

	// Without Ignore, the clock readings in the outputs differ: each run
	// has its own clock.
	rep = diff(t, []store.Reader{run1, run2}, []store.Reader{clean}, replayer.DiffOptions{})
	if rep.Same || rep.Processors[0].Counts.Different != 4 {
		t.Errorf("without ignoring \"at\", lines 7-10 differ (run 2's clock starts over):\n%s", diffText(t, rep))
	}
}

// TestDiffDuplicateOutputs: a restart without the state file re-applies the
// re-delivered lines; their outputs equal run 1's (the state starts over
// too), so the sink received them twice.
func TestDiffDuplicateOutputs(t *testing.T) {
	run1 := killed(t, run{}.memory(t, ten[:4]...))
	run2 := run{}.memory(t, ten...)
	clean := run{}.memory(t, ten...)
	rep := diff(t, []store.Reader{run1, run2}, []store.Reader{clean}, replayer.DiffOptions{Ignore: []string{"at"}})
	p := rep.Processors[0]
	if !rep.Same || p.Counts.Twice != 4 || p.Counts.DuplicateOutputs != 4 {
		t.Fatalf("want same, 4 twice, 4 duplicate outputs:\n%s", diffText(t, rep))
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4}, offsets(p.DuplicateOutputs)); diff != "" {
		t.Errorf("duplicate offsets (-want +got):\n%s", diff)
	}
}

func TestDiffDifferences(t *testing.T) {
	a := run{procs: []string{"ledger", "alerts"}}.memory(t, ten...)
	edited := append([]string(nil), ten[:8]...)
	edited[3] = "carol,8"
	b := run{procs: []string{"ledger", "alerts"}}.memory(t, edited...)
	rep := diff(t, []store.Reader{a}, []store.Reader{b}, replayer.DiffOptions{})
	if rep.Same {
		t.Fatal("same")
	}
	p := rep.Processors[0]
	if p.Processor != "ledger" || p.Counts != (replayer.DiffCounts{OnlyA: 2, Different: 2, Changed: 1}) {
		t.Fatalf("ledger counts %+v:\n%s", p.Counts, diffText(t, rep))
	}
	if diff := cmp.Diff([]int64{9, 10}, offsets(p.OnlyA)); diff != "" {
		t.Errorf("only in A (-want +got):\n%s", diff)
	}
	d := p.Different[0]
	if d.Offset != 4 || d.Input != `"carol,7"` || len(d.Want) != 1 || len(d.Got) != 1 ||
		!strings.Contains(d.Diff, "-") || !strings.Contains(d.Diff, `"amount"`) {
		t.Errorf("different: %+v", d)
	}
	// Swapped sides: only in B.
	rep = diff(t, []store.Reader{b}, []store.Reader{a}, replayer.DiffOptions{})
	if p := rep.Processors[0]; p.Counts.OnlyB != 2 || p.Counts.OnlyA != 0 || p.OnlyB[0].Input != `"dave,1"` {
		t.Errorf("swapped: %+v", p.Counts)
	}
	// A limit keeps counts exact.
	rep = diff(t, []store.Reader{a}, []store.Reader{b}, replayer.DiffOptions{Limit: 1})
	if p := rep.Processors[0]; len(p.OnlyA) != 1 || p.Counts.OnlyA != 2 ||
		!strings.Contains(diffText(t, rep), "only in A: 1 more not listed") {
		t.Errorf("limit 1:\n%s", diffText(t, rep))
	}
	// The same recording on both sides is the same.
	if rep := diff(t, []store.Reader{a}, []store.Reader{csvFile(t, a)}, replayer.DiffOptions{}); !rep.Same {
		t.Errorf("a recording differs from its CSV copy:\n%s", diffText(t, rep))
	}
}

// TestDiffUnpositionedInputsStitch: inputs without a delivery are aligned
// by (feed, seq), a later run's seqs counted on from the run before.
func TestDiffUnpositionedInputsStitch(t *testing.T) {
	strip := func(m *store.Memory) *store.Memory {
		var rs []store.Entry
		next := map[string]int64{}
		for _, e := range rows(t, m) {
			if e.Kind == store.KindDelivery {
				continue
			}
			if e.Processor != "" {
				next[e.Processor]++
				e.Index = next[e.Processor]
			}
			rs = append(rs, e)
		}
		return reopen(t, rs)
	}
	al := []string{"alerts"}
	a1 := strip(run{procs: al}.memory(t, "a,5000", "b,1", "c,-3000"))
	a2 := strip(run{procs: al}.memory(t, "d,1", "e,9999"))
	b := strip(run{procs: al}.memory(t, "a,5000", "b,1", "c,-3000", "d,1", "e,9999"))
	rep := diff(t, []store.Reader{a1, a2}, []store.Reader{b}, replayer.DiffOptions{Ignore: []string{"at"}})
	if p := rep.Processors[0]; !rep.Same || p.Common != 5 {
		t.Fatalf("stitched push runs:\n%s", diffText(t, rep))
	}
	b2 := strip(run{procs: al}.memory(t, "a,5000", "b,1", "c,-3000", "d,1", "e,9998"))
	rep = diff(t, []store.Reader{a1, a2}, []store.Reader{b2}, replayer.DiffOptions{Ignore: []string{"at"}})
	if p := rep.Processors[0]; rep.Same || p.Counts.Different != 1 || p.Different[0].Seq != 2 || p.Different[0].Run != 2 {
		t.Fatalf("want input 5 (run 2 seq 2) different:\n%s", diffText(t, rep))
	}
}

// TestDiffEpochSegments: a side whose input was replaced part-way (a new
// epoch, offsets from the start again) is aligned per epoch segment.
func TestDiffEpochSegments(t *testing.T) {
	base := rows(t, run{}.memory(t, "a,1", "b,2", "c,3", "d,4", "e,5"))
	// replaced: inputs 4-5 come from a new file under epoch e2.
	replaced := func(e1, e2 int64) *store.Memory {
		rs := append([]store.Entry(nil), base...)
		for i := range rs {
			if rs[i].Kind == store.KindDelivery {
				rs[i].Epoch = e1
				if rs[i].Seq > 3 {
					rs[i].Epoch, rs[i].Offset = e2, rs[i].Offset-3
				}
			}
		}
		return reopen(t, rs)
	}
	rep := diff(t, []store.Reader{replaced(1, 2)}, []store.Reader{replaced(70, 90)}, replayer.DiffOptions{})
	p := rep.Processors[0]
	if !rep.Same || len(p.EpochChanges) != 2 || !strings.Contains(p.EpochChanges[0], "side A run 1: feed \"input\" epoch 1 -> 2") ||
		!strings.Contains(p.EpochChanges[1], "side B run 1: feed \"input\" epoch 70 -> 90") {
		t.Fatalf("per segment:\n%s", diffText(t, rep))
	}
	// Against a run without the replacement, the second segment matches nothing.
	rep = diff(t, []store.Reader{replaced(1, 2)}, []store.Reader{reopen(t, base)}, replayer.DiffOptions{})
	if p := rep.Processors[0]; rep.Same || p.Counts.OnlyA != 2 || p.Counts.OnlyB != 2 {
		t.Fatalf("want 2 only in each side:\n%s", diffText(t, rep))
	}
}

func TestDiffReportJSONAndText(t *testing.T) {
	a := run{}.memory(t, ten[:3]...)
	b := run{}.memory(t, ten[:2]...)
	rep := diff(t, []store.Reader{a}, []store.Reader{b}, replayer.DiffOptions{})
	bs, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back replayer.DiffReport
	if err := json.Unmarshal(bs, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*rep, back, cmpopts.IgnoreFields(store.Problem{}, "File")); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	for _, k := range []string{`"same":false`, `"onlyA":[{`, `"twice":[]`, `"epochChanges":[]`, `"verdict":"different"`, `"complete":true`, `"repeated":[]`} {
		if !strings.Contains(string(bs), k) {
			t.Errorf("JSON lacks %s: %s", k, bs)
		}
	}
	got := diffText(t, rep)
	if again := diffText(t, diff(t, []store.Reader{a}, []store.Reader{b}, replayer.DiffOptions{})); again != got {
		t.Errorf("text not stable:\n%s---\n%s", got, again)
	}
	want := "diff: DIFFERENT\n" +
		`  why: processor "ledger" differs: 1 only in A` + "\n" +
		`processor "ledger": 3 inputs in A, 2 inputs in B, 2 common: 1 only in A, 0 only in B, 0 different, 0 processed twice, 0 with duplicate outputs` + "\n" +
		`  only in A: feed "input" position 3 (run 1 seq 3 epoch 1): "transfer,alice,bob,30"` + "\n"
	if got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if _, err := replayer.Diff(context.Background(), nil, []store.Reader{b}, replayer.DiffOptions{}); !errors.Is(err, replayer.ErrUsage) {
		t.Errorf("no A side: %v", err)
	}
}

// repeat inserts times copies of rows[i:j] (one input's rows) after them
// and renumbers the processor's later rows and END's count, so the stream
// stays gapless: the input reads as delivered 1+times times in the run.
func repeat(rows []store.Entry, i, j, times int) []store.Entry {
	p := rows[i].Processor
	out := append([]store.Entry(nil), rows[:j]...)
	for range times {
		out = append(out, rows[i:j]...)
	}
	out = append(out, rows[j:]...)
	for k := i; k < len(out); k++ {
		if out[k].Processor == p {
			out[k].Index = 0
		}
	}
	var next int64
	for k := range out {
		if out[k].Processor != p {
			continue
		}
		next++
		out[k].Index = next
		if out[k].Kind == store.KindEnd {
			out[k].N += int64(times)
		}
	}
	return out
}

// TestDiffAnInputProcessedFourTimesInOneRunIsNotSame: side B holds one
// delivery recorded 4 times in its only run. Its outputs agree with A's
// each time, but a run processes an input once: it is a difference,
// listed as processed more often than its runs explain, never "same" (it
// was "1 processed twice", same, before).
func TestDiffAnInputProcessedFourTimesInOneRunIsNotSame(t *testing.T) {
	a := run{}.memory(t, ten...)
	rs := rows(t, a)
	b := reopen(t, repeat(rs, find(t, rs, "ledger", store.KindDelivery, 3), find(t, rs, "ledger", store.KindDelivery, 4), 3))
	rep := diff(t, []store.Reader{a}, []store.Reader{b}, replayer.DiffOptions{})
	want := replayer.DiffDifferent
	if len(rep.Problems) > 0 { // a store that sees the repeated rows as a problem
		want = replayer.DiffNotComplete
	}
	p := rep.Processors[0]
	if rep.Same || rep.Verdict != want || p.Counts != (replayer.DiffCounts{Repeated: 1}) || p.InputsB != 13 || len(rep.Why) == 0 {
		t.Fatalf("want %s with 1 repeated input:\n%s", want, diffText(t, rep))
	}
	if r := p.Repeated[0]; r.Side != "B" || r.Run != 1 || r.Seq != 3 || r.Offset != 3 || r.Input != `"transfer,alice,bob,30"` {
		t.Errorf("repeated ref %+v, want side B run 1 seq 3 at offset 3", r)
	}
	// Swapped, the verdict is the same from the other side.
	rep = diff(t, []store.Reader{b}, []store.Reader{a}, replayer.DiffOptions{})
	if rep.Same || rep.Processors[0].Counts.Repeated != 1 || rep.Processors[0].Repeated[0].Side != "A" {
		t.Errorf("swapped:\n%s", diffText(t, rep))
	}
}

// TestDiffAnInputProcessedAgainAfterACleanStopIsNotSame: a restart
// delivers again only what its killed run had not committed; run 1 here
// stopped cleanly (END), so run 2 processing lines 1-4 again is not
// explained by a kill: a difference (before, "processed twice", same).
func TestDiffAnInputProcessedAgainAfterACleanStopIsNotSame(t *testing.T) {
	run1 := run{}.memory(t, ten[:4]...) // stopped cleanly after 4 lines
	run2 := run{}.memory(t, ten...)     // and yet started over from line 1
	clean := run{}.memory(t, ten...)
	rep := diff(t, []store.Reader{run1, run2}, []store.Reader{clean}, replayer.DiffOptions{Ignore: []string{"at"}})
	p := rep.Processors[0]
	if rep.Same || rep.Verdict != replayer.DiffDifferent || p.Counts != (replayer.DiffCounts{Repeated: 4}) {
		t.Fatalf("want different, 4 repeated:\n%s", diffText(t, rep))
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4}, offsets(p.Repeated)); diff != "" || p.Repeated[0].Side != "A" || p.Repeated[0].Run != 2 {
		t.Errorf("repeated (-want +got):\n%s\n%+v", diff, p.Repeated)
	}
}

// TestDiffIsSameOnlyWhenBothSidesAreComplete: a side with an integrity
// problem that the stitching of its runs does not explain is "not
// complete", whatever its inputs; the only problem a stitched side may
// have is the missing END of each run but its last (a killed run and its
// restart). Before, every one of these sides was "same".
func TestDiffIsSameOnlyWhenBothSidesAreComplete(t *testing.T) {
	clean := run{}.memory(t, ten...)
	run1 := killed(t, run{}.memory(t, ten[:4]...)) // killed after 4 lines
	run2 := run{}.memory(t, ten...)                // its restart, from offset 0
	rs := rows(t, clean)
	gap := func(rs []store.Entry) *store.Memory { // an index missing after the second OUTPUT, no row lost
		rs = slices.Clone(rs)
		for i := find(t, rs, "ledger", store.KindOutput, 2) + 1; i < len(rs); i++ {
			if rs[i].Processor == "ledger" {
				rs[i].Index++
			}
		}
		return reopen(t, rs)
	}
	metaOnly := reopen(t, rs[:1])
	for _, tc := range []struct {
		name string
		a, b []store.Reader
		want replayer.DiffVerdict
		side string // the side the Why names, for not complete
	}{
		{"both complete", []store.Reader{clean}, []store.Reader{run{}.memory(t, ten...)}, replayer.DiffSame, ""},
		{"a killed run and its restart", []store.Reader{run1, run2}, []store.Reader{clean}, replayer.DiffSame, ""},
		{"a killed run torn before its restart", []store.Reader{torn{run1}, run2}, []store.Reader{clean}, replayer.DiffSame, ""},
		{"B's only run killed", []store.Reader{clean}, []store.Reader{killed(t, clean)}, replayer.DiffNotComplete, "B"},
		{"a stitched side whose last run was killed", []store.Reader{run1, killed(t, run2)}, []store.Reader{clean}, replayer.DiffNotComplete, "A"},
		{"B with a gap", []store.Reader{clean}, []store.Reader{gap(rs)}, replayer.DiffNotComplete, "B"},
		{"a gap in a killed run before its restart", []store.Reader{gap(rows(t, run1)), run2}, []store.Reader{clean}, replayer.DiffNotComplete, "A"},
		{"no processor stream on either side", []store.Reader{metaOnly}, []store.Reader{metaOnly}, replayer.DiffNotComplete, "A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := diff(t, tc.a, tc.b, replayer.DiffOptions{Ignore: []string{"at"}})
			if rep.Verdict != tc.want || rep.Same != (tc.want == replayer.DiffSame) || rep.Complete != (tc.want != replayer.DiffNotComplete) {
				t.Fatalf("verdict %q same %v complete %v, want %q:\n%s", rep.Verdict, rep.Same, rep.Complete, tc.want, diffText(t, rep))
			}
			if tc.want == replayer.DiffSame {
				if len(rep.Why) != 0 {
					t.Errorf("why %q for same", rep.Why)
				}
				return
			}
			if len(rep.Why) == 0 || !strings.HasPrefix(rep.Why[0], "side "+tc.side+" is not complete") {
				t.Errorf("why %q, want side %s not complete first", rep.Why, tc.side)
			}
		})
	}
}

// torn is a killed run whose recording also ends in half a line, as a CSV
// recording cut by SIGKILL inside a write does.
type torn struct{ store.Reader }

func (r torn) Problems() []store.Problem {
	return append(r.Reader.Problems(), store.Problem{Kind: store.ProblemTorn, Detail: "last line has no line terminator"})
}

// fileLines records lines as a file source would: the DELIVERY offsets of
// the memsource's ordinals become the byte offset after each line and its
// '\n', so a line of another length moves every later position.
func fileLines(t *testing.T, lines []string) *store.Memory {
	t.Helper()
	ends := make([]int64, len(lines))
	var off int64
	for i, l := range lines {
		off += int64(len(l)) + 1
		ends[i] = off
	}
	rs := rows(t, run{}.memory(t, lines...))
	for i := range rs {
		if rs[i].Kind == store.KindDelivery {
			rs[i].Offset = ends[rs[i].Offset-1]
		}
	}
	return reopen(t, rs)
}

// thousand is 1,000 ledger lines of one account each, all 13 bytes long
// with their '\n'.
func thousand() []string {
	lines := make([]string, 1000)
	for i := range lines {
		lines[i] = fmt.Sprintf("acct%04d,%03d", i+1, (i+1)%1000)
	}
	return lines
}

// TestDiffALineOfAnotherLengthIsOneChangedInput: two recordings of the
// same 1,000-line file but for line 500, replaced by a longer one, differ
// by exactly one changed input; every later input, at a position moved by
// the longer line, is aligned by content with its own line. Before, every
// later input was only in A and only in B (or, when the lines moved by a
// whole line's length, aligned with its neighbour and different).
func TestDiffALineOfAnotherLengthIsOneChangedInput(t *testing.T) {
	for _, longer := range []string{"acct0500,5000", "acct0500,5000000000000000"} { // 1 byte longer; a whole line (13 bytes) longer
		t.Run(fmt.Sprint(len(longer)-12, " bytes longer"), func(t *testing.T) {
			lines := thousand()
			a := fileLines(t, lines)
			lines[499] = longer
			b := fileLines(t, lines)
			rep := diff(t, []store.Reader{a}, []store.Reader{b}, replayer.DiffOptions{Ignore: []string{"at"}})
			p := rep.Processors[0]
			if rep.Verdict != replayer.DiffDifferent || p.Counts != (replayer.DiffCounts{Different: 1, Changed: 1}) || p.Common != 999 {
				t.Fatalf("want exactly one changed input, %d common: %+v\n%.3000s", p.Common, p.Counts, diffText(t, rep))
			}
			c := p.Different[0]
			if !c.Changed || c.Seq != 500 || c.Offset != 500*13 || c.Input != `"acct0500,500"` ||
				c.B == nil || c.B.Seq != 500 || c.B.Offset != c.Offset+int64(len(longer))-12 || c.B.Input != strconv.Quote(longer) {
				t.Errorf("changed input %+v (B %+v), want line 500 of each side", c.InputRef, c.B)
			}
		})
	}
}

// TestDiffAnInsertedAndARemovedLine: line 300 removed and a line inserted
// after line 700: one input only in A (removed), one only in B (inserted),
// every other input aligned with its own line and the same. Before, the
// inputs between the two edits were misaligned by one line.
func TestDiffAnInsertedAndARemovedLine(t *testing.T) {
	lines := thousand()
	a := fileLines(t, lines)
	edited := slices.Concat(lines[:299], lines[300:700], []string{"new00001,001"}, lines[700:])
	b := fileLines(t, edited)
	rep := diff(t, []store.Reader{a}, []store.Reader{b}, replayer.DiffOptions{Ignore: []string{"at"}})
	p := rep.Processors[0]
	if rep.Verdict != replayer.DiffDifferent || p.Counts != (replayer.DiffCounts{OnlyA: 1, OnlyB: 1}) || p.Common != 999 {
		t.Fatalf("want 1 only in A, 1 only in B, 999 common: %+v\n%.3000s", p.Counts, diffText(t, rep))
	}
	if r := p.OnlyA[0]; r.Seq != 300 || r.Input != `"acct0300,300"` {
		t.Errorf("only in A %+v, want line 300", r)
	}
	if r := p.OnlyB[0]; r.Seq != 700 || r.Input != `"new00001,001"` {
		t.Errorf("only in B %+v, want the inserted line (B's line 700)", r)
	}
}

// TestDiffLeavesAChunkUnalignedBeyondTheEditBound: two runs of 1,001
// lines with no line in common need 2,002 edits to align by content, more
// than the bound (2,000): the inputs are listed only in A and only in B,
// and a note says why.
func TestDiffLeavesAChunkUnalignedBeyondTheEditBound(t *testing.T) {
	la, lb := make([]string, 1001), make([]string, 1001)
	for i := range la {
		la[i], lb[i] = fmt.Sprintf("a%04d,1", i), fmt.Sprintf("b%04d,1", i)
	}
	rep := diff(t, []store.Reader{run{}.memory(t, la...)}, []store.Reader{run{}.memory(t, lb...)}, replayer.DiffOptions{Limit: 1})
	p := rep.Processors[0]
	if rep.Verdict != replayer.DiffDifferent || p.Counts != (replayer.DiffCounts{OnlyA: 1001, OnlyB: 1001}) || len(p.Notes) != 1 {
		t.Fatalf("want 1001 only in each side and a note: %+v\n%s", p.Counts, diffText(t, rep))
	}
	if !strings.Contains(diffText(t, rep), "  note: feed \"input\": 1001 inputs of A and 1001 of B") {
		t.Errorf("text:\n%s", diffText(t, rep))
	}
}

// TestDiffExplainsTheInputAKillCutShortInACSVRun: SIGKILL inside a CSV
// write leaves the first rows of the input being written (its DELIVERY)
// and half a line. That orphan DELIVERY at the end of a killed run is the
// crash's doing, like the torn line: the stitched runs are the same as a
// clean run. The same orphan anywhere else in the run is not explained.
func TestDiffExplainsTheInputAKillCutShortInACSVRun(t *testing.T) {
	clean := run{}.memory(t, ten...)
	restart := run{}.memory(t, ten...)
	cut := func(t *testing.T, rs []store.Entry) store.Reader {
		path := filepath.Join(t.TempDir(), "killed.csv")
		w, err := csvstore.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Copy(w, reopen(t, rs)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Cut the last INLINE line in half, as a kill inside its write does.
		at := bytes.LastIndex(b, []byte(",INLINE,"))
		if err := os.WriteFile(path, b[:at+4], 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := csvstore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	// Killed after 4 lines, inside the write of the 5th: its rows end with
	// the 5th line's DELIVERY and half its INLINE.
	rs := rows(t, run{}.memory(t, ten[:5]...))
	rs = rs[:find(t, rs, "ledger", store.KindEnd, 1)]
	if rep := diff(t, []store.Reader{cut(t, rs), restart}, []store.Reader{clean}, replayer.DiffOptions{Ignore: []string{"at"}}); rep.Verdict != replayer.DiffSame {
		t.Fatalf("a run killed inside a write, stitched with its restart: verdict %q, want same:\n%s", rep.Verdict, diffText(t, rep))
	}
	// The same orphan DELIVERY in the middle of the run is corruption.
	mid := slices.Delete(slices.Clone(rs), find(t, rs, "ledger", store.KindInline, 2), find(t, rs, "ledger", store.KindInline, 2)+1)
	if rep := diff(t, []store.Reader{cut(t, mid), restart}, []store.Reader{clean}, replayer.DiffOptions{Ignore: []string{"at"}}); rep.Verdict != replayer.DiffNotComplete {
		t.Fatalf("an orphan DELIVERY in the middle of a killed run: verdict %q, want not complete:\n%s", rep.Verdict, diffText(t, rep))
	}
}

// partitioned returns m's rows with every DELIVERY's position under key (a
// partition, as a Kafka source's "topic/partition") and its epoch
// epoch(seq): the offsets stay as they are, absolute within the key.
func partitioned(t *testing.T, m store.Reader, key string, epoch func(seq int64) int64) *store.Memory {
	t.Helper()
	rs := rows(t, m)
	for i := range rs {
		if rs[i].Kind == store.KindDelivery {
			rs[i].Key, rs[i].Epoch = key, epoch(rs[i].Seq)
		}
	}
	return reopen(t, rs)
}

// TestDiffAlignsAKafkaPartitionWithinItsTopicsIncarnation: a partition's
// inputs are identified by (feed, key, offset) within its epoch, the
// incarnation of its topic, which restarts and rebalances keep. A run
// killed and restarted (re-reading from offset 0) is the same as a clean
// run of another cluster (another epoch), with no epoch segment. A topic
// deleted and created again starts its offsets at 0 again under another
// epoch: the records of the second topic are the next epoch segment of the
// partition, not the first one's processed again, and align with the
// second topic's records on the other side.
func TestDiffAlignsAKafkaPartitionWithinItsTopicsIncarnation(t *testing.T) {
	const part = "events/0"
	epoch := func(e int64) func(int64) int64 { return func(int64) int64 { return e } }
	crashed := partitioned(t, killed(t, run{}.memory(t, ten[:6]...)), part, epoch(3))
	restarted := partitioned(t, run{}.memory(t, ten...), part, epoch(3))
	clean := partitioned(t, run{}.memory(t, ten...), part, epoch(9))
	for _, tc := range []struct {
		name         string
		a, b         []store.Reader
		inputsA      int64
		common       int64
		twice        int64
		epochChanges int
	}{
		{"crashed and restarted", []store.Reader{crashed, restarted}, []store.Reader{clean}, 16, 10, 6, 0},
		{"a topic created again", []store.Reader{partitioned(t, run{}.memory(t, ten...), part, epoch(3)), partitioned(t, run{}.memory(t, ten...), part, epoch(5))},
			[]store.Reader{partitioned(t, run{}.memory(t, ten...), part, epoch(7)), partitioned(t, run{}.memory(t, ten...), part, epoch(8))}, 20, 20, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := diff(t, tc.a, tc.b, replayer.DiffOptions{Ignore: []string{"at"}})
			if !rep.Same {
				t.Fatalf("not the same as the other side:\n%s", diffText(t, rep))
			}
			p := rep.Processors[0]
			if got, want := p.Counts, (replayer.DiffCounts{Twice: tc.twice, DuplicateOutputs: tc.twice}); got != want || p.InputsA != tc.inputsA || p.Common != tc.common {
				t.Errorf("counts %+v, %d inputs in A, %d common; want %+v, %d, %d:\n%s", got, p.InputsA, p.Common, want, tc.inputsA, tc.common, diffText(t, rep))
			}
			if len(p.EpochChanges) != tc.epochChanges {
				t.Errorf("epoch changes %v, want %d", p.EpochChanges, tc.epochChanges)
			}
		})
	}
}

// TestDiffNamesAKeyedInputWhoseOutputsChanged: the restarted run of a
// partition (its topic's epoch 3, another cluster's 9 on the clean side)
// emits something else for one record: the stitched side
// differs from the clean run at that record, named by feed, key and
// offset (and the epoch it had).
func TestDiffNamesAKeyedInputWhoseOutputsChanged(t *testing.T) {
	const part = "events/0"
	crashed := partitioned(t, killed(t, run{}.memory(t, ten[:6]...)), part, func(int64) int64 { return 3 })
	rs := rows(t, partitioned(t, run{}.memory(t, ten...), part, func(int64) int64 { return 3 }))
	i := find(t, rs, "ledger", store.KindInline, 8) // line 8: "transfer,bob,carol,1"
	for rs[i].Kind != store.KindOutput {
		i++
	}
	rs[i].Payload = []byte(`{"changed":true}`)
	restarted := reopen(t, rs)
	clean := partitioned(t, run{}.memory(t, ten...), part, func(int64) int64 { return 9 })

	rep := diff(t, []store.Reader{crashed, restarted}, []store.Reader{clean}, replayer.DiffOptions{Ignore: []string{"at"}})
	if rep.Verdict != replayer.DiffDifferent {
		t.Fatalf("verdict %s, want different:\n%s", rep.Verdict, diffText(t, rep))
	}
	p := rep.Processors[0]
	if p.Counts.Different != 1 || p.Counts.OnlyA+p.Counts.OnlyB != 0 || len(p.Different) != 1 {
		t.Fatalf("counts %+v, want exactly one input different:\n%s", p.Counts, diffText(t, rep))
	}
	d := p.Different[0]
	if d.Feed != "input" || d.Key != part || d.Offset != 8 || d.Epoch != 3 || d.Input != `"transfer,bob,carol,1"` {
		t.Errorf("different input %+v, want feed input key %s offset 8 epoch 3", d.InputRef, part)
	}
}

// TestDiffCountsEveryLostRowPastTheLimit: a side whose processor stream
// holds three LOST rows, diffed with Limit 1, lists one and counts three
// (the text says how many more it did not list). Counts.Lost was 0: the
// counts of the lists overwrote it once the inputs were classified.
func TestDiffCountsEveryLostRowPastTheLimit(t *testing.T) {
	rs := rows(t, run{}.memory(t, ten...))
	in := find(t, rs, "ledger", store.KindInline, 1)
	var lost []store.Entry
	for k := range int64(3) {
		lost = append(lost, store.Lost{Feed: rs[in].Source, Seq: 100 + k, Reason: "oversized", Items: 1, From: 1000 * k, To: 1000*k + 900}.Entry("ledger", 0))
	}
	edited := insert(rs, find(t, rs, "ledger", store.KindEnd, 1), lost...)
	rep := diff(t, []store.Reader{reopen(t, edited)}, []store.Reader{run{}.memory(t, ten...)}, replayer.DiffOptions{Ignore: []string{"at"}, Limit: 1})
	p := rep.Processors[0]
	if got, want := []int64{p.Counts.Lost, int64(len(p.Lost))}, []int64{3, 1}; !slices.Equal(got, want) {
		t.Errorf("counted and listed lost rows = %v, want %v:\n%s", got, want, diffText(t, rep))
	}
	if txt := diffText(t, rep); !strings.Contains(txt, "lost: 2 more not listed") {
		t.Errorf("the text does not say 2 lost rows were not listed:\n%s", txt)
	}
}
