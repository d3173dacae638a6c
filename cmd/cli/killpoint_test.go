package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// The blackbox binary, built once for the tests that kill it.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// blackboxBinary builds cmd/blackbox once (removed by TestMain).
func blackboxBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		if binDir, binErr = os.MkdirTemp("", "blackbox-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "blackbox")
		build := exec.Command(gobin, "build", "-o", binPath, "../blackbox")
		build.Env = append(os.Environ(), childEnv+"=")
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// blackbox runs the binary in dir with extra environment variables and
// returns its output, exit code and whether SIGKILL ended it.
func blackbox(t *testing.T, dir string, env []string, args ...string) (out string, code int, killed bool) {
	t.Helper()
	cmd := exec.Command(blackboxBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), childEnv+"="), env...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return b.String(), 0, false
	case errors.As(err, &ee):
		ws, ok := ee.Sys().(syscall.WaitStatus)
		return b.String(), ee.ExitCode(), ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	}
	t.Fatalf("blackbox %s: %v", strings.Join(args, " "), err)
	return "", 0, false
}

// killReport and crashReport are what the test reads of `crashtest --json`.
type killReport struct {
	Run        int    `json:"run"`
	Target     int64  `json:"target"`
	Reached    bool   `json:"reached"`
	Duplicates int    `json:"duplicates"`
	Problems   string `json:"problems"`
	Unexpected bool   `json:"unexpected"`
}

type crashReport struct {
	Postings int64        `json:"postings"`
	Kills    []killReport `json:"kills"`
	Crashed  *struct {
		Applied int64 `json:"applied"`
		Offset  int64 `json:"offset"`
	} `json:"crashed"`
	Expected *struct {
		Applied int64 `json:"applied"`
		Offset  int64 `json:"offset"`
	} `json:"expected"`
	Missing    int `json:"missing"`
	Duplicates int `json:"duplicates"`
	Diff       struct {
		OnlyA     int64 `json:"onlyA"`
		OnlyB     int64 `json:"onlyB"`
		Different int64 `json:"different"`
	} `json:"diff"`
	Problems []string `json:"problems"`
	Holds    bool     `json:"holds"`
	Failures []string `json:"failures"`
}

// TestEveryRunKillPointLosesNothingAndAppliesOnce kills a recorded ledger
// run 5 times at each point of its write path (internal/killpoint), in
// both formats, restarts it, and checks what crashtest checks: balances
// and the applied count equal a clean run's, every input in some
// recording with the clean run's outputs (the stitched diff is empty), at
// most one delivery's outputs re-emitted per kill, and verify naming each
// killed recording unfinished (and torn, for a kill inside a CSV write).
// The empty point kills after random output lines, as crashtest does by
// default.
func TestEveryRunKillPointLosesNothingAndAppliesOnce(t *testing.T) {
	// 600 lines: the ten subtests take about a minute on two busy cores
	// (83 s at 1,000 lines under a load of 12). blackbox crashtest
	// --kill-at P --kills 50 --lines 3000 is the full measure.
	lines := "600"
	if testing.Short() {
		lines = "200"
	}
	for _, point := range []string{"", killpoint.StateSaved, killpoint.RowsWritten, killpoint.StoreWrite, killpoint.PointerWritten} {
		for _, format := range []string{"sqlite", "csv"} {
			name := point
			if name == "" {
				name = "output-lines"
			}
			t.Run(name+"/"+format, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				args := []string{"crashtest", "--kills", "5", "--lines", lines, "--format", format, "--dir", dir, "--json"}
				if point != "" {
					args = append(args, "--kill-at", point)
				}
				out, code, _ := blackbox(t, dir, nil, args...)
				var rep crashReport
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("crashtest exited %d without a JSON report (%v):\n%s", code, err, out)
				}
				if !rep.Holds || code != 0 {
					t.Errorf("crashtest exited %d, holds %v; failures:\n  %s", code, rep.Holds, strings.Join(rep.Failures, "\n  "))
				}
				if len(rep.Kills) != 5 {
					t.Fatalf("%d kills, want 5", len(rep.Kills))
				}
				if rep.Crashed == nil || rep.Expected == nil {
					t.Fatal("the ledger's state was not checked")
				}
				if rep.Crashed.Applied != rep.Postings || rep.Expected.Applied != rep.Postings || rep.Crashed.Offset != rep.Expected.Offset {
					t.Errorf("applied: crashed %d at offset %d, clean %d at offset %d; want %d postings each, the same offset",
						rep.Crashed.Applied, rep.Crashed.Offset, rep.Expected.Applied, rep.Expected.Offset, rep.Postings)
				}
				if rep.Missing != 0 || rep.Diff.OnlyA != 0 || rep.Diff.OnlyB != 0 || rep.Diff.Different != 0 {
					t.Errorf("outputs missing %d; stitched diff: only crashed %d, only clean %d, different %d; want all 0",
						rep.Missing, rep.Diff.OnlyA, rep.Diff.OnlyB, rep.Diff.Different)
				}
				if len(rep.Problems) != 0 {
					t.Errorf("unexpected recording problems: %q", rep.Problems)
				}
				for _, k := range rep.Kills {
					if !k.Reached {
						t.Errorf("kill %d: the run outlived reach %d of %q", k.Run, k.Target, point)
					}
					if k.Duplicates > 2 { // a ledger delivery emits at most two postings
						t.Errorf("kill %d: %d outputs emitted again, more than one delivery's", k.Run, k.Duplicates)
					}
					if k.Problems == "none" || k.Unexpected {
						t.Errorf("kill %d: verify names %q in the killed recording, want it unfinished (or torn, or empty)", k.Run, k.Problems)
					}
				}
				if t.Failed() {
					t.Logf("crashtest %s:\n%s", strings.Join(args, " "), out)
				}
			})
		}
	}
}

