// Package crashtest kills a recorded run K times, restarts it, and checks
// that nothing was lost or applied twice: the library of `blackbox
// crashtest`, callable from go test.
//
// Run generates ledger lines in Config.Dir, records the app over them
// cleanly (Config.Record, in process, or a child process), then runs
// "EXE run --read committed --follow ..." over the same input as a child
// process (Config.Exe: the blackbox binary, or any binary built with
// cli.New that knows the app), kills it with SIGKILL K times and restarts
// it, and compares the crashed runs with the clean one: the durable state,
// the --out lines, the recordings (verify) and the stitched diff. The
// checks are those `blackbox crashtest --help` lists.
package crashtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/replayer"
)

// Config is one crash test: the flags of `blackbox crashtest`. A plain
// value, only read by Run.
type Config struct {
	// App is the app to crash; the child runs it by App.Name. Its durable
	// state (apps.HasDurableState) and Key are read in this process.
	App core.App
	// Exe is the binary whose `run` command the crashed runs are (default:
	// this process's executable, os.Executable).
	Exe    string
	Lines  int    // ledger lines to generate, at least 2
	Kills  int    // kills, 0 or more
	Seed   uint64 // seed of the input and of the kill moments
	Dir    string // the directory to work in (created if missing)
	Format string // the recordings' format: "sqlite" (default) or "csv"
	// Ignore are the output keys left out of comparisons (clock readings).
	Ignore []string
	// KillAt is a kill point (RunKillPoints): kill there instead of after
	// output lines. "" kills after random output lines (once the run has
	// created its recording).
	KillAt  string
	Workers int // the crashed runs' workers (key-ordered); 1 or more
	// StateEvery and StateInterval are the state's batches: every run's
	// options state-every and state-interval, for an app with durable
	// state. 1 saves each line before it is committed.
	StateEvery    int
	StateInterval time.Duration
	// BatchSet says StateEvery or StateInterval was asked for: an app that
	// does not take them is a ConfigError.
	BatchSet bool
	// Record records a clean run in process; nil runs it as a child
	// process of Exe (exit 0: settled and lossless, its recording whole).
	Record func(ctx context.Context, r CleanRun) (CleanResult, error)
	// Progress, if set, shows what the test is doing.
	Progress Progress
	// Table, if set, receives the table of the kills and the verdict.
	Table io.Writer
}

// Progress shows a test's progress: Printf replaces the line shown, Done
// clears it.
type Progress interface {
	Printf(format string, args ...any)
	Done()
}

// CleanRun is a clean run for Config.Record: `run` with these flags
// (--read committed, --policy pause, --queue 1024).
type CleanRun struct {
	App, Input, Store, Format, Pointer, Out string
	State                                   string // "" for an app without durable state
	StateEvery                              int    // 0: the app's default
	StateInterval                           time.Duration
	Workers                                 int
	Order                                   engine.Order // "" on one worker
}

// CleanResult is what Config.Record reports of a clean run: one not
// settled and lossless, or whose recording broke (Recorded), fails the
// test.
type CleanResult struct {
	Settled, Lossless bool
	Recorded          error
}

// RunKillPoints are the points Config.KillAt accepts: those a recorded run
// reaches, its --out outbox's included. (convert and golden-update have
// tests of their own.)
var RunKillPoints = []string{killpoint.StateSaved, killpoint.RowsWritten, killpoint.StoreWrite, killpoint.PointerWritten,
	killpoint.OutMarked, killpoint.OutWrite}

// ConfigError is a Config the test cannot run (a usage error of `blackbox
// crashtest`); its text names the flag.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configf(format string, args ...any) error {
	return &ConfigError{fmt.Errorf(format, args...)}
}

// FileError is an I/O problem with a named file: "PATH: reason". Run's
// errors about the input, the state and the test's directory are one
// (errors.As).
type FileError = apps.FileError

// KillReport is one kill of a crash test. A plain value.
type KillReport struct {
	Run         int    `json:"run"`
	Store       string `json:"store"`
	AfterMs     int64  `json:"afterMs"`               // the run's lifetime when it was killed
	Target      int64  `json:"target"`                // the output line count (no KillAt, or an outbox point), or (another KillAt) the input lines past the pointer, the kill waited for
	Reached     bool   `json:"reached"`               // the run died at its target (false: it outlived the point, or was idle, and was killed)
	Idle        bool   `json:"idle,omitempty"`        // the run had nothing left to reach its target with (the input committed, every output in --out, or for state-saved every line applied, before it; for out-marked, only the batch the kill before interrupted): killed once it committed the input; no failure
	Outputs     int64  `json:"outputs"`               // output lines in the --out file after the kill
	Pointer     int64  `json:"pointer"`               // the committed pointer offset after the kill
	Applied     int64  `json:"applied"`               // the state's applied effects after the kill (-1: no state)
	Offset      int64  `json:"offset"`                // the state's offset after the kill (-1: no state)
	Duplicates  int    `json:"duplicates"`            // output lines written after the kill beyond the clean run's count of their output (0: exactly once)
	Lag         int64  `json:"lag"`                   // input lines the run processed (recorded) past the pointer: not committed
	Redelivered int64  `json:"redelivered"`           // input lines the next run delivered again (recorded by both)
	Problems    string `json:"problems"`              // what verify names in the killed recording ("no recording": NoRecording)
	Unexpected  bool   `json:"unexpected,omitempty"`  // a problem no kill explains
	NoRecording bool   `json:"noRecording,omitempty"` // killed before it created its recording (in its outbox's recovery, or before its first write): it recorded and committed nothing
}

