package crashtest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/crashtest"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// childEnv marks a run of this test binary as the blackbox binary: the
// crashed runs crashtest starts (Config.Exe, by default this executable).
const childEnv = "BLACKBOX_CRASHTEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Setenv(childEnv, "1") // inherited by the children crashtest starts
	os.Exit(m.Run())
}

// config is a crash test of app in dir with the flags' defaults.
func config(dir string, app core.App, lines, kills int) crashtest.Config {
	return crashtest.Config{App: app, Dir: dir, Lines: lines, Kills: kills, Seed: 1, Format: "csv",
		Ignore: []string{"at"}, Workers: 1, StateEvery: 1, StateInterval: apps.DefaultSaveInterval}
}

// run runs cfg and fails the test on an error; it logs the report when
// the test failed.
func run(t *testing.T, cfg crashtest.Config) *crashtest.Report {
	t.Helper()
	rep, err := crashtest.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("crashtest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := json.MarshalIndent(rep, "", "  ")
			t.Logf("crashtest %+v:\n%s", cfg, b)
		}
	})
	if !rep.Holds {
		t.Errorf("does not hold; failures:\n  %s", strings.Join(rep.Failures[:min(20, len(rep.Failures))], "\n  "))
	}
	return rep
}

// checkNothingLost: the crashed state applied every posting once, the
// crashed runs' stitched recordings equal the clean run's, and their --out
// file holds every output of the clean run exactly once (checkOutOnce).
func checkNothingLost(t *testing.T, rep *crashtest.Report) {
	t.Helper()
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
	checkOutOnce(t, rep)
}

// checkOutOnce reads the --out files of the crashed runs and of the clean
// one in rep.Dir (not trusting crashtest's own count): the crashed runs'
// holds the clean run's outputs, each exactly once (compared without
// "at", the clock), and each account's outputs in the clean run's order;
// crashtest counted no line extra, missing or unrecorded.
func checkOutOnce(t *testing.T, rep *crashtest.Report) {
	t.Helper()
	if rep.Missing != 0 || rep.Duplicates != 0 || rep.Unrecorded != 0 || rep.Outputs != rep.Want {
		t.Errorf("--out: %d lines, clean %d; missing %d, extra %d, in no recording %d; want the clean run's lines, each once",
			rep.Outputs, rep.Want, rep.Missing, rep.Duplicates, rep.Unrecorded)
	}
	crashed, clean := accountOutputs(t, filepath.Join(rep.Dir, "crash-out.jsonl")), accountOutputs(t, filepath.Join(rep.Dir, "clean-out.jsonl"))
	if len(clean) == 0 {
		t.Fatal("the clean run emitted nothing")
	}
	for acct, want := range clean {
		if got := crashed[acct]; !slices.Equal(got, want) {
			t.Errorf("account %q: the crashed runs' --out holds %d outputs, the clean run's %d; want the same, in the same order:\ncrashed %q\nclean   %q",
				acct, len(got), len(want), got, want)
		}
	}
	for acct, got := range crashed {
		if clean[acct] == nil {
			t.Errorf("account %q: %d outputs in the crashed runs' --out, none in the clean run's", acct, len(got))
		}
	}
}

// accountOutputs reads a ledger's --out file: each account's outputs in
// the file's order, without "at" (the clock).
func accountOutputs(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string][]string{}
	for l := range strings.Lines(string(b)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		delete(m, "at")
		acct, _ := m["account"].(string)
		o, _ := json.Marshal(m)
		outs[acct] = append(outs[acct], string(o))
	}
	return outs
}

// outPoint reports whether a kill point is one of the outbox's delivery.
func outPoint(point string) bool {
	return point == killpoint.OutMarked || point == killpoint.OutWrite
}