// record runs the ledger over n generated lines into a new recording.
func record(t *testing.T, dir, storePath string, n int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "acct-%02d,%d\n", i%7, i-n/2)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code, _ := blackbox(t, dir, nil, "run", "--app", "ledger", "--input", "in.txt", "--store", storePath); code != 0 {
		t.Fatalf("run exited %d:\n%s", code, out)
	}
}

// TestAKilledConvertLeavesNoDestinationAndARetrySucceeds: convert writes a
// temporary file and links it into place only when complete: killed with
// SIGKILL after its first batch of rows reached the destination (Convert),
// or once every row was copied (ConvertCopied), in both directions, it
// leaves no DST (it used to leave a partial DST that verify called
// "unfinished" and that refused a retry) but its temporary file, which no
// command takes for a recording; the same convert run again succeeds with
// a complete DST and removes the stale temporary file.
func TestAKilledConvertLeavesNoDestinationAndARetrySucceeds(t *testing.T) {
	for _, tc := range []struct{ src, dst string }{{"src.db", "dst.csv"}, {"src.csv", "dst.db"}} {
		t.Run(tc.dst, func(t *testing.T) {
			dir := t.TempDir()
			record(t, dir, tc.src, 800) // 2,400 rows and more: three batches
			for _, point := range []string{killpoint.Convert, killpoint.ConvertCopied} {
				out, code, killed := blackbox(t, dir, []string{killpoint.Env + "=" + killpoint.Value(point, 1)},
					"convert", tc.src, tc.dst)
				if !killed {
					t.Fatalf("convert was not killed at %s (exit %d):\n%s", point, code, out)
				}
				if _, err := os.Lstat(filepath.Join(dir, tc.dst)); !errors.Is(err, fs.ErrNotExist) {
					vout, vcode, _ := blackbox(t, dir, nil, "verify", tc.dst)
					t.Errorf("%s: a killed convert left %s (stat: %v); verify exits %d:\n%s", point, tc.dst, err, vcode, vout)
				}
				temps, _ := filepath.Glob(filepath.Join(dir, "."+tc.dst+"*"))
				if len(temps) == 0 {
					t.Fatalf("%s: the killed convert left no temporary file: was it killed while copying?", point)
				}
				for _, tmp := range temps {
					for _, cmd := range []string{"verify", "inspect", "replay"} {
						if out, code, _ := blackbox(t, dir, nil, cmd, filepath.Base(tmp)); code != cli.ExitFailure {
							t.Errorf("%s: %s %s: exit %d, want %d (not a recording):\n%s", point, cmd, tmp, code, cli.ExitFailure, out)
						}
					}
				}
				if out, code, _ := blackbox(t, dir, nil, "convert", tc.src, tc.dst); code != 0 {
					t.Fatalf("%s: the retried convert exited %d:\n%s", point, code, out)
				}
				if out, code, _ := blackbox(t, dir, nil, "verify", tc.dst); code != 0 {
					t.Errorf("%s: verify %s after the retry exited %d:\n%s", point, tc.dst, code, out)
				}
				if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
					t.Errorf("%s: left behind after the retry: %v", point, left)
				}
				if err := os.Remove(filepath.Join(dir, tc.dst)); err != nil { // for the next point
					t.Fatal(err)
				}
			}
		})
	}
}