// Report is a crash test's result, the JSON of `blackbox crashtest
// --json`. Filled by one goroutine; a plain value once returned.
type Report struct {
	Dir           string              `json:"dir"`
	Input         string              `json:"input"`
	Lines         int                 `json:"lines"`
	Postings      int64               `json:"postings"` // postings the ledger applies for the input
	KillAt        string              `json:"killAt,omitempty"`
	Workers       int                 `json:"workers"`         // the crashed runs' key-ordered workers
	StateEvery    int                 `json:"stateEvery"`      // the state's batch: lines per save at most
	StateInterval time.Duration       `json:"stateIntervalNs"` // the state's batch: how long a line waits for its save at most
	Ignore        []string            `json:"ignore"`          // output keys left out of the comparisons
	Kills         []KillReport        `json:"kills"`
	Last          string              `json:"last"`
	Clean         string              `json:"clean"`
	Crashed       *StateReport        `json:"crashed"`    // nil: the app exposes no durable state
	Expected      *StateReport        `json:"expected"`   // the clean run's state
	Outputs       int                 `json:"outputs"`    // lines in the crashed runs' --out file
	Want          int                 `json:"want"`       // lines in the clean run's --out file
	Missing       int                 `json:"missing"`    // clean outputs absent from the crashed runs' file
	Duplicates    int                 `json:"duplicates"` // extra lines in the crashed runs' file (beyond the clean run's count of their output)
	Unrecorded    int                 `json:"unrecorded"` // lines of the crashed runs' file that are no OUTPUT row of their recordings
	Diff          replayer.DiffCounts `json:"diff"`       // the stitched runs against the clean one
	Problems      []string            `json:"problems"`   // recording problems that should not be there
	Holds         bool                `json:"holds"`
	Failures      []string            `json:"failures"`
	Elapsed       time.Duration       `json:"elapsedNs"`
}

// StateReport is a core.DurableState as the report shows it. A plain value.
type StateReport struct {
	Applied int64 `json:"applied"`
	Epoch   int64 `json:"epoch"`
	Offset  int64 `json:"offset"`
}

// hasKey says app has a key for key-ordered workers with no option
// (core.App.KeyFunc): crashtest runs workers key-ordered.
func hasKey(app core.App) bool {
	key, err := app.KeyFunc(nil)
	return err == nil && key != nil
}

// check refuses a Config the test cannot run, before any work.
func (cfg *Config) check() error {
	switch {
	case cfg.Workers < 1:
		return configf("--workers must be at least 1, got %d", cfg.Workers)
	case cfg.Workers > 1 && !hasKey(cfg.App):
		return configf("--workers %d: app %s has no key function (crashtest runs workers key-ordered)", cfg.Workers, cfg.App.Name)
	case cfg.Lines < 2:
		return configf("--lines must be at least 2, got %d", cfg.Lines)
	case cfg.Kills < 0:
		return configf("--kills must not be negative, got %d", cfg.Kills)
	case cfg.StateEvery < 1:
		return configf("--state-every must be at least 1, got %d", cfg.StateEvery)
	case cfg.StateInterval <= 0:
		return configf("--state-interval must be positive, got %s", cfg.StateInterval)
	case cfg.KillAt != "" && !slices.Contains(RunKillPoints, cfg.KillAt):
		return configf("--kill-at %q: want one of %s", cfg.KillAt, strings.Join(RunKillPoints, ", "))
	case cfg.Format != formatSQLite && cfg.Format != formatCSV:
		return configf("unknown format %q (want csv or sqlite)", cfg.Format)
	}
	return nil
}

// The recording formats.
const (
	formatCSV    = "csv"
	formatSQLite = "sqlite"
)

// Run runs the test: set-up (the input, the clean run), the kill loop, the
// checks. The report says whether the guarantees held (Report.Holds) and
// why not (Report.Failures); an error is a test that could not run (a
// *ConfigError before any work, an I/O error (a *FileError naming the
// file), a child that failed).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	if cfg.Format == "" {
		cfg.Format = formatSQLite
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	p := cfg.Progress
	if p == nil {
		p = noProgress{}
	}
	defer p.Done()
	s, err := setUp(ctx, cfg, p)
	if err != nil {
		return nil, err
	}
	rep := &Report{Dir: cfg.Dir, Input: s.input, Lines: cfg.Lines, Postings: s.postings, KillAt: cfg.KillAt, Workers: max(1, cfg.Workers),
		StateEvery: cfg.StateEvery, StateInterval: cfg.StateInterval,
		Ignore: slices.Clone(cfg.Ignore), Clean: s.clean, Kills: []KillReport{}, Problems: []string{}, Failures: append([]string{}, s.failures...)}
	if cfg.Table != nil {
		how := "at random output lines"
		if cfg.KillAt != "" {
			how = "at random reaches of " + cfg.KillAt
		}
		fmt.Fprintf(cfg.Table, "crashtest: %s over %d lines (%d postings), %d kills %s, seed %d, in %s\n",
			cfg.App.Name, cfg.Lines, s.postings, cfg.Kills, how, cfg.Seed, cfg.Dir)
	}
	stores, bounds, err := s.killLoop(ctx, rep, p)
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx, rep, stores, bounds); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	p.Done()
	if cfg.Table != nil {
		rep.writeTable(cfg.Table)
	}
	return rep, nil
}

type noProgress struct{}

func (noProgress) Printf(string, ...any) {}
func (noProgress) Done()                 {}

// exe is the binary the crashed runs are.
func (cfg *Config) exe() (string, error) {
	if cfg.Exe != "" {
		return cfg.Exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("crashtest: finding this binary to run: %w", err)
	}
	return exe, nil
}

// errNotDir is a --dir that names a file.
var errNotDir = errors.New("is not a directory")
