package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// explainKill is what the test reads of a crashtest kill.
type explainKill struct {
	Run        int    `json:"run"`
	Store      string `json:"store"`
	Outputs    int64  `json:"outputs"`
	Pointer    int64  `json:"pointer"`
	Applied    int64  `json:"applied"`
	Offset     int64  `json:"offset"`
	Duplicates int64  `json:"duplicates"`
	// NoRecording: killed before it created its recording.
	NoRecording bool `json:"noRecording"`
}

// TestExplainAnswersWhatEachCrashtestKillDid kills the ledger 20 times at
// random moments (after a random number of output lines) and the alerts
// app 20 times inside a random store write (a torn line), with blackbox
// crashtest, then runs
// explain over the killed runs and the last one, and checks each answer
// against what crashtest measured after each kill (the pointer file, the
// state file, the --out file):
//
//   - every killed run crashed, the last ended, nothing was lost;
//   - commit lag: the committed position is the pointer's offset after the
//     kill, and the items past it are exactly the inputs the next run
//     delivered again;
//   - last processed input (the ledger): the state's offset after the kill
//     is its offset, and the restart skipped it, or the state is one input
//     behind (its completion did not run) and the restart applied it again;
//   - re-delivered: the restart skipped (AlreadyApplied) exactly the inputs
//     at or before the state's offset;
//   - emitted twice: the outputs the recordings show emitted again reached
//     the --out file once (its outbox delivers an output once recorded and
//     committed, exactly once): after each kill the file holds no line
//     twice and at most the outputs the runs so far recorded, less those
//     recorded again; after the last run it holds every recorded output
//     once: the OUTPUT rows of all the runs less the recorded duplicates.
func TestExplainAnswersWhatEachCrashtestKillDid(t *testing.T) {
	kills, lines := 20, "600"
	if testing.Short() {
		kills, lines = 5, "200"
	}
	for _, app := range []string{"ledger", "alerts"} {
		t.Run(app, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := []string{"crashtest", "--app", app, "--kills", strconv.Itoa(kills), "--lines", lines, "--format", "csv", "--dir", dir, "--json"}
			if app == "alerts" {
				// Killed after random output lines, a restarted alerts
				// (its window is in memory) may never emit the lines the
				// kill waits for: kill it inside a random write instead,
				// which tears the recording's last line.
				args = append(args, "--kill-at", killpoint.StoreWrite)
			}
			out, code, _ := blackbox(t, dir, nil, args...)
			var rep struct {
				Kills      []explainKill `json:"kills"`
				Last       string        `json:"last"`
				Holds      bool          `json:"holds"`
				Outputs    int64         `json:"outputs"`    // lines in the --out file
				Duplicates int64         `json:"duplicates"` // extra lines in the --out file
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Kills) != kills {
				t.Fatalf("crashtest exited %d, %d kills (%v):\n%s", code, len(rep.Kills), err, out)
			}
			if code != 0 || !rep.Holds || rep.Duplicates != 0 {
				t.Fatalf("crashtest exited %d, holds %v, %d extra --out lines:\n%s", code, rep.Holds, rep.Duplicates, out)
			}
			var stores []string
			for _, k := range rep.Kills {
				if k.NoRecording {
					// Neither kill moment falls before a run created its
					// recording (after output lines, crashtest waits for it;
					// a store write is never the first).
					t.Fatalf("run %d was killed before it created its recording:\n%s", k.Run, out)
				}
				stores = append(stores, k.Store)
			}
			stores = append(stores, rep.Last)
			var buf bytes.Buffer
			if code := newCLI(&buf).Execute(t.Context(), []string{"explain", strings.Join(stores, ","), "--json",
				"--pointer", filepath.Join(dir, "crash-input.ptr")}); code != 0 {
				t.Fatalf("explain exited %d, want 0:\n%s", code, buf.String())
			}
			var f incident.Findings
			if err := json.Unmarshal(buf.Bytes(), &f); err != nil {
				t.Fatal(err)
			}
			checkExplained(t, app, rep.Kills, rep.Outputs, &f)
			if t.Failed() {
				var text bytes.Buffer
				newCLI(&text).Execute(t.Context(), []string{"explain", strings.Join(stores, ",")})
				t.Logf("crashtest:\n%s\nexplain:\n%s", out, text.String())
			}
		})
	}
}