// TestEveryRunKillPointLosesNothingAndAppliesOnce kills a recorded ledger
// run 5 times at each point of its write path (internal/killpoint; its
// --out outbox's points are
// TestOutHoldsEachOutputExactlyOnceAfterAnyNumberOfSIGKILLsAtAnyKillPoint's),
// in both formats, restarts it, and checks what
// crashtest checks: balances and the applied count equal a clean run's,
// every input in some recording with the clean run's outputs (the
// stitched diff is empty), every output in --out exactly once, and verify
// naming each killed recording unfinished (and torn, for a kill inside a
// CSV write). The empty point kills after random output lines, as
// crashtest does by default.
func TestEveryRunKillPointLosesNothingAndAppliesOnce(t *testing.T) {
	// 600 lines: the ten subtests take about a minute on two busy cores
	// (83 s at 1,000 lines under a load of 12). blackbox crashtest
	// --kill-at P --kills 50 --lines 3000 is the full measure.
	lines := 600
	if testing.Short() {
		lines = 200
	}
	// The outbox's points are TestOutHoldsEachOutputExactlyOnce...'s, with
	// and without workers.
	points := []string{""}
	for _, p := range crashtest.RunKillPoints {
		if !outPoint(p) {
			points = append(points, p)
		}
	}
	for _, point := range points {
		for _, format := range []string{"sqlite", "csv"} {
			name := point
			if name == "" {
				name = "output-lines"
			}
			t.Run(name+"/"+format, func(t *testing.T) {
				t.Parallel()
				cfg := config(t.TempDir(), apps.LedgerApp(), lines, 5)
				cfg.Format, cfg.KillAt = format, point
				rep := run(t, cfg)
				if len(rep.Kills) != 5 {
					t.Fatalf("%d kills, want 5", len(rep.Kills))
				}
				checkNothingLost(t, rep)
				if len(rep.Problems) != 0 {
					t.Errorf("unexpected recording problems: %q", rep.Problems)
				}
				for _, k := range rep.Kills {
					if !k.Reached {
						t.Errorf("kill %d: the run outlived reach %d of %q", k.Run, k.Target, point)
					}
					if k.Duplicates != 0 {
						t.Errorf("kill %d: %d outputs emitted again, want none", k.Run, k.Duplicates)
					}
					if k.Problems == "none" || k.Unexpected || k.NoRecording {
						t.Errorf("kill %d: verify names %q in the killed recording, want it unfinished (or torn)", k.Run, k.Problems)
					}
				}
			})
		}
	}
}

// TestOutHoldsEachOutputExactlyOnceAfterAnyNumberOfSIGKILLsAtAnyKillPoint:
// the --out outbox's guarantee (issue 26). The ledger is killed with
// SIGKILL 2 to 4 times (seeded kill moments) at every kill point of a
// recorded run (after random output lines, and at each point of
// RunKillPoints: the state save, the rows written, inside a store write,
// the pointer written, the outbox's batch marked before its delivery, and
// inside the --out file's write, which tears its last line), with one
// worker and with four key-ordered ones, recording to CSV and to SQLite,
// and restarted after each kill: the crashed runs' --out file holds every
// output of the clean run exactly once, each account's in the clean run's
// order, and each line is an OUTPUT row of a recording (crashtest's check,
// and the test's own reading of the two files); the state, the stitched
// diff and the recordings are crashtest's checks. A run killed in its
// outbox's recovery (which delivers what the runs before it recorded,
// before the run creates its recording) recorded nothing: crashtest says so
// (the kill's NoRecording) and checks the pointer did not move.
func TestOutHoldsEachOutputExactlyOnceAfterAnyNumberOfSIGKILLsAtAnyKillPoint(t *testing.T) {
	// 28 subtests of 4 to 7 runs each: 120 lines keep them at about 15
	// seconds on two cores (a few minutes with -race, whose children are
	// race binaries too).
	lines := 120
	if testing.Short() {
		lines = 60
	}
	i := 0
	for _, point := range append([]string{""}, crashtest.RunKillPoints...) {
		for _, workers := range []int{1, 4} {
			for _, format := range []string{"csv", "sqlite"} {
				i++
				kills, seed := 2+i%3, uint64(i)
				name := point
				if name == "" {
					name = "output-lines"
				}
				t.Run(fmt.Sprintf("%s/workers=%d/%s", name, workers, format), func(t *testing.T) {
					t.Parallel()
					cfg := config(t.TempDir(), apps.LedgerApp(), lines, kills)
					cfg.Format, cfg.KillAt, cfg.Workers, cfg.Seed = format, point, workers, seed
					rep := run(t, cfg)
					if len(rep.Kills) != kills {
						t.Fatalf("%d kills, want %d", len(rep.Kills), kills)
					}
					checkNothingLost(t, rep)
					reached := 0
					for _, k := range rep.Kills {
						switch {
						case k.Reached:
							reached++
						case !k.Idle:
							t.Errorf("kill %d: the run outlived reach %d of %q", k.Run, k.Target, point)
						}
						if k.Duplicates != 0 {
							t.Errorf("kill %d: %d lines after it repeat an output, want none", k.Run, k.Duplicates)
						}
						if k.NoRecording && !outPoint(point) {
							t.Errorf("kill %d: killed at %q before the run created its recording", k.Run, point)
						}
					}
					if reached == 0 {
						t.Errorf("no kill reached %q: the case tests nothing", point)
					}
				})
			}
		}
	}
}

// TestEightKeyOrderedWorkersSurviveTenSIGKILLs: the ledger on 8
// key-ordered workers, killed with SIGKILL 10 times at random output lines
// and restarted: every worker's balances and applied count equal a clean
// 8-worker run's (every line applied exactly once), the pointer is never
// ahead of the contiguous prefix of applied lines after any kill (crashtest
// checks it), every output is in --out exactly once, and the stitched runs
// diff the same as a clean run on one worker.
func TestEightKeyOrderedWorkersSurviveTenSIGKILLs(t *testing.T) {
	t.Parallel()
	lines := 1200
	if testing.Short() {
		lines = 500
	}
	cfg := config(t.TempDir(), apps.LedgerApp(), lines, 10)
	cfg.Workers = 8
	rep := run(t, cfg)
	if len(rep.Kills) != 10 {
		t.Fatalf("%d kills, want 10", len(rep.Kills))
	}
	checkNothingLost(t, rep)
}

