package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// --state-every and --state-interval: a positive count and duration, and
// only with --state; anything else is a usage error (exit 2), and so is
// setting one both as a flag and as --option.
func TestABadStateBatchFlagIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, "a,1")
	base := []string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, "r.csv")}
	state := []string{"--state", filepath.Join(dir, "st.json")}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"every without state", []string{"--state-every", "10"}, "need --state"},
		{"interval without state", []string{"--state-interval", "1s"}, "need --state"},
		{"every 0", append(state, "--state-every", "0"), "--state-every must be at least 1"},
		{"interval 0", append(state, "--state-interval", "0s"), "--state-interval must be positive"},
		{"flag and option", append(state, "--state-every", "5", "--option", "state-every=7"), "--state-every and --option state-every"},
		{"state flag and option", append(state, "--option", "state=other.json"), "--state and --option state=... both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := execute(t, context.Background(), append(append([]string{}, base...), tt.args...)...)
			if code != 2 || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, output:\n%s\nwant exit 2 and %q", code, out, tt.want)
			}
		})
	}
}

// A run with --state and batches of 7 lines ends settled (every line
// committed) with every line in the state file: the last batch, not full,
// is saved within the interval, and its lines committed.
func TestARunWithBatchedStateSavesEveryLineAndCommitsThem(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	var lines []string
	for i := range 100 {
		lines = append(lines, "acct-"+string(rune('a'+i%5))+",2")
	}
	writeLines(t, in, lines...)
	st := filepath.Join(dir, "st.json")
	code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, "r.csv"),
		"--state", st, "--state-every", "7", "--state-interval", "20ms")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	b, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	var s apps.LedgerState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	if s.Applied != 100 || s.Offset != fi.Size() || s.Balances["acct-a"] != 40 {
		t.Errorf("saved state: applied %d, offset %d, acct-a %d; want 100, %d, 40", s.Applied, s.Offset, s.Balances["acct-a"], fi.Size())
	}
	if !strings.Contains(out, "settled: yes") {
		t.Errorf("the run did not settle (every line committed):\n%s", out)
	}
}

// byAccount sorts postings ("account,balance") by account, each
// account's in the order given.
func byAccount(postings []string) []string {
	s := slices.Clone(postings)
	slices.SortStableFunc(s, func(a, b string) int {
		a, _, _ = strings.Cut(a, ",")
		b, _, _ = strings.Cut(b, ",")
		return strings.Compare(a, b)
	})
	return s
}

// faultyLedger is the ledger app, whose processors call fault once, before
// the run's n-th event (counted across its workers): a fault injected at a
// known point of the run. (It was injected at the n-th --out line, which
// was written as each output was emitted; --out is now written a batch at
// a time once its lines are committed, which may be after the run's last
// save.)
func faultyLedger(n int64, fault func()) core.App {
	app := apps.LedgerApp()
	var seen atomic.Int64
	build := app.New
	app.New = func(options map[string]string) (core.Processor, error) {
		p, err := build(options)
		if err != nil {
			return nil, err
		}
		l, ok := p.(*apps.Ledger)
		if !ok {
			return nil, fmt.Errorf("the ledger app built a %T", p)
		}
		return faultAt{l, func() {
			if seen.Add(1) == n {
				fault()
			}
		}}, nil
	}
	return app
}

// faultAt is a ledger that calls before ahead of each event. It keeps the
// ledger's every other method (its state, its batched saves, its timers).
type faultAt struct {
	*apps.Ledger
	before func()
}

func (f faultAt) OnEvent(c *core.Cycle, ev any) error {
	f.before()
	return f.Ledger.OnEvent(c, ev)
}

