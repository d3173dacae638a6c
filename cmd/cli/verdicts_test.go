package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// said is what one command said of recordings: its exit code and
// output.
type said struct {
	command string
	code    int
	out     string
}

// verdicts runs verify (of each recording), replay (of each), diff (the
// list against itself), explain and report over the comma-separated list
// of recordings.
func verdicts(t *testing.T, list string) []said {
	t.Helper()
	var vs []said
	run := func(args ...string) {
		code, out := execute(t, context.Background(), args...)
		vs = append(vs, said{strings.Join(args, " "), code, out})
	}
	for _, f := range strings.Split(list, ",") {
		run("verify", f)
		run("replay", f)
	}
	run("diff", list, list)
	run("explain", list)
	run("report", list, "-o", "report.html")
	return vs
}

// wantAll checks that every command exited code and printed a status that
// says so (want: a text each command's output must hold for that code).
func wantAll(t *testing.T, vs []said, code int, says map[string]string) {
	t.Helper()
	for _, v := range vs {
		if v.code != code {
			t.Errorf("%s: exit %d, want %d:\n%s", v.command, v.code, code, v.out)
			continue
		}
		name, _, _ := strings.Cut(v.command, " ")
		if s := says[name]; s != "" && !strings.Contains(v.out, s) {
			t.Errorf("%s: exit %d, but the output does not say %q:\n%s", v.command, v.code, s, v.out)
		}
	}
}

// ledgerRecording writes a CSV recording (blackbox-recording/3) of the
// ledger over feed "input": one line "alice,N" per seq N of seqs, at
// offset 10*N, each with the output the ledger gives it (balances summed
// over the seqs recorded, so that it replays identical); a seq in failed
// has a FAILED row instead; commit > 0 adds a COMMIT row through that seq;
// the stream ends with END.
func ledgerRecording(t *testing.T, path string, created time.Time, seqs []int64, failed map[int64]bool, commit int64) {
	t.Helper()
	ledgerRecordingWithout(t, path, created, seqs, failed, nil, commit)
}

