package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
)

// checkUnchanged fails t when dir's files differ from before (created,
// removed or changed), naming what.
func checkUnchanged(t *testing.T, what string, dir string, before map[string]string) {
	t.Helper()
	after := snapshot(t, dir)
	for name, sum := range before {
		if after[name] != sum {
			t.Errorf("%s changed or removed %s", what, name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s left %s behind", what, name)
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// runWithTimeout runs a command line that must end by itself; an old
// binary that tails its own pointer forever is stopped after a while.
func runWithTimeout(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return execute(t, ctx, args...)
}

// TestTwoFlagsNamingOneFileAreRefused: every pair of a run's paths is
// compared by file identity (the same inode, or the same cleaned absolute
// path), not as strings, before any work: refused with exit 2 naming both
// flags and the path, and no file is touched.
func TestTwoFlagsNamingOneFileAreRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeLines(t, "in.txt", "alice,1", "bob,2")
	for _, st := range []string{"r.db", "r.csv"} {
		if code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", st,
			"--read", "once-earliest", "--state", "s.json"); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	}
	if err := os.Mkdir("sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("in.txt", "link.txt"); err != nil {
		t.Fatal(err)
	}
	run := []string{"run", "--app", "ledger", "--input", "in.txt"}
	for _, tc := range []struct {
		args  []string
		flags []string // the two flags the error names
	}{
		{[]string{"--store", "new.db", "--pointer", "./in.txt"}, []string{"--input", "--pointer"}},
		{[]string{"--store", "r.db", "--pointer", "./r.db", "--force"}, []string{"--store", "--pointer"}},
		{[]string{"--store", "sub/../in.txt", "--force"}, []string{"--input", "--store"}},
		{[]string{"--store", "r.csv", "--status", "./r.csv", "--force"}, []string{"--store", "--status"}},
		{[]string{"--store", "new.db", "--out", "in.txt"}, []string{"--input", "--out"}},
		{[]string{"--store", "new.db", "--state", "s.json", "--pointer", "s.json"}, []string{"--pointer", "--state"}},
		{[]string{"--store", "new.db", "--out", "link.txt"}, []string{"--input", "--out"}},
		{[]string{"--store", "new.db", "--state", "sub/../new-state.json", "--out", "new-state.json"}, []string{"--state", "--out"}},
	} {
		before := snapshot(t, dir)
		args := append(append([]string{}, run...), tc.args...)
		code, out := runWithTimeout(t, args...)
		if code != cli.ExitFailure {
			t.Errorf("%q: exit %d, want %d:\n%s", tc.args, code, cli.ExitFailure, out)
		}
		if !strings.Contains(out, "name the same file") {
			t.Errorf("%q: got %s, want the two flags refused", tc.args, out)
		}
		for _, f := range tc.flags {
			if !strings.Contains(out, f+" ") {
				t.Errorf("%q: the error does not name %s:\n%s", tc.args, f, out)
			}
		}
		checkUnchanged(t, strings.Join(tc.args, " "), dir, before)
	}
}

// TestEveryOutputIsCheckedBeforeTheRun: an output that cannot be written
// (here: in /proc/self, where no file can be created, even by root) is
// refused with exit 2 before any work, naming the user's path: no
// recording is left behind (it used to leave one that verify called
// complete, and a bad --status failed only after the run).
func TestEveryOutputIsCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeLines(t, "in.txt", "alice,1", "bob,2")
	for _, flag := range []string{"--pointer", "--status", "--state", "--out"} {
		path := "/proc/self/blackbox-" + strings.TrimPrefix(flag, "--")
		before := snapshot(t, dir)
		code, out := runWithTimeout(t, "run", "--app", "ledger", "--input", "in.txt", "--store",
			"r-"+strings.TrimPrefix(flag, "--")+".db", flag, path)
		if code != cli.ExitFailure {
			t.Errorf("%s %s: exit %d, want %d:\n%s", flag, path, code, cli.ExitFailure, out)
		}
		if !strings.HasPrefix(out, "blackbox: "+path+": "+flag+": ") {
			t.Errorf("%s %s: the error does not name the path first:\n%s", flag, path, out)
		}
		checkUnchanged(t, flag, dir, before)
	}
}

// TestForceReplacesOnlyARecording: a store path holding a file that is not
// a recording is refused as "not a recording", with or without --force (it
// used to say "already holds a recording", and --force deleted any file);
// an empty file and a recording are replaced with --force.
func TestForceReplacesOnlyARecording(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeLines(t, "in.txt", "alice,1", "bob,2")
	if err := os.WriteFile("notes.csv", []byte("account,amount\nalice,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("garbage.db", []byte("SQLite format 3\x00 but not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for _, st := range []string{"notes.csv", "garbage.db"} {
		for _, force := range []bool{false, true} {
			args := []string{"run", "--app", "ledger", "--input", "in.txt", "--store", st, "--read", "once-earliest"}
			if force {
				args = append(args, "--force")
			}
			code, out := execute(t, context.Background(), args...)
			if code != cli.ExitFailure || strings.Contains(out, "already holds a recording") {
				t.Errorf("%q: exit %d, want %d refusing a file that is not a recording:\n%s", args, code, cli.ExitFailure, out)
			}
			checkUnchanged(t, strings.Join(args, " "), dir, before)
		}
	}
	if err := os.WriteFile("empty.db", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{"empty.db", "empty.db"} { // empty, then a recording
		if code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", st,
			"--read", "once-earliest", "--force"); code != 0 {
			t.Fatalf("--force over %s: exit %d:\n%s", st, code, out)
		}
	}
	if code, out := execute(t, context.Background(), "verify", "empty.db"); code != 0 {
		t.Errorf("verify: exit %d:\n%s", code, out)
	}
}

// holdApp is an app whose first event, in the whole process, signals
// started and waits for release: it holds a run open, with its files
// locked.
type holdApp struct {
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (h *holdApp) OnEvent(c *core.Cycle, ev any) error {
	h.once.Do(func() {
		close(h.started)
		<-h.release
	})
	c.Emit("out", ev)
	return nil
}

// TestASecondRunOnTheSameFilesIsRefused: while a run holds its files, a
// second run naming any of its outputs (state, out, pointer, store, status)
// is refused at once with exit 2 naming the file; --force does not remove
// the recording being written. The first run then ends complete.
func TestASecondRunOnTheSameFilesIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeLines(t, "in.txt", "alice,1", "bob,2")
	writeLines(t, "other.txt", "carol,3")
	h := &holdApp{started: make(chan struct{}), release: make(chan struct{})}
	apps := cli.WithApps(core.App{Name: "hold", New: func(map[string]string) (core.Processor, error) { return h, nil }})
	type result struct {
		code int
		out  string
	}
	first := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		code := newCLI(&out, apps).Execute(context.Background(), []string{"run", "--app", "hold", "--input", "in.txt",
			"--store", "a.csv", "--state", "state.json", "--out", "out.jsonl", "--status", "status.json"})
		first <- result{code, out.String()}
	}()
	select {
	case <-h.started:
	case r := <-first:
		t.Fatalf("the first run ended early: exit %d:\n%s", r.code, r.out)
	}
	released := false
	defer func() {
		if !released {
			close(h.release)
		}
	}()
	base := []string{"run", "--app", "hold", "--input", "other.txt"}
	for _, tc := range []struct {
		args []string
		file string
	}{
		{[]string{"--store", "b.csv", "--pointer", "b.ptr", "--state", "state.json"}, "state.json"},
		{[]string{"--store", "b.csv", "--pointer", "b.ptr", "--out", "./out.jsonl"}, "./out.jsonl"},
		{[]string{"--store", "b.csv", "--pointer", "in.txt.ptr"}, "in.txt.ptr"},
		{[]string{"--store", "a.csv", "--pointer", "b.ptr", "--force"}, "a.csv"},
		{[]string{"--store", "b.csv", "--pointer", "b.ptr", "--status", "status.json"}, "status.json"},
	} {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		code := newCLI(&out, apps).Execute(ctx, append(append([]string{}, base...), tc.args...))
		cancel()
		if code != cli.ExitFailure {
			t.Errorf("%q: exit %d, want %d:\n%s", tc.args, code, cli.ExitFailure, out.String())
		}
		if !strings.HasPrefix(out.String(), "blackbox: "+tc.file+": ") {
			t.Errorf("%q: the error does not name %s:\n%s", tc.args, tc.file, out.String())
		}
		if _, err := os.Stat("b.csv"); err == nil {
			t.Errorf("%q: the refused run created b.csv", tc.args)
			os.Remove("b.csv")
		}
	}
	if _, err := os.Stat("a.csv"); err != nil {
		t.Fatalf("the first run's recording: %v", err)
	}
	close(h.release)
	released = true
	r := <-first
	if r.code != 0 {
		t.Fatalf("the first run: exit %d:\n%s", r.code, r.out)
	}
	if code, out := execute(t, context.Background(), "verify", "a.csv"); code != 0 {
		t.Errorf("verify a.csv: exit %d:\n%s", code, out)
	}
	if n := countLines(t, "out.jsonl"); n != 2 {
		t.Errorf("out.jsonl holds %d lines, want 2", n)
	}
	// The locks went with the run.
	if locks, _ := filepath.Glob("*.blackbox-lock"); len(locks) > 0 {
		t.Errorf("lock files left: %v", locks)
	}
}
