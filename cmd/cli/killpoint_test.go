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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
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

// TestARunKilledInsideItsOutboxDeliversEachOutputOnceAfterTheRestarts: a
// ledger run with --state and --out killed with SIGKILL at the first reach of a point
// of its outbox's delivery, out-marked (the batch's mark written, nothing
// of it delivered) or out-write (the file sink wrote half of the batch: a
// partial last line), in both formats, then restarted armed the same way
// twice more, then unarmed. A restart's outbox first finishes the batch
// the kill interrupted: at out-write that is the first write it makes, so
// it dies there again, before it created its recording (it recorded
// nothing). The last run ends settled, and out.jsonl holds a clean run's
// outputs, each exactly once, in order (compared without "at", the clock).
func TestARunKilledInsideItsOutboxDeliversEachOutputOnceAfterTheRestarts(t *testing.T) {
	for _, point := range []string{killpoint.OutMarked, killpoint.OutWrite} {
		for _, format := range []string{"csv", "sqlite"} {
			t.Run(point+"/"+format, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				var in strings.Builder
				for i := range 600 {
					fmt.Fprintf(&in, "acct-%02d,%d\n", i%7, i-300)
				}
				if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte(in.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				args := func(store, ptr, state, out string) []string {
					return []string{"run", "--app", "ledger", "--input", "in.txt", "--format", format, "--read", "committed",
						"--store", store, "--pointer", ptr, "--state", state, "--out", out}
				}
				if out, code, _ := blackbox(t, dir, nil, args("clean."+format, "clean.ptr", "clean.json", "clean.jsonl")...); code != 0 {
					t.Fatalf("the clean run exited %d:\n%s", code, out)
				}
				ended := false
				for k := 1; k <= 3 && !ended; k++ {
					store := fmt.Sprintf("run-%d.%s", k, format)
					out, code, killed := blackbox(t, dir, []string{killpoint.Env + "=" + killpoint.Value(point, 1)}, args(store, "crash.ptr", "crash.json", "out.jsonl")...)
					switch {
					case code == 0 && k > 1:
						ended = true // nothing left to deliver: the point was not reached
						continue
					case !killed:
						t.Fatalf("run %d was not killed at %s (exit %d):\n%s", k, point, code, out)
					}
					b, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
					if err != nil && k > 1 {
						t.Fatal(err)
					}
					if torn := len(b) > 0 && b[len(b)-1] != '\n'; torn != (point == killpoint.OutWrite) {
						t.Errorf("run %d killed at %s: out.jsonl ends with a partial line %v, want %v", k, point, torn, point == killpoint.OutWrite)
					}
					if fi, err := os.Stat(filepath.Join(dir, store)); point == killpoint.OutWrite && k > 1 && err == nil && fi.Size() > 0 {
						t.Errorf("run %d killed at %s: it created %s, want it killed in its outbox's recovery, before", k, point, store)
					}
				}
				if !ended {
					if out, code, _ := blackbox(t, dir, nil, args("run-4."+format, "crash.ptr", "crash.json", "out.jsonl")...); code != 0 {
						t.Fatalf("the last run exited %d:\n%s", code, out)
					}
				}
				got, want := outputsWithoutAt(t, filepath.Join(dir, "out.jsonl")), outputsWithoutAt(t, filepath.Join(dir, "clean.jsonl"))
				if len(want) != 600 || !slices.Equal(got, want) {
					t.Errorf("out.jsonl holds %d lines, the clean run's %d (600 postings); want the same lines, each once, in order", len(got), len(want))
					for i := range max(len(got), len(want)) {
						if i >= len(got) || i >= len(want) || got[i] != want[i] {
							t.Logf("first difference at line %d", i+1)
							break
						}
					}
				}
			})
		}
	}
}

// outputsWithoutAt reads an --out file's lines, each without its "at" key.
func outputsWithoutAt(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	for l := range strings.Lines(string(b)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		delete(m, "at")
		o, _ := json.Marshal(m)
		outs = append(outs, string(o))
	}
	return outs
}