// ledgerRecordingWithout is ledgerRecording whose rows of the seqs in
// removed are left out after the ledger applied them: the balances of the
// later outputs still count them (rows lost after the run wrote them).
func ledgerRecordingWithout(t *testing.T, path string, created time.Time, seqs []int64, failed, removed map[int64]bool, commit int64) {
	t.Helper()
	s, err := csvstore.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	meta := store.EncodeMeta(store.Meta{Created: created, Apps: map[string]string{"ledger": "ledger"},
		Options: map[string]string{"codec": "json"}, Streams: []string{"ledger"}})
	meta.Detail = strings.Replace(meta.Detail, store.Format, "blackbox-recording/3", 1)
	rows := []store.Entry{meta}
	idx := int64(0)
	add := func(e store.Entry) {
		idx++
		e.Processor, e.Index = "ledger", idx
		rows = append(rows, e)
	}
	add(store.Entry{Kind: store.KindStart, Instant: created})
	var balance, inputs int64
	for _, seq := range seqs {
		at := created.Add(time.Duration(seq) * time.Second)
		if failed[seq] {
			add(store.Entry{Kind: store.KindFailed, Source: "input", Seq: seq, Instant: at, Detail: "apps: ledger: fail line"})
			continue
		}
		balance += seq
		if removed[seq] {
			continue
		}
		inputs++
		add(store.Entry{Kind: store.KindDelivery, Source: "input", Seq: seq, Epoch: 7, Offset: 10 * seq})
		add(store.Entry{Kind: store.KindInline, Source: "input", Seq: seq, Instant: at, N: 1,
			Payload: fmt.Appendf(nil, `"alice,%d"`, seq), Reads: []time.Time{at}})
		add(store.Entry{Kind: store.KindOutput, Source: "ledger", Seq: 1, Payload: fmt.Appendf(nil,
			`{"account":"alice","amount":%d,"balance":%d,"at":"%s"}`, seq, balance, store.FormatInstant(at))})
	}
	if commit > 0 {
		rows = append(rows, store.Entry{Index: 2, Kind: store.KindCommit, Source: "input", Seq: commit, Epoch: 7, Offset: 10 * commit})
	}
	add(store.Entry{Kind: store.KindEnd, Instant: created.Add(time.Hour), N: inputs})
	if err := s.Append(rows...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

var created = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// TestACommitPastSeqsWithNoRowIsNotCompleteToEveryCommand: a recording whose
// COMMIT row covers a seq that has no row (the source said it was handled,
// the recording holds nothing of it) is not complete to verify, replay,
// diff, explain and report alike, each exiting 3 with a status that says
// so. verify, replay and diff called it complete (exit 0) while explain
// called it lost.
func TestACommitPastSeqsWithNoRowIsNotCompleteToEveryCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	ledgerRecording(t, "gap.csv", created, []int64{1, 3}, nil, 3)
	wantAll(t, verdicts(t, "gap.csv"), cli.ExitIncomplete, map[string]string{
		"verify": "not complete: 1 missing-input", "replay": "INCOMPLETE", "diff": "NOT COMPLETE",
		"explain": "in-no-run", "report": "NOT COMPLETE"})
	// The same recording with the seq's rows is complete to all of them.
	ledgerRecording(t, "whole.csv", created, []int64{1, 2, 3}, nil, 3)
	wantAll(t, verdicts(t, "whole.csv"), 0, map[string]string{
		"verify": "complete", "replay": "complete", "diff": "same", "explain": "nothing lost", "report": "complete"})
}

// TestADivergencePastAMissingInputIsIncompleteNotDiverged: rows of an
// input the ledger applied are gone (seq 2; the COMMIT row covers it), so
// the replayed balance of seq 3 differs from the recorded one. The
// processor's state past the missing input is not in the recording: replay
// says not complete (exit 3), as verify and explain do, not DIVERGED
// (exit 1).
func TestADivergencePastAMissingInputIsIncompleteNotDiverged(t *testing.T) {
	t.Chdir(t.TempDir())
	ledgerRecordingWithout(t, "removed.csv", created, []int64{1, 2, 3}, nil, map[int64]bool{2: true}, 3)
	wantAll(t, verdicts(t, "removed.csv"), cli.ExitIncomplete, map[string]string{
		"verify": "not complete: 1 missing-input", "replay": "INCOMPLETE", "diff": "NOT COMPLETE",
		"explain": "in-no-run", "report": "NOT COMPLETE"})
}

// TestARecordedFailureIsNotCompleteToEveryCommand: a FAILED row (an input
// the ledger failed) ends what its stream proves: the processor's state past
// it is not in the recording, so replay stops there, and verify, diff,
// explain and report say not complete too, each exiting 3. verify called it
// complete and diff the same (exit 0) while replay said INCOMPLETE.
func TestARecordedFailureIsNotCompleteToEveryCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	ledgerRecording(t, "failed.csv", created, []int64{1, 2, 3}, map[int64]bool{2: true}, 0)
	wantAll(t, verdicts(t, "failed.csv"), cli.ExitIncomplete, map[string]string{
		"verify": "not complete: 1 failed", "replay": "INCOMPLETE", "diff": "NOT COMPLETE",
		"explain": "not complete", "report": "NOT COMPLETE"})
}