// TestEightKeyOrderedWorkersSurviveTenSIGKILLs: the ledger on 8
// key-ordered workers, killed with SIGKILL 10 times at random output lines
// and restarted: every worker's balances and applied count equal a clean
// 8-worker run's (every line applied exactly once), the pointer is never
// ahead of the contiguous prefix of applied lines after any kill (crashtest
// checks it), at most one delivery per worker is re-emitted per kill, and
// the stitched runs diff the same as a clean run on one worker.
func TestEightKeyOrderedWorkersSurviveTenSIGKILLs(t *testing.T) {
	t.Parallel()
	lines := "1200"
	if testing.Short() {
		lines = "500"
	}
	dir := t.TempDir()
	args := []string{"crashtest", "--workers", "8", "--kills", "10", "--lines", lines, "--format", "csv", "--dir", dir, "--json"}
	out, code, _ := blackbox(t, dir, nil, args...)
	var rep crashReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("crashtest exited %d without a JSON report (%v):\n%s", code, err, out)
	}
	if !rep.Holds || code != 0 {
		t.Errorf("crashtest exited %d, holds %v; failures:\n  %s", code, rep.Holds, strings.Join(rep.Failures[:min(20, len(rep.Failures))], "\n  "))
	}
	if len(rep.Kills) != 10 {
		t.Fatalf("%d kills, want 10", len(rep.Kills))
	}
	if rep.Crashed == nil || rep.Crashed.Applied != rep.Postings || rep.Expected.Applied != rep.Postings {
		t.Errorf("applied: crashed %+v, clean %+v; want %d postings each", rep.Crashed, rep.Expected, rep.Postings)
	}
	if rep.Missing != 0 || rep.Diff.OnlyA != 0 || rep.Diff.OnlyB != 0 || rep.Diff.Different != 0 {
		t.Errorf("outputs missing %d; stitched diff against one worker: only crashed %d, only clean %d, different %d; want all 0",
			rep.Missing, rep.Diff.OnlyA, rep.Diff.OnlyB, rep.Diff.Different)
	}
	if rep.Duplicates > 10*8 { // one delivery (one posting) per worker per kill
		t.Errorf("%d outputs emitted again, more than one delivery per worker per kill", rep.Duplicates)
	}
}

