package golden_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/golden"
)

// A run of this test binary with childDirEnv set is golden.Update of that
// folder; with holdEnv set it stops at that point of the update's test
// hook, after printing heldAt and the point to standard error, until it is
// killed.
const (
	childDirEnv = "GOLDEN_TEST_UPDATE_DIR"
	holdEnv     = "GOLDEN_TEST_HOLD"
	heldAt      = "held at "
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		if point := os.Getenv(holdEnv); point != "" {
			golden.SetTestHook(func(p string) {
				if p == point {
					fmt.Fprintln(os.Stderr, heldAt+p)
					// Until the test kills the process: its end of the pipe
					// stays open (a read, unlike select{}, is no deadlock).
					io.Copy(io.Discard, os.Stdin)
					os.Exit(1)
				}
			})
		}
		if err := golden.Update(dir, builtins()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// killUpdateAt runs golden.Update(dir) in a child process with TMPDIR
// tmpdir, holds it at the named point and kills it with SIGKILL there.
func killUpdateAt(t *testing.T, dir, tmpdir, point string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, holdEnv+"="+point, "TMPDIR="+tmpdir)
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
		t.Fatalf("the update ended (%v) before %q:\n%s", err, point, strings.Join(lines, "\n"))
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("not killed by SIGKILL: %v", cmd.ProcessState)
	}
}

// restartCase makes a folder holding the ledger-restart case of testdata,
// recorded.
func restartCase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cdir := filepath.Join(dir, "ledger-restart")
	if err := os.Mkdir(cdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{golden.CaseFile, golden.InputFile} {
		b, err := os.ReadFile(filepath.Join("testdata", "ledger-restart", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cdir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := golden.Update(dir, builtins()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readAll maps the names in dir to their contents.
func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		m[e.Name()] = string(b)
	}
	return m
}

// TestAKilledUpdateLeavesNoTemporaryFiles: an update killed with SIGKILL
// while recording leaves nothing in the system's temporary folder (it used
// to leave /tmp/blackbox-golden-* folders) and the case's recordings as
// they were; the next update removes its temporary folder and leaves only
// the case's files.
func TestAKilledUpdateLeavesNoTemporaryFiles(t *testing.T) {
	dir := restartCase(t)
	cdir := filepath.Join(dir, "ledger-restart")
	before := readAll(t, cdir)
	tmpdir := t.TempDir()
	killUpdateAt(t, dir, tmpdir, "update: recorded")
	if left, _ := os.ReadDir(tmpdir); len(left) > 0 {
		t.Errorf("the killed update left %d files in TMPDIR: %v", len(left), left)
	}
	after := readAll(t, cdir)
	for name, b := range before {
		if after[name] != b {
			t.Errorf("the killed update changed %s", name)
		}
	}
	if ok, report, err := golden.Verify(dir, builtins()); err != nil || !ok {
		t.Errorf("Verify after the kill: ok %v err %v:\n%s", ok, err, report)
	}
	if err := golden.Update(dir, builtins()); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, cdir)
	if len(got) != len(before) {
		t.Errorf("after the next update the case holds %d files, want %d: %v", len(got), len(before), keys(got))
	}
}

// TestAHalfReplacedPairIsNoticed: a restart case's run1.csv and run2.csv
// are replaced together: an update killed after it replaced run1.csv but
// not run2.csv (of a changed input) makes Check fail (each file alone
// still replays identical: the pair used to pass), and the next update
// finishes it: the pair is the new input's.
func TestAHalfReplacedPairIsNoticed(t *testing.T) {
	dir := restartCase(t)
	cdir := filepath.Join(dir, "ledger-restart")
	old := readAll(t, cdir)
	in := filepath.Join(cdir, golden.InputFile)
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, append([]byte("zed,7\n"), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	killUpdateAt(t, dir, t.TempDir(), "update: moved run1.csv")
	half := readAll(t, cdir)
	if half["run1.csv"] == old["run1.csv"] || half["run2.csv"] != old["run2.csv"] {
		t.Fatalf("the kill did not fall between the two renames")
	}
	ok, report, err := golden.Verify(dir, builtins())
	if err != nil || ok || !strings.Contains(report, "FAIL ledger-restart/"+golden.ReadyDir) {
		t.Errorf("Verify of a half-replaced pair: ok %v err %v, want a failure naming %s:\n%s", ok, err, golden.ReadyDir, report)
	}
	if err := golden.Update(dir, builtins()); err != nil {
		t.Fatal(err)
	}
	if ok, report, err := golden.Verify(dir, builtins()); err != nil || !ok {
		t.Errorf("Verify after the next update: ok %v err %v:\n%s", ok, err, report)
	}
	// The pair is what a clean update of the new input records.
	fresh := t.TempDir()
	if err := os.Mkdir(filepath.Join(fresh, "ledger-restart"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{golden.CaseFile, golden.InputFile} {
		b, _ := os.ReadFile(filepath.Join(cdir, f))
		os.WriteFile(filepath.Join(fresh, "ledger-restart", f), b, 0o644)
	}
	if err := golden.Update(fresh, builtins()); err != nil {
		t.Fatal(err)
	}
	want, got := readAll(t, filepath.Join(fresh, "ledger-restart")), readAll(t, cdir)
	for _, f := range []string{"run1.csv", "run2.csv"} {
		if !bytes.Equal([]byte(got[f]), []byte(want[f])) {
			t.Errorf("%s is not the new input's", f)
		}
	}
	if len(got) != len(want) {
		t.Errorf("case files %v, want %v", keys(got), keys(want))
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