// TestAnOversizedLineIsALostRowEveryVerdictReads: a line longer than
// --max-line is skipped and counted (the run exits 3, not lossless), and
// recorded as a LOST row (reason oversized, the file's identity, its byte
// range) right where it was: after the input of the line before it, before
// the input of the line after it. replay says LOSSY, explain and report
// say something was lost, each exiting 3; verify calls the recording
// complete (a loss is not damage) and diff lists the loss. They all said
// nothing was lost.
func TestAnOversizedLineIsALostRowEveryVerdictReads(t *testing.T) {
	t.Chdir(t.TempDir())
	long := strings.Repeat("a", 57) + ",1" // 59 bytes, at offsets [8, 68)
	writeLines(t, "in.txt", "alice,1", long, "bob,2")
	code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", "run.csv",
		"--max-line", "50")
	if code != cli.ExitIncomplete || !strings.Contains(out, "lost oversized 1") {
		t.Fatalf("run: exit %d, want %d and the loss in its verdict:\n%s", code, cli.ExitIncomplete, out)
	}
	var kinds []string
	var lost store.Entry
	r, err := csvstore.Open("run.csv")
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range r.Stream("ledger") {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, string(e.Kind))
		if e.Kind == "LOST" {
			lost = e
		}
	}
	r.Close()
	if got, want := strings.Join(kinds, " "), "START DELIVERY INLINE OUTPUT LOST DELIVERY INLINE OUTPUT END"; got != want {
		t.Fatalf("the ledger's stream is %s, want %s", got, want)
	}
	var detail struct {
		Reason string `json:"reason"`
		To     int64  `json:"to"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal([]byte(lost.Detail), &detail); err != nil {
		t.Fatalf("LOST detail %q: %v", lost.Detail, err)
	}
	if lost.Source != "input" || lost.Seq != 1 || lost.Offset != 8 || lost.N != 1 || lost.Epoch == 0 ||
		detail.Reason != "oversized" || detail.To != 68 || !strings.Contains(detail.Detail, "in.txt (identity ") {
		t.Errorf("LOST row %+v, detail %+v: want feed input after seq 1, offsets [8, 68) of in.txt's epoch, 1 item, oversized, the file's identity",
			lost, detail)
	}
	vs := verdicts(t, "run.csv")
	for _, v := range vs {
		name, _, _ := strings.Cut(v.command, " ")
		want := map[string]struct {
			code int
			says string
		}{"verify": {0, "complete"}, "replay": {cli.ExitIncomplete, "LOSSY"}, "diff": {0, "lost: side A run 1 ledger:5 LOST oversized"},
			"explain": {cli.ExitIncomplete, `oversized: 1 item of feed "input"`}, "report": {cli.ExitIncomplete, "something was lost"}}[name]
		if v.code != want.code || !strings.Contains(v.out, want.says) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s", v.command, v.code, want.code, want.says, v.out)
		}
	}
}

// TestARotatedFileThatCannotBeFoundIsALostRowEveryVerdictReads: a restart
// that cannot find the file its pointer describes (rotated to a name no
// pattern matches) reads the new file from 0 and counts the old one's end
// unread (exit 3); its recording holds a LOST row (reason unread, the old
// file's epoch and the offset it was read to) before its first input, so
// replay says LOSSY and explain and report say something was lost, over
// the restart alone and stitched after the first run. They said nothing
// was lost.
func TestARotatedFileThatCannotBeFoundIsALostRowEveryVerdictReads(t *testing.T) {
	t.Chdir(t.TempDir())
	writeLines(t, "in.txt", "alice,1", "bob,2")
	base := []string{"run", "--app", "ledger", "--input", "in.txt"}
	if code, out := execute(t, context.Background(), append(base, "--store", "run1.csv")...); code != 0 {
		t.Fatalf("first run: exit %d:\n%s", code, out)
	}
	writeLines(t, "in.txt", "carol,3", "dave,4")
	if err := os.Rename("in.txt", "in.txt.old"); err != nil {
		t.Fatal(err)
	}
	writeLines(t, "in.txt", "erin,5")
	if code, out := execute(t, context.Background(), append(base, "--store", "run2.csv")...); code != cli.ExitIncomplete {
		t.Fatalf("restart: exit %d, want %d:\n%s", code, cli.ExitIncomplete, out)
	}
	r, err := csvstore.Open("run2.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var kinds []string
	for e, err := range r.Stream("ledger") {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, string(e.Kind))
		if e.Kind == "LOST" && (e.Offset != 14 || e.Seq != 0 || !strings.Contains(e.Detail, `"reason":"unread"`)) {
			t.Errorf("LOST row %+v: want the old file's end unread from offset 14, before any input", e)
		}
	}
	if got, want := strings.Join(kinds, " "), "START LOST DELIVERY INLINE OUTPUT END"; got != want {
		t.Fatalf("the restart's stream is %s, want %s", got, want)
	}
	for _, args := range [][]string{{"replay", "run2.csv"}, {"explain", "run2.csv"}, {"explain", "run1.csv,run2.csv"},
		{"report", "run1.csv,run2.csv", "-o", "report.html"}} {
		if code, out := execute(t, context.Background(), args...); code != cli.ExitIncomplete {
			t.Errorf("%s: exit %d, want %d:\n%s", strings.Join(args, " "), code, cli.ExitIncomplete, out)
		}
	}
}

// TestRunsThatCannotBeStitchedAreRefused: explain, report and diff answer
// for consecutive runs of one source, each given once, in order; the same
// file twice, a copy of a run, and runs out of order (a later run's META
// created before the earlier's) are refused before any work: exit 2,
// naming both files and why. They were answered as if a crash had happened
// twice, or a restart before its crash.
func TestRunsThatCannotBeStitchedAreRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	ledgerRecording(t, "run1.csv", created, []int64{1, 2}, nil, 2)
	ledgerRecording(t, "run2.csv", created.Add(time.Hour), []int64{1, 2, 3}, nil, 3)
	ledgerRecording(t, "other.csv", created, []int64{1, 2, 3}, nil, 3) // the same META as run1, other rows
	b, err := os.ReadFile("run1.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("copy.csv", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := execute(t, context.Background(), "convert", "run1.csv", "copy.db"); code != 0 {
		t.Fatalf("convert: exit %d:\n%s", code, out)
	}
	for _, tc := range []struct {
		list string
		says string // "" when the list is accepted
	}{
		{"run1.csv,run2.csv", ""},
		{"run1.csv,other.csv", ""}, // the same META, other rows: two runs
		{"run1.csv,run1.csv", "name the same file"},
		{"run1.csv,./run1.csv", "name the same file"},
		{"run1.csv,copy.csv", "copy.csv holds the same rows as run1.csv"},
		{"run1.csv,copy.db", "copy.db holds the same rows as run1.csv"}, // a copy in another store
		{"run1.csv,run2.csv,other.csv", "other.csv was created at 2030-01-01T00:00:00Z, before run2.csv"},
		{"run2.csv,run1.csv", "run1.csv was created at 2030-01-01T00:00:00Z, before run2.csv"},
	} {
		for _, args := range [][]string{{"explain", tc.list}, {"report", tc.list, "-o", "r.html"}, {"diff", tc.list, "run2.csv"}} {
			code, out := execute(t, context.Background(), args...)
			if tc.says == "" {
				if code == cli.ExitFailure {
					t.Errorf("%s: exit %d, want the runs accepted:\n%s", strings.Join(args, " "), code, out)
				}
				continue
			}
			if code != cli.ExitFailure || !strings.Contains(out, tc.says) {
				t.Errorf("%s: exit %d, want %d saying %q:\n%s", strings.Join(args, " "), code, cli.ExitFailure, tc.says, out)
			}
		}
	}
}

// TestAKilledRunsRecordingIsCompleteAndLosesNothingToEveryCommand: a run
// an operator killed (engine.Engine.Kill) with seqs 3-5 published and
// journalled but not processed ends its stream with an END row that says
// why and lists them (store.End): verify, replay, diff, explain and report
// call it complete and nothing lost (the seqs were never committed: the
// next run delivers them), explain and inspect say it was killed and why.
func TestAKilledRunsRecordingIsCompleteAndLosesNothingToEveryCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	ledgerRecording(t, "killed.csv", created, []int64{1, 2}, nil, 2)
	s, err := store.Open("killed.csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := storetest.ReadAll(s)
	s.Close()
	var out []store.Entry
	for _, e := range rows {
		if e.Kind == store.KindEnd {
			// seqs 3-5 published (journalled) and never processed
			for seq := int64(3); seq <= 5; seq++ {
				out = append(out, store.Entry{Index: 2 + seq - 2, Kind: store.KindJournal, Source: "input", Seq: seq,
					Payload: fmt.Appendf(nil, `"alice,%d"`, seq)})
			}
			e.Detail = store.End{Killed: "operator: disk full", Unprocessed: []store.Unprocessed{{Feed: "input", First: 3, Last: 5}}}.Detail()
		}
		out = append(out, e)
	}
	if err := os.Remove("killed.csv"); err != nil {
		t.Fatal(err)
	}
	w, err := csvstore.Create("killed.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(out...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wantAll(t, verdicts(t, "killed.csv"), 0, map[string]string{
		"verify": "complete", "replay": "complete", "diff": "same",
		"explain": `kill of run 1 ("operator: disk full"), items left unprocessed`, "report": "complete"})
	code, text := execute(t, context.Background(), "explain", "killed.csv")
	if code != 0 || !strings.Contains(text, "nothing lost") || !strings.Contains(text, "2 in flight: 3") {
		t.Errorf("explain: exit %d, want 0, nothing lost, 3 in flight:\n%s", code, text)
	}
	code, text = execute(t, context.Background(), "inspect", "killed.csv")
	if code != 0 || !strings.Contains(text, `ended by a kill ("operator: disk full")`) {
		t.Errorf("inspect: exit %d:\n%s", code, text)
	}
	code, text = execute(t, context.Background(), "inspect", "--json", "killed.csv")
	var sum struct {
		Processors []struct{ Killed string } `json:"processors"`
	}
	if err := json.Unmarshal([]byte(text), &sum); code != 0 || err != nil || len(sum.Processors) != 1 || sum.Processors[0].Killed != "operator: disk full" {
		t.Errorf("inspect --json: exit %d, %v: %s", code, err, text)
	}
}