// TestBatchedStateSavesStayExactlyOnceAcrossSIGKILLs: the ledger saving its
// state every 20 lines (or 50ms), killed with SIGKILL 5 times at random
// output lines and restarted, on one worker and on four: every line is
// applied exactly once (the balances and applied count equal a clean
// run's), nothing is lost, the stitched runs diff the same as a clean run;
// each restart delivered again at most what the killed run processed past
// its pointer (0 <= again <= lag), and the outputs emitted twice are at
// most those of the lines delivered again and of one interrupted delivery
// per worker per kill (a posting or two each).
func TestBatchedStateSavesStayExactlyOnceAcrossSIGKILLs(t *testing.T) {
	for _, workers := range []string{"1", "4"} {
		t.Run("workers="+workers, func(t *testing.T) {
			t.Parallel()
			lines := "800"
			if testing.Short() {
				lines = "300"
			}
			dir := t.TempDir()
			args := []string{"crashtest", "--kills", "5", "--lines", lines, "--format", "csv", "--workers", workers,
				"--state-every", "20", "--state-interval", "50ms", "--dir", dir, "--json"}
			out, code, _ := blackbox(t, dir, nil, args...)
			var rep struct {
				crashReport
				StateEvery int `json:"stateEvery"`
				Kills      []struct {
					Run         int   `json:"run"`
					Lag         int64 `json:"lag"`
					Redelivered int64 `json:"redelivered"`
				} `json:"kills"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("crashtest exited %d without a JSON report (%v):\n%s", code, err, out)
			}
			if !rep.Holds || code != 0 {
				t.Errorf("crashtest exited %d, holds %v; failures:\n  %s", code, rep.Holds, strings.Join(rep.Failures, "\n  "))
			}
			if rep.StateEvery != 20 || len(rep.Kills) != 5 {
				t.Fatalf("state every %d, %d kills; want 20, 5", rep.StateEvery, len(rep.Kills))
			}
			if rep.Crashed == nil || rep.Crashed.Applied != rep.Postings || rep.Expected.Applied != rep.Postings {
				t.Errorf("applied: crashed %+v, clean %+v; want %d postings each", rep.Crashed, rep.Expected, rep.Postings)
			}
			if rep.Missing != 0 || rep.Diff.OnlyA != 0 || rep.Diff.OnlyB != 0 || rep.Diff.Different != 0 {
				t.Errorf("outputs missing %d; stitched diff: only crashed %d, only clean %d, different %d; want all 0",
					rep.Missing, rep.Diff.OnlyA, rep.Diff.OnlyB, rep.Diff.Different)
			}
			var again int64
			for _, k := range rep.Kills {
				if k.Redelivered < 0 || k.Redelivered > k.Lag {
					t.Errorf("kill %d: delivered %d lines again, want 0 to the lag %d", k.Run, k.Redelivered, k.Lag)
				}
				again += k.Redelivered
			}
			// A kill may also cut a batch of rows per worker (at most
			// core.MaxBatch lines) whose outputs the live sink had.
			w := int64(workers[0] - '0')
			cut := int64(len(rep.Kills)) * w * core.MaxBatch
			if rep.Duplicates < 0 || int64(rep.Duplicates) > 2*(again+cut) {
				t.Errorf("%d outputs emitted again, more than two per line delivered again (%d) and per line of a batch each kill may cut (%d)", rep.Duplicates, again, cut)
			}
			if t.Failed() {
				t.Logf("crashtest %s:\n%s", strings.Join(args, " "), out)
			}
		})
	}
}

// TestCrashtestHoldsWithBatchedSavesAndOnceTheInputIsDone: crashtest
// reports what its checks found. With the state saved in batches
// (--state-every 10) a run reaches state-saved once per batch, not once
// per line: each --kill-at kill still dies at the save that holds its cut
// line, or a later one. Once an earlier run committed the whole input (or
// applied it whole, for state-saved; or, killing at output lines with
// batches, emitted every output), a restart has nothing left to reach its
// point with: it is killed once it has committed the input, reported
// idle, and is no failure. The first used to say "does not hold" while
// every check held; the last killed the run before it created its
// recording, and crashtest exited 2 (it could not read it).
func TestCrashtestHoldsWithBatchedSavesAndOnceTheInputIsDone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantIdle bool // some kills find the input done
	}{
		{"state-saved/every-10", []string{"--kill-at", killpoint.StateSaved, "--state-every", "10", "--lines", "300", "--kills", "3"}, false},
		{"state-saved/workers-4/every-10", []string{"--kill-at", killpoint.StateSaved, "--state-every", "10", "--lines", "300", "--kills", "3", "--workers", "4"}, false},
		{"state-saved/done", []string{"--kill-at", killpoint.StateSaved, "--lines", "4", "--kills", "7"}, true},
		{"pointer-written/done", []string{"--kill-at", killpoint.PointerWritten, "--lines", "4", "--kills", "7"}, true},
		{"output-lines/every-20/done", []string{"--state-every", "20", "--lines", "20", "--kills", "4"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append([]string{"crashtest", "--format", "csv", "--seed", "3", "--dir", dir, "--json"}, tc.args...)
			out, code, _ := blackbox(t, dir, nil, args...)
			var rep struct {
				crashReport
				Kills []struct {
					Run     int  `json:"run"`
					Reached bool `json:"reached"`
					Idle    bool `json:"idle"`
				} `json:"kills"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("crashtest exited %d without a JSON report (%v):\n%s", code, err, out)
			}
			if !rep.Holds || code != 0 {
				t.Errorf("crashtest exited %d, holds %v; failures:\n  %s", code, rep.Holds, strings.Join(rep.Failures, "\n  "))
			}
			if rep.Crashed == nil || rep.Crashed.Applied != rep.Postings {
				t.Errorf("applied: crashed %+v; want %d postings", rep.Crashed, rep.Postings)
			}
			idle := 0
			for _, k := range rep.Kills {
				switch {
				case k.Reached && k.Idle:
					t.Errorf("kill %d: reached its point and idle", k.Run)
				case !k.Reached && !k.Idle:
					t.Errorf("kill %d: neither reached its point nor idle", k.Run)
				case k.Idle:
					idle++
				}
			}
			if tc.wantIdle && idle == 0 {
				t.Errorf("no kill found the input committed whole: the case tests nothing")
			}
			if !tc.wantIdle && (len(rep.Kills) == 0 || !rep.Kills[0].Reached) {
				t.Errorf("the first kill did not reach its point")
			}
			if t.Failed() {
				t.Logf("crashtest %s:\n%s", strings.Join(args, " "), out)
			}
		})
	}
}
