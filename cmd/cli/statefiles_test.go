package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// ledgerInput appends n ledger lines (no transfers: with workers a
// transfer's credit lands in the debtor's worker state) over 16 accounts,
// from line from on, and returns each account's total.
func ledgerInput(t *testing.T, path string, from, n int, totals map[string]int64) {
	t.Helper()
	lines := make([]string, n)
	for i := range lines {
		acct, amount := fmt.Sprintf("acct-%02d", (from+i)%16), int64(from+i)
		lines[i] = fmt.Sprintf("%s,%d", acct, amount)
		totals[acct] += amount
	}
	writeLines(t, path, lines...)
}

// stateBalances sums the balances of a run's state files: FILE on one
// worker, FILE#w0 ... on several.
func stateBalances(t *testing.T, state string, workers int) (map[string]int64, int64) {
	t.Helper()
	sum, applied := map[string]int64{}, int64(0)
	paths := []string{state}
	if workers > 1 {
		paths = paths[:0]
		for w := range workers {
			paths = append(paths, core.WorkerStream(state, w))
		}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var st apps.LedgerState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for a, v := range st.Balances {
			sum[a] += v
		}
		applied += st.Applied
	}
	return sum, applied
}

// TestARestartWithOtherWorkersIsRefused: per-worker state is keyed by
// worker number (worker K's state holds the keys engine.WorkerOf gives it
// on N workers, and the last line it applied), so a restart on another
// count would apply a key's lines on a worker whose state does not hold
// them (8 then 3 workers printed wrong balances and, killed, never applied
// some lines; 1 then 4 left the lines applied in the single file behind),
// each run saying lossless. A restart whose --workers differ from what the
// existing state was written with (recorded in FILE#workers; FILE alone is
// a 1-worker state), or whose state files do not match the record (a
// FILE#wK beyond it, FILE beside it, FILE#wK with no record), is refused
// before any work: exit 2, naming the file and the layout, nothing
// written. The same workers again are accepted and apply each line once.
func TestARestartWithOtherWorkersIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    int                // the first run's workers
		prepare  func(t *testing.T) // changes to the state files before the restart
		then     int                // the restart's workers
		wantFile string             // the file the refusal names ("": accepted)
		check    func(t *testing.T, out string)
	}{
		{name: "8-then-3", first: 8, then: 3, wantFile: "s.json#workers"},
		{name: "3-then-8", first: 3, then: 8, wantFile: "s.json#workers"},
		{name: "1-then-4", first: 1, then: 4, wantFile: "s.json"},
		{name: "4-then-1", first: 4, then: 1, wantFile: "s.json#workers"},
		{name: "4-then-4-with-a-worker-beyond", first: 4, then: 4, wantFile: "s.json#w9",
			prepare: func(t *testing.T) { copyFile(t, "s.json#w0", "s.json#w9") }},
		{name: "4-then-4-with-a-single-state", first: 4, then: 4, wantFile: "s.json",
			prepare: func(t *testing.T) { copyFile(t, "s.json#w0", "s.json") }},
		{name: "4-then-4-without-the-record", first: 4, then: 4, wantFile: "s.json#w0",
			prepare: func(t *testing.T) {
				if err := os.Remove("s.json#workers"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "4-then-4", first: 4, then: 4},
		{name: "1-then-1", first: 1, then: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			totals := map[string]int64{}
			ledgerInput(t, "in.txt", 0, 40, totals)
			run := func(store string, workers int) (int, string) {
				return runWithTimeout(t, "run", "--app", "ledger", "--input", "in.txt", "--store", store,
					"--state", "s.json", "--workers", fmt.Sprint(workers))
			}
			if code, out := run("r1.csv", tc.first); code != 0 {
				t.Fatalf("the first run: exit %d:\n%s", code, out)
			}
			if tc.prepare != nil {
				tc.prepare(t)
			}
			ledgerInput(t, "in.txt", 40, 24, totals)
			before := snapshot(t, dir)
			code, out := run("r2.csv", tc.then)
			if tc.wantFile == "" {
				if code != 0 {
					t.Fatalf("the restart on the same workers: exit %d:\n%s", code, out)
				}
				got, applied := stateBalances(t, "s.json", tc.then)
				if !maps.Equal(got, totals) || applied != 64 {
					t.Errorf("the states hold %v, %d applied; want %v, 64 (each line once)", got, applied, totals)
				}
				return
			}
			if code != cli.ExitFailure {
				t.Fatalf("the restart on %d workers: exit %d, want %d:\n%s", tc.then, code, cli.ExitFailure, out)
			}
			if !strings.HasPrefix(out, "blackbox: "+tc.wantFile+": --state: ") || !strings.Contains(out, "worker") {
				t.Errorf("the refusal does not name %s and the workers first:\n%s", tc.wantFile, out)
			}
			checkUnchanged(t, "the refused restart", dir, before)
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// stateApp is an app taking option state, with no key: on several workers
// it runs --order none.
func stateApp() core.App {
	return core.App{Name: "keyless", New: func(opts map[string]string) (core.Processor, error) {
		return apps.NewLedger(apps.LedgerOptions{StatePath: opts["state"]})
	}}
}

// TestStateOnWorkersWithOrderNoneIsRefused: with --order none a line goes
// to the first idle worker, so a line delivered again after a crash may
// reach another worker than the one that applied it, whose positional
// state does not hold it (after one SIGKILL lines were applied twice, or
// skipped as applied and never applied). --state with --workers above 1
// and --order none (given, or the default of an app with no key) is
// refused before any work: exit 2 naming the state file, nothing
// written. On one worker the order means nothing and is accepted.
func TestStateOnWorkersWithOrderNoneIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ledgerInput(t, "in.txt", 0, 20, map[string]int64{})
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--app", "ledger", "--state", "s.json", "--workers", "4", "--order", "none"}, cli.ExitFailure},
		{[]string{"--app", "ledger", "--option", "state=s.json", "--workers", "4", "--order", "none"}, cli.ExitFailure},
		{[]string{"--app", "keyless", "--state", "s.json", "--workers", "2"}, cli.ExitFailure},
		{[]string{"--app", "ledger", "--state", "s.json", "--workers", "1", "--order", "none"}, 0},
	} {
		before := snapshot(t, dir)
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		args := append([]string{"run", "--input", "in.txt", "--store", "r.csv"}, tc.args...)
		code := newCLI(&out, cli.WithApps(stateApp())).Execute(ctx, args)
		cancel()
		if code != tc.want {
			t.Errorf("%q: exit %d, want %d:\n%s", tc.args, code, tc.want, out.String())
		}
		if tc.want == 0 {
			continue
		}
		if !strings.HasPrefix(out.String(), "blackbox: s.json: --state: ") || !strings.Contains(out.String(), "--order key") {
			t.Errorf("%q: the refusal does not name s.json and --order key first:\n%s", tc.args, out.String())
		}
		checkUnchanged(t, strings.Join(tc.args, " "), dir, before)
	}
}

// TestTheWorkersStateFilesAreCheckedLikeTheOtherPaths: the state files a
// run on workers writes (FILE#wK) and its record of them (FILE#workers)
// are compared by identity with every other path of the run, before any
// work; the names FILE#w<K> and FILE#workers are the state's, on any count
// of workers. --pointer s.json#w1 used to be accepted (the next run
// applied every line again), and --status s.json#w0 overwrote a worker's
// state.
func TestTheWorkersStateFilesAreCheckedLikeTheOtherPaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ledgerInput(t, "in.txt", 0, 20, map[string]int64{})
	if err := os.Mkdir("sub", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--state", "s.json", "--workers", "4", "--pointer", "s.json#w1"},
		{"--state", "s.json", "--workers", "4", "--status", "s.json#w0"},
		{"--state", "s.json", "--workers", "4", "--out", "sub/../s.json#w3"},
		{"--state", "s.json", "--workers", "4", "--status", "s.json#workers"},
		{"--state", "s.json", "--workers", "4", "--pointer", "s.json#w7"},
		{"--state", "s.json", "--workers", "1", "--pointer", "s.json#w1"},
		{"--option", "state=s.json", "--workers", "4", "--pointer", "s.json#w1"},
		{"--state", "./s.json", "--workers", "2", "--out", "s.json#w1"},
	} {
		before := snapshot(t, dir)
		full := append([]string{"run", "--app", "ledger", "--input", "in.txt", "--store", "r.csv"}, args...)
		code, out := runWithTimeout(t, full...)
		if code != cli.ExitFailure {
			t.Errorf("%q: exit %d, want %d:\n%s", args, code, cli.ExitFailure, out)
		}
		if !strings.Contains(out, "--state") {
			t.Errorf("%q: the refusal does not name --state:\n%s", args, out)
		}
		checkUnchanged(t, strings.Join(args, " "), dir, before)
	}
	// An existing worker state is compared by identity: a symbolic link
	// to it names it.
	copyFile(t, "in.txt", "in2.txt")
	if code, out := runWithTimeout(t, "run", "--app", "ledger", "--input", "in2.txt", "--store", "w.csv", "--pointer", "w.ptr",
		"--state", "s.json", "--workers", "4"); code != 0 {
		t.Fatalf("run on 4 workers: exit %d:\n%s", code, out)
	}
	ws, _ := filepath.Glob("s.json#w[0-3]")
	if len(ws) == 0 {
		t.Fatal("the run on 4 workers left no worker state")
	}
	if err := os.Symlink(ws[0], "link.ptr"); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	code, out := runWithTimeout(t, "run", "--app", "ledger", "--input", "in.txt", "--store", "r.csv", "--state", "s.json",
		"--workers", "4", "--pointer", "link.ptr")
	if code != cli.ExitFailure || !strings.Contains(out, "name the same file") {
		t.Errorf("--pointer link.ptr (to %s): exit %d, want %d naming the same file:\n%s", ws[0], code, cli.ExitFailure, out)
	}
	checkUnchanged(t, "--pointer link.ptr", dir, before)
}

// TestARunOnAnotherRunsWorkerStateFilesIsRefused: a run on workers locks
// its workers' state files and their record with its other outputs: while
// it runs, a second run naming one of them (as its --status, --out,
// --pointer, or a --state on another count) is refused at once, exit 2
// naming the file; it used to write over a worker's state.
func TestARunOnAnotherRunsWorkerStateFilesIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeLines(t, "in.txt", "alice,1", "bob,2")
	writeLines(t, "other.txt", "carol,3")
	h := &heldApp{started: make(chan struct{}), release: make(chan struct{})}
	hold := core.App{Name: "hold", New: func(map[string]string) (core.Processor, error) { return h, nil },
		Key: func(item any) string { return fmt.Sprint(item) }}
	opts := cli.WithApps(hold)
	type result struct {
		code int
		out  string
	}
	first := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		code := newCLI(&out, opts).Execute(context.Background(), []string{"run", "--app", "hold", "--input", "in.txt",
			"--store", "a.csv", "--state", "state.json", "--workers", "2"})
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
	base := []string{"run", "--app", "ledger", "--input", "other.txt", "--store", "b.csv", "--pointer", "b.ptr"}
	for _, tc := range []struct {
		args []string
		file string
	}{
		{[]string{"--status", "state.json#w1"}, "state.json#w1"},
		{[]string{"--out", "state.json#w0"}, "state.json#w0"},
		{[]string{"--status", "state.json#workers"}, "state.json#workers"},
		{[]string{"--state", "state.json", "--workers", "3"}, "state.json"},
	} {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		code := newCLI(&out, opts).Execute(ctx, append(append([]string{}, base...), tc.args...))
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
	close(h.release)
	released = true
	if r := <-first; r.code != 0 {
		t.Fatalf("the first run: exit %d:\n%s", r.code, r.out)
	}
	if locks, _ := filepath.Glob("*.blackbox-lock"); len(locks) > 0 {
		t.Errorf("lock files left: %v", locks)
	}
}

// heldApp is holdApp safe for several workers: the first event of any
// worker signals started, and every event waits for release.
type heldApp struct {
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (h *heldApp) OnEvent(c *core.Cycle, ev any) error {
	h.once.Do(func() { close(h.started) })
	<-h.release
	c.Emit("out", ev)
	return nil
}