// A run whose state cannot be saved (a directory takes the state file's
// place while it runs: every save fails) stops by itself, where it used to
// wait forever for a commit that could not come: exit 3 naming the state
// file, its recording unfinished, nothing committed that the state does not
// hold. Once the fault is gone, a restart delivers the lines not saved
// again and the ledger applies each line exactly once, and --out holds
// each line's posting once (the restart's outbox delivers first what the
// stopped run recorded, and none of it again). On two workers
// (each saving FILE#wK) one worker's file failing stops the run the same
// way. Saving every line (--state-every 1) it stops the same way: its
// completions used to be skipped after a failed save, and the lines
// committed though the state file lacked them (torture seed
// 1796193496913655314).
func TestARunWhoseStateCannotBeSavedStopsNamingItAndARestartAppliesEachLineOnce(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name    string
		args    []string
		workers int
		broken  string // the state file the fault breaks
	}{
		{"one worker", nil, 1, "st.json"},
		{"one worker saving every line", []string{"--state-every", "1"}, 1, "st.json"},
		{"two workers", []string{"--workers", "2", "--order", "key"}, 2, "st.json#w0"},
		{"two workers saving every line", []string{"--workers", "2", "--order", "key", "--state-every", "1"}, 2, "st.json#w0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.txt")
			want := map[string]int64{}
			var lines, postings []string
			for i := range n {
				acct := fmt.Sprintf("acct-%d", i%5)
				lines = append(lines, fmt.Sprintf("%s,%d", acct, i+1))
				want[acct] += int64(i + 1)
				postings = append(postings, fmt.Sprintf("%s,%d", acct, want[acct]))
			}
			writeLines(t, in, lines...)
			state, broken := filepath.Join(dir, "st.json"), filepath.Join(dir, tc.broken)
			args := func(store string) []string {
				return append([]string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, store),
					"--state", state, "--state-every", "5", "--state-interval", "10ms", "--out", filepath.Join(dir, "out.jsonl"),
					"--status", filepath.Join(dir, "status.json")}, tc.args...)
			}
			// The fault, before the 10th line: the state file (the last
			// one saved) is put aside and a directory takes its place.
			fault := func() {
				for {
					if err := os.Rename(broken, broken+".aside"); err != nil && !errors.Is(err, fs.ErrNotExist) {
						t.Error(err)
						return
					}
					if err := os.Mkdir(broken, 0o755); err == nil || !errors.Is(err, fs.ErrExist) {
						return // made, or an error no save explains
					} // a save landed in between: put it aside too
				}
			}
			var o bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code := newCLI(&o, cli.WithApps(faultyLedger(10, fault))).Execute(ctx, args("r1.csv"))
			if ctx.Err() != nil {
				t.Fatalf("the run did not stop by itself within a minute (exit %d):\n%s", code, o.String())
			}
			if code != cli.ExitIncomplete || !strings.Contains(o.String(), "the state could not be saved") || !strings.Contains(o.String(), broken) {
				t.Fatalf("exit %d, want %d naming %s:\n%s", code, cli.ExitIncomplete, broken, o.String())
			}
			if code, out := execute(t, context.Background(), "verify", filepath.Join(dir, "r1.csv")); code != cli.ExitIncomplete {
				t.Errorf("verify of the stopped run's recording: exit %d, want %d (unfinished):\n%s", code, cli.ExitIncomplete, out)
			}
			if tc.workers == 1 { // one state: the lines committed are the lines it holds at most
				var st struct {
					Feeds []struct{ Acknowledged int64 }
				}
				b, err := os.ReadFile(filepath.Join(dir, "status.json"))
				if err == nil {
					err = json.Unmarshal(b, &st)
				}
				if err != nil {
					t.Fatal(err)
				}
				var held int64
				if _, err := os.Stat(broken + ".aside"); err == nil {
					held = readLedgerState(t, broken+".aside").Applied
				}
				if got := st.Feeds[0].Acknowledged; got > held {
					t.Errorf("%d lines committed, the saved state holds %d", got, held)
				}
			}

			// The fault is gone: the state file is back, and the restart
			// applies each line once.
			if err := os.Remove(broken); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(broken+".aside", broken); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			if code, out := execute(t, context.Background(), args("r2.csv")...); code != 0 {
				t.Fatalf("the restart: exit %d, want 0:\n%s", code, out)
			}
			got, applied := map[string]int64{}, int64(0)
			states := []string{state}
			if tc.workers > 1 {
				states = []string{state + "#w0", state + "#w1"}
			}
			for _, p := range states {
				s := readLedgerState(t, p)
				applied += s.Applied
				for k, v := range s.Balances {
					got[k] += v
				}
			}
			if !maps.Equal(got, want) || applied != n {
				t.Errorf("after the restart: balances %v, applied %d; want %v, %d (each line applied once)", got, applied, want, n)
			}
			// --out holds each line's posting once, in order: of the
			// lines, or of each account's on workers.
			outs, _ := outOnce(t, filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "r1.csv"), filepath.Join(dir, "r2.csv"))
			if tc.workers > 1 {
				postings, outs = byAccount(postings), byAccount(outs)
			}
			if diff := cmp.Diff(postings, outs); diff != "" {
				t.Errorf("--out after the restart (-want +got):\n%s", diff)
			}
		})
	}
}