func checkExplained(t *testing.T, app string, kills []explainKill, outputs int64, f *incident.Findings) {
	t.Helper()
	if f.Lost || !f.Complete || len(f.Losses) != 0 {
		t.Errorf("lost %v, complete %v, losses %+v: want nothing lost", f.Lost, f.Complete, f.Losses)
	}
	if len(f.Runs) != len(kills)+1 || !f.Runs[len(kills)].Ended {
		t.Fatalf("%d runs, the last ended %v; want %d, ended", len(f.Runs), f.Runs[len(f.Runs)-1].Ended, len(kills)+1)
	}
	if len(f.Answers) != 1 || f.Answers[0].Processor != app || f.Answers[0].Feed != "input" {
		t.Fatalf("answers for %d feed/processor pairs, want one: %s <- input", len(f.Answers), app)
	}
	a := f.Answers[0]
	if len(a.Lost) != 0 {
		t.Errorf("lost: %+v", a.Lost)
	}
	if f.OnDisk == nil || f.OnDisk.PointerInput == nil || f.OnDisk.PointerInput.Run != len(kills)+1 {
		t.Errorf("on disk %+v: want the pointer at an input of the last run", f.OnDisk)
	}
	crashes := map[int]incident.Crash{}
	for _, c := range a.Crashes {
		crashes[c.Run] = c
	}
	type runPair struct{ from, to int }
	redelivered := map[runPair][]incident.Redelivery{}
	for _, r := range a.Redelivered {
		redelivered[runPair{r.Earlier.Run, r.Again.Run}] = append(redelivered[runPair{r.Earlier.Run, r.Again.Run}], r)
	}
	againIn := map[int]int64{} // run -> the outputs it recorded again
	for _, d := range a.Duplicates {
		if d.Earlier == nil {
			t.Errorf("duplicate %+v with no earlier output", d)
			continue
		}
		againIn[d.Again.Run]++
	}
	// recordedOnce is the outputs runs 1 to run recorded, each once: their
	// OUTPUT rows less those recorded again.
	recordedOnce := func(run int) int64 {
		n := int64(0)
		for r := 1; r <= run; r++ {
			n += f.Runs[r-1].Counts[string(store.KindOutput)] - againIn[r]
		}
		return n
	}
	// nextRun is the first run after run that wrote an input's rows: a run
	// killed before its first batch of rows was written delivered nothing
	// the recordings show, so what came again came in the one after it.
	nextRun := func(run int) int {
		for r := run + 1; r <= len(f.Runs); r++ {
			if f.Runs[r-1].Counts[string(store.KindDelivery)] > 0 {
				return r
			}
		}
		return run + 1
	}
	var before int64      // --out lines before the run
	var prevPointer int64 // the pointer's offset before the run
	for _, k := range kills {
		run := k.Run
		if !f.Runs[run-1].Crashed {
			t.Errorf("run %d: not crashed", run)
		}
		// 2 and 6: whatever the recordings show emitted again, the --out
		// file holds no output twice, and only outputs recorded by then
		// (the outbox delivers what was recorded and committed): after the
		// kill, at most the runs' recorded outputs, each once; and it
		// never shrinks.
		if k.Duplicates != 0 || k.Outputs < before || k.Outputs > recordedOnce(run) {
			t.Errorf("run %d: %d --out lines after the kill (%d before it), %d of them emitted again; want none again, at least %d and at most the %d outputs runs 1 to %d recorded (each once)",
				run, k.Outputs, before, k.Duplicates, before, recordedOnce(run), run)
		}
		c, ok := crashes[run]
		if ok && c.LastProcessed == nil && c.Lag == nil {
			// Killed before a batch of its rows was written: it processed
			// nothing durable, committed nothing.
			if k.Pointer != prevPointer {
				t.Errorf("run %d: nothing processed, pointer %d (was %d): want the pointer unmoved", run, k.Pointer, prevPointer)
			}
			before, prevPointer = k.Outputs, k.Pointer
			continue
		}
		if !ok || c.LastProcessed == nil || c.LastProcessed.Position == nil || c.Lag == nil {
			t.Errorf("run %d: crash %+v: want its last processed input and commit lag", run, c)
			continue
		}
		last := c.LastProcessed
		next := redelivered[runPair{run, nextRun(run)}]
		// 3: the commit lag, exact: where the restart resumed is the
		// pointer after the kill, and the inputs past it came again.
		if c.Lag.From != incident.LagFromRestart || c.Lag.Committed == nil || c.Lag.Committed.Offset != k.Pointer {
			t.Errorf("run %d: commit lag %+v, want committed at the pointer's offset %d (from the restart)", run, c.Lag, k.Pointer)
		}
		cut := map[int64]bool{} // inputs whose rows the kill cut: in flight
		for _, in := range c.InFlight {
			if in.Position != nil {
				cut[in.Position.Offset] = true
			}
		}
		again := 0 // the processed inputs the next run delivered again
		for _, r := range next {
			if !cut[r.Position.Offset] {
				again++
			}
		}
		// The next run delivered again every input past the pointer, unless
		// it was killed before it got past the last one.
		passed := c.MaybeInFlight != nil && c.MaybeInFlight.Run == nextRun(run)
		if c.Lag.Items < int64(again) || passed && c.Lag.Items != int64(again) || c.Lag.Bytes != last.Position.Offset-k.Pointer {
			t.Errorf("run %d: commit lag %d items %d bytes, want the %d inputs delivered again (all of them: %v), %d bytes",
				run, c.Lag.Items, c.Lag.Bytes, again, passed, last.Position.Offset-k.Pointer)
		}
		// 1 and 4: the last processed input and what the restart did with
		// what came again, against the state's offset (the ledger).
		for _, r := range next {
			if (r.Position.Offset <= k.Pointer || r.Position.Offset > last.Position.Offset) && !cut[r.Position.Offset] {
				t.Errorf("run %d: re-delivered %+v outside (pointer %d, last processed %d] and not cut by the kill", run, r.Position, k.Pointer, last.Position.Offset)
			}
			if app != "ledger" {
				continue
			}
			want := incident.OutcomeAppliedAgain
			if r.Position.Offset <= k.Offset {
				want = incident.OutcomeSkipped
			}
			if r.Outcome != want {
				t.Errorf("run %d: re-delivered offset %d %s, want %s (state offset %d)", run, r.Position.Offset, r.Outcome, want, k.Offset)
			}
		}
		if app == "ledger" && k.Offset != last.Position.Offset {
			// The state is behind the rows only by the input whose
			// completion the kill stopped: the restart applied it again.
			again := len(next) > 0 && next[len(next)-1].Position == *last.Position && next[len(next)-1].Outcome == incident.OutcomeAppliedAgain
			if !again || len(next) < 2 && k.Offset != k.Pointer || len(next) >= 2 && next[len(next)-2].Position.Offset != k.Offset {
				t.Errorf("run %d: state offset %d, last processed offset %d: want the state at it, or one input behind and that input applied again",
					run, k.Offset, last.Position.Offset)
			}
		}
		before, prevPointer = k.Outputs, k.Pointer
	}
	// 6, over the whole --out file: it holds every output the runs
	// recorded, once: their OUTPUT rows less the duplicates explain finds.
	// Every run delivered through --out's exactly-once outbox: none of
	// them reached the file twice.
	if a.NotAgain != int64(len(a.Duplicates)) {
		t.Errorf("%d outputs emitted again, %d of them not delivered again: want none delivered twice", len(a.Duplicates), a.NotAgain)
	}
	if got := recordedOnce(len(f.Runs)); got != outputs {
		t.Errorf("the runs recorded %d outputs (%d OUTPUT rows less %d recorded again), the --out file holds %d lines; want them equal",
			got, got+int64(len(a.Duplicates)), len(a.Duplicates), outputs)
	}
}

// TestExplainTakesAStateFileNotWrittenYetAsEmpty: --state naming a file that
// does not exist (a run that saved no state yet) is the app's empty state,
// as the ledger itself takes it, with a warning; not an error.
func TestExplainTakesAStateFileNotWrittenYetAsEmpty(t *testing.T) {
	dir := t.TempDir()
	in, st := filepath.Join(dir, "in.txt"), filepath.Join(dir, "r.csv")
	writeLines(t, in, "alice,5", "bob,7")
	if code, out := execute(t, t.Context(), "run", "--app", "ledger", "--read", "once-earliest", "--input", in, "--store", st); code != cli.ExitOK {
		t.Fatalf("run exit %d:\n%s", code, out)
	}
	missing := filepath.Join(dir, "ledger.json")
	code, out := execute(t, t.Context(), "explain", st, "--state", missing)
	if code != cli.ExitOK {
		t.Fatalf("explain --state of a missing file: exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{"warning: --state " + missing + " does not exist: taken as the empty state", "state: 0 applied"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("explain created the state file: %v", err)
	}
}
