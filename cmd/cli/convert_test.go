package cli_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
)

// killAt runs this test binary as blackbox with args, holds it at the
// named point of its test hook and kills it with SIGKILL there.
func killAt(t *testing.T, point string, args ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", holdEnv+"="+point)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe() // held open: the child waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	held := false
	var lines []string
	for sc.Scan() {
		if sc.Text() == heldAt+point {
			held = true
			break
		}
		lines = append(lines, sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if !held {
		t.Fatalf("%q ended (%v) before %q:\n%s", args, err, point, strings.Join(lines, "\n"))
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%q: not killed by SIGKILL: %v", args, cmd.ProcessState)
	}
}

// TestAKilledConvertLeavesNoDestination: convert writes a temporary file
// and renames it into place only when complete: killed with SIGKILL once
// every row was copied, it leaves no DST (it used to leave a partial DST
// that verify called "unfinished" and that refused a retry), no command
// takes its temporary file for a recording, and a retry converts and
// removes the stale temporary file.
func TestAKilledConvertLeavesNoDestination(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeLines(t, "in.txt", "alice,1", "bob,2", "transfer,alice,bob,1")
	if code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", "src.csv",
		"--read", "once-earliest"); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, dst := range []string{"dst.db", "dst.csv"} {
		killAt(t, "convert: copied", "convert", "src.csv", dst)
		if _, err := os.Lstat(dst); err == nil {
			t.Errorf("a killed convert left %s", dst)
		}
		temps, _ := filepath.Glob("." + dst + "*")
		if len(temps) == 0 {
			t.Fatalf("the killed convert left no temporary file: was it killed while copying?")
		}
		for _, tmp := range temps {
			for _, cmd := range []string{"verify", "inspect", "replay"} {
				if code, out := execute(t, context.Background(), cmd, tmp); code != cli.ExitFailure {
					t.Errorf("%s %s: exit %d, want %d (not a recording):\n%s", cmd, tmp, code, cli.ExitFailure, out)
				}
			}
		}
		if code, out := execute(t, context.Background(), "convert", "src.csv", dst); code != 0 {
			t.Fatalf("retry: exit %d:\n%s", code, out)
		}
		if code, out := execute(t, context.Background(), "verify", dst); code != 0 {
			t.Errorf("verify %s: exit %d:\n%s", dst, code, out)
		}
		if left, _ := filepath.Glob(".*"); len(left) > 0 {
			t.Errorf("left behind after the retry: %v", left)
		}
	}
}
