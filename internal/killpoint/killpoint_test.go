//go:build unix

package killpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// childMode makes the test binary a child that reaches a point: "reach"
// reaches StoreWrite 10 times, printing each count before it; "half"
// calls WriteHalfAt (value 0) on the file named by childFile, then writes
// whole.
const (
	childMode = "KILLPOINT_TEST_CHILD"
	childFile = "KILLPOINT_TEST_FILE"
)

func TestMain(m *testing.M) {
	switch os.Getenv(childMode) {
	case "reach":
		for i := 1; i <= 10; i++ {
			fmt.Printf("%d\n", i)
			Reach(RowsWritten) // another point: never counts
			Reach(StoreWrite)
		}
		os.Exit(0)
	case "at":
		// Values 100, 350, 600 ...: ReachAt(PointerWritten@500) dies at 600.
		for v := int64(100); v <= 2100; v += 250 {
			fmt.Printf("%d\n", v)
			ReachAt(PointerWritten, v)
		}
		os.Exit(0)
	case "half":
		f, err := os.Create(os.Getenv(childFile))
		if err != nil {
			os.Exit(3)
		}
		b := []byte("0123456789\n")
		WriteHalfAt(StoreWrite, 0, f, b)
		f.Write(b)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs the test binary in mode with env set and returns its output
// and whether SIGKILL ended it.
func child(t *testing.T, mode, env string, extra ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childMode+"="+mode, Env+"="+env)
	cmd.Env = append(cmd.Env, extra...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running the child: %v", err)
	}
	if err == nil {
		return out.String(), false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return out.String(), ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func TestTheNthReachOfTheArmedPointKillsTheProcess(t *testing.T) {
	out, killed := child(t, "reach", Value(StoreWrite, 4))
	if !killed {
		t.Fatalf("the child was not killed by SIGKILL; output:\n%s", out)
	}
	if want := "1\n2\n3\n4\n"; out != want {
		t.Errorf("output = %q, want %q (killed at the 4th reach, no sooner, no later)", out, want)
	}
}

func TestAPointReachedFewerTimesThanNDoesNotKill(t *testing.T) {
	out, killed := child(t, "reach", Value(StoreWrite, 11))
	if killed {
		t.Fatalf("the child was killed; output:\n%s", out)
	}
}

func TestAnUnsetVariableLeavesTheSwitchDormant(t *testing.T) {
	out, killed := child(t, "reach", "")
	if killed || bytes.Count([]byte(out), []byte("\n")) != 10 {
		t.Fatalf("killed %v, output %q; want all 10 reaches", killed, out)
	}
}

func TestWriteHalfAtWritesHalfTheBufferThenDies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "half")
	out, killed := child(t, "half", Value(StoreWrite, 1), childFile+"="+path)
	if !killed {
		t.Fatalf("the child was not killed by SIGKILL; output:\n%s", out)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "01234"; string(got) != want {
		t.Errorf("file holds %q, want %q (half of the buffer)", got, want)
	}
}

func TestAMalformedVariableStopsTheProcessAtStartUp(t *testing.T) {
	for _, v := range []string{"store-write", "nowhere:1", "store-write:0", "store-write:x"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), Env+"="+v)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s=%q: err %v, want exit 2; output %q", Env, v, err, out)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in    string
		point string
		n     int64
		ok    bool
	}{
		{"state-saved:1", StateSaved, 1, true},
		{"pointer-written:250", PointerWritten, 250, true},
		{"golden-update:2", GoldenUpdate, 2, true},
		{"convert", "", 0, false},
		{"convert:", "", 0, false},
		{"convert:-1", "", 0, false},
		{"Convert:1", "", 0, false},
		{":1", "", 0, false},
		{"pointer-written@4096", PointerWritten, 0, true},
		{"pointer-written@0", "", 0, false},
		{"pointer-written@", "", 0, false},
	}
	for _, tt := range tests {
		a, err := parse(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("parse(%q) error %v, want ok %v", tt.in, err, tt.ok)
			continue
		}
		if err == nil && (a.point != tt.point || a.n != tt.n) {
			t.Errorf("parse(%q) = %s:%d, want %s:%d", tt.in, a.point, a.n, tt.point, tt.n)
		}
	}
}

// TestAPointArmedAtAValueDiesAtTheFirstReachAtOrPastIt: POINT@V kills at
// the first ReachAt whose value is at least V, however many reaches came
// before (the pointer commits a varying number of lines per write).
func TestAPointArmedAtAValueDiesAtTheFirstReachAtOrPastIt(t *testing.T) {
	out, killed := child(t, "at", ValueAt(PointerWritten, 500))
	if !killed {
		t.Fatalf("the child was not killed; output:\n%s", out)
	}
	if got, want := out, "100\n350\n600\n"; got != want {
		t.Errorf("the child printed %q before it died, want %q (died at the reach with 600)", got, want)
	}
	if out, killed := child(t, "at", ValueAt(PointerWritten, 5000)); killed {
		t.Errorf("a value never reached killed the child; output:\n%s", out)
	}
}

func BenchmarkReachDormant(b *testing.B) {
	for b.Loop() {
		Reach(StoreWrite)
	}
}
