package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
)

// feedStatus is what these tests read of a run's --status file.
type feedStatus struct {
	Lossless bool `json:"lossless"`
	Feeds    []struct {
		Sequence int64            `json:"sequence"`
		Losses   map[string]int64 `json:"losses"`
	} `json:"feeds"`
	// Source is the file source's own status.
	Source *struct {
		HoleBytes int64 `json:"holeBytes"`
		Replaced  int64 `json:"replaced"`
	} `json:"source"`
}

func readStatus(t *testing.T, path string) feedStatus {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st feedStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(st.Feeds) != 1 || st.Source == nil {
		t.Fatalf("%s: %d feeds, source %v: want 1 and the file source's status", path, len(st.Feeds), st.Source)
	}
	return st
}

// TestALineLongerThanMaxLineIsSkippedAndCounted: `run --max-line BYTES`
// sets the file source's longest line: a 60-byte line (valid for the
// ledger) is read under the default bound, and under --max-line 50 it is
// skipped, counted in the status (losses.oversized) and makes the run exit 3,
// not lossless; the lines around it are read either way.
func TestALineLongerThanMaxLineIsSkippedAndCounted(t *testing.T) {
	long := strings.Repeat("a", 57) + ",1" // 59 bytes
	for _, tc := range []struct {
		name      string
		flags     []string
		code      int
		oversized int64
		outputs   int
	}{
		{"default", nil, 0, 0, 3},
		{"max-line 50", []string{"--max-line", "50"}, cli.ExitIncomplete, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			writeLines(t, "in.txt", "alice,1", long, "bob,2")
			args := append([]string{"run", "--app", "ledger", "--input", "in.txt", "--store", "run.csv",
				"--read", "once-earliest", "--status", "status.json", "--out", "out.jsonl"}, tc.flags...)
			code, out := execute(t, context.Background(), args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			st := readStatus(t, "status.json")
			if got := st.Feeds[0].Losses["oversized"]; got != tc.oversized {
				t.Errorf("oversized %d, want %d", got, tc.oversized)
			}
			if st.Lossless != (tc.oversized == 0) {
				t.Errorf("lossless %v with %d oversized", st.Lossless, tc.oversized)
			}
			if got := countLines(t, "out.jsonl"); got != tc.outputs {
				t.Errorf("%d outputs, want %d", got, tc.outputs)
			}
		})
	}
}

// TestAMaxLineThatIsNotPositiveIsAUsageError: --max-line 0 or -1 is
// refused before any work (exit 2, no recording).
func TestAMaxLineThatIsNotPositiveIsAUsageError(t *testing.T) {
	t.Chdir(t.TempDir())
	writeLines(t, "in.txt", "alice,1")
	for _, n := range []string{"0", "-1"} {
		code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", "run.csv",
			"--max-line", n)
		if code != cli.ExitFailure {
			t.Errorf("--max-line %s: exit %d, want %d:\n%s", n, code, cli.ExitFailure, out)
		}
		if _, err := os.Stat("run.csv"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("--max-line %s: the refused run created run.csv (%v)", n, err)
		}
	}
}

// TestARotatedSiblingMatchingACustomGlobIsFinishedOnRestart: a run
// commits two lines of in.txt; two more are appended, and in.txt is
// rotated to in.txt.old (a name no default pattern matches) and replaced
// by a new file of two lines. A restart with --rotated '{path}.old' reads
// the old file's last two lines first, then the new file: six outputs in
// all, lossless; with the default patterns the old file is not found, its
// two lines are unread (counted: losses.unread) and the run exits 3.
// Either way the new file at in.txt is read from 0 under a new epoch: the
// input counts as replaced once (the status's "source" and the printed
// summary say so).
func TestARotatedSiblingMatchingACustomGlobIsFinishedOnRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   []string
		code    int
		unread  int64
		outputs int // of both runs
	}{
		{"custom glob", []string{"--rotated", "{path}.old"}, 0, 0, 6},
		{"default globs", nil, cli.ExitIncomplete, 1, 4},
		{"custom glob among others", []string{"--rotated", "{path}.1", "--rotated", "{path}.o*"}, 0, 0, 6},
		{"no glob", []string{"--rotated", ""}, cli.ExitIncomplete, 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			writeLines(t, "in.txt", "alice,1", "bob,2")
			base := []string{"run", "--app", "ledger", "--input", "in.txt", "--out", "out.jsonl", "--status", "status.json"}
			if code, out := execute(t, context.Background(), append(base, "--store", "run1.csv")...); code != 0 {
				t.Fatalf("first run: exit %d:\n%s", code, out)
			}
			writeLines(t, "in.txt", "carol,3", "dave,4")
			if err := os.Rename("in.txt", "in.txt.old"); err != nil {
				t.Fatal(err)
			}
			writeLines(t, "in.txt", "erin,5", "frank,6")
			code, out := execute(t, context.Background(), append(append(base, "--store", "run2.csv"), tc.flags...)...)
			if code != tc.code {
				t.Fatalf("restart: exit %d, want %d:\n%s", code, tc.code, out)
			}
			st := readStatus(t, "status.json")
			if got := st.Feeds[0].Losses["unread"]; got != tc.unread {
				t.Errorf("unread files %d, want %d", got, tc.unread)
			}
			if got := st.Source.Replaced; got != 1 || !strings.Contains(out, " lines, replaced 1\n") {
				t.Errorf("replaced %d, want 1 in the status and the summary:\n%s", got, out)
			}
			if st.Lossless != (tc.unread == 0) {
				t.Errorf("lossless %v with %d unread files", st.Lossless, tc.unread)
			}
			if got := countLines(t, "out.jsonl"); got != tc.outputs {
				t.Errorf("%d outputs in both runs, want %d:\n%s", got, tc.outputs, out)
			}
		})
	}
}

// TestARunOnAPointerLockedByTheFileSourceIsRefusedBeforeItWrites: a
// pointer whose own lock another process holds (a program of its own
// reading the file with the file source takes no blackbox lock) refuses
// the run at once: exit 2 naming the pointer file, and no recording (it
// used to fail only once the engine ran, leaving a recording of nothing).
// TestASecondRunOnTheSameFilesIsRefused covers a pointer locked by
// another blackbox run.
func TestARunOnAPointerLockedByTheFileSourceIsRefusedBeforeItWrites(t *testing.T) {
	t.Chdir(t.TempDir())
	writeLines(t, "in.txt", "alice,1", "bob,2")
	if code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", "run1.csv"); code != 0 {
		t.Fatalf("first run: exit %d:\n%s", code, out)
	}
	f, err := os.OpenFile("in.txt.ptr", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { // as the file source locks it
		t.Fatal(err)
	}
	code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", "run2.csv")
	if code != cli.ExitFailure {
		t.Errorf("exit %d, want %d:\n%s", code, cli.ExitFailure, out)
	}
	if !strings.HasPrefix(out, "blackbox: in.txt.ptr: ") {
		t.Errorf("the error does not name in.txt.ptr:\n%s", out)
	}
	if _, err := os.Stat("run2.csv"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused run created run2.csv (%v)", err)
	}
}
