package cli_test

import (
	"bytes"
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