// TestBatchedStateSavesStayExactlyOnceAcrossSIGKILLs: the ledger saving its
// state every 20 lines (or 50ms), killed with SIGKILL 5 times at random
// output lines and restarted, on one worker and on four: every line is
// applied exactly once (the balances and applied count equal a clean
// run's), nothing is lost, the stitched runs diff the same as a clean run;
// each restart delivered again at most what the killed run processed past
// its pointer (0 <= again <= lag), and --out holds every output exactly
// once: the outputs of the lines a restart applies again (its state did
// not hold them) are not delivered twice.
func TestBatchedStateSavesStayExactlyOnceAcrossSIGKILLs(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run("workers="+string(rune('0'+workers)), func(t *testing.T) {
			t.Parallel()
			lines := 800
			if testing.Short() {
				lines = 300
			}
			cfg := config(t.TempDir(), apps.LedgerApp(), lines, 5)
			cfg.Workers, cfg.StateEvery, cfg.StateInterval, cfg.BatchSet = workers, 20, 50*time.Millisecond, true
			rep := run(t, cfg)
			if rep.StateEvery != 20 || len(rep.Kills) != 5 {
				t.Fatalf("state every %d, %d kills; want 20, 5", rep.StateEvery, len(rep.Kills))
			}
			checkNothingLost(t, rep)
			for _, k := range rep.Kills {
				if k.Redelivered < 0 || k.Redelivered > k.Lag {
					t.Errorf("kill %d: delivered %d lines again, want 0 to the lag %d", k.Run, k.Redelivered, k.Lag)
				}
			}
		})
	}
}

// TestCrashtestHoldsWithBatchedSavesAndOnceTheInputIsDone: crashtest
// reports what its checks found. With the state saved in batches
// (StateEvery 10) a run reaches state-saved once per batch, not once per
// line: each KillAt kill still dies at the save that holds its cut line,
// or a later one. Once an earlier run committed the whole input (or
// applied it whole, for state-saved; or, killing at output lines, every
// output is in --out), a restart has nothing left to reach its point with:
// it is killed once it has committed the input, reported idle, and is no
// failure. The first used to say "does not hold" while every check held;
// the last killed the run before it created its recording, and crashtest
// failed (it could not read it).
func TestCrashtestHoldsWithBatchedSavesAndOnceTheInputIsDone(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		killAt                     string
		every, lines, kills, works int
		wantIdle                   bool // some kills find the input done
	}{
		{"state-saved/every-10", killpoint.StateSaved, 10, 300, 3, 1, false},
		{"state-saved/workers-4/every-10", killpoint.StateSaved, 10, 300, 3, 4, false},
		{"state-saved/done", killpoint.StateSaved, 1, 4, 7, 1, true},
		{"pointer-written/done", killpoint.PointerWritten, 1, 4, 7, 1, true},
		{"output-lines/every-20/done", "", 20, 20, 4, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config(t.TempDir(), apps.LedgerApp(), tc.lines, tc.kills)
			cfg.Seed, cfg.KillAt, cfg.StateEvery, cfg.Workers = 3, tc.killAt, tc.every, tc.works
			cfg.BatchSet = tc.every != 1
			rep := run(t, cfg)
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
		})
	}
}

// TestAConfigTheTestCannotRunIsRefusedBeforeAnyWork: each bad Config is a
// *crashtest.ConfigError, naming what it cannot run.
func TestAConfigTheTestCannotRunIsRefusedBeforeAnyWork(t *testing.T) {
	tests := []struct {
		name string
		edit func(*crashtest.Config)
	}{
		{"no workers", func(c *crashtest.Config) { c.Workers = 0 }},
		{"workers without a key", func(c *crashtest.Config) { c.Workers, c.App.KeyFor, c.App.Key = 2, nil, nil }},
		{"one line", func(c *crashtest.Config) { c.Lines = 1 }},
		{"negative kills", func(c *crashtest.Config) { c.Kills = -1 }},
		{"state-every 0", func(c *crashtest.Config) { c.StateEvery = 0 }},
		{"no state-interval", func(c *crashtest.Config) { c.StateInterval = 0 }},
		{"an unknown kill point", func(c *crashtest.Config) { c.KillAt = "nowhere" }},
		{"an unknown format", func(c *crashtest.Config) { c.Format = "xml" }},
		{"state-saved without state", func(c *crashtest.Config) { c.App, c.KillAt = apps.AlertsApp(), killpoint.StateSaved }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config(t.TempDir()+"/dir", apps.LedgerApp(), 10, 1)
			tt.edit(&cfg)
			_, err := crashtest.Run(t.Context(), cfg)
			var ce *crashtest.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *crashtest.ConfigError", err)
			}
		})
	}
}
