package crashtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// setup is a crash test's input, files and clean run: everything the kill
// loop and the checks read. Not modified after setUp; the checks fill the
// report, on one goroutine.
type setup struct {
	cfg        Config
	app        core.App
	durable    bool // the app keeps durable state (apps.HasDurableState)
	batches    bool // the app takes the options state-every and state-interval: the runs are given them
	exe        string
	ext        string
	input      string
	inputSize  int64
	postings   int64
	pointer    string // the crashed runs' files
	state      string
	outFile    string
	clean      string // the clean run's files
	cleanOut   string
	cleanSt    string
	cleanW     string // with workers: the clean run on as many workers, and its state files (FILE#wK)
	cleanWSt   string
	lineEnds   []int64 // with workers and durable state: each input line's end offset and worker
	lineWorker []int
	want       []string // the clean run's outputs
	failures   []string // problems of the clean run itself
}

func (s *setup) path(name string) string { return filepath.Join(s.cfg.Dir, name) }

// runArgs are the arguments of a crashed run recording to storePath.
func (s *setup) runArgs(storePath string, follow bool) []string {
	a := []string{"run", "--app", s.app.Name, "--input", s.input, "--store", storePath, "--format", s.cfg.Format,
		"--read", "committed", "--pointer", s.pointer, "--out", s.outFile}
	if s.durable {
		a = append(a, "--state", s.state)
	}
	if s.batches {
		a = append(a, "--state-every", strconv.Itoa(s.cfg.StateEvery), "--state-interval", s.cfg.StateInterval.String())
	}
	if s.cfg.Workers > 1 {
		a = append(a, "--workers", strconv.Itoa(s.cfg.Workers), "--order", string(engine.OrderKey))
	}
	if follow {
		a = append(a, "--follow")
	}
	return a
}

// setUp checks the directory, removes what a previous test left, writes
// the input and runs it cleanly.
func setUp(ctx context.Context, cfg Config, p Progress) (*setup, error) {
	s := &setup{cfg: cfg, app: cfg.App, ext: ".db"}
	var err error
	if s.exe, err = cfg.exe(); err != nil {
		return nil, err
	}
	if err := s.prepareDir(); err != nil {
		return nil, err
	}
	if err := s.probeApp(); err != nil {
		return nil, err
	}
	if cfg.Format == formatCSV {
		s.ext = ".csv"
	}
	s.input = s.path("input.txt")
	// With workers the input has no transfer lines: a transfer touches two
	// accounts, and the ledger's outputs must depend on one key's state
	// for the runs to compare with a 1-worker run.
	if s.postings, err = apps.WriteLedgerLines(s.input, cfg.Lines, cfg.Seed, false, cfg.Workers <= 1); err != nil {
		return nil, err
	}
	fi, err := os.Stat(s.input)
	if err != nil {
		return nil, fileErr(s.input, err)
	}
	s.inputSize = fi.Size()
	s.pointer, s.state, s.outFile = s.path("crash-input.ptr"), s.path("crash-state.json"), s.path("crash-out.jsonl")
	s.clean, s.cleanOut, s.cleanSt = s.path("clean"+s.ext), s.path("clean-out.jsonl"), s.path("clean-state.json")
	s.cleanW, s.cleanWSt = s.path("clean-w"+s.ext), s.path("clean-w-state.json")
	if err := s.cleanRuns(ctx, p); err != nil {
		return nil, err
	}
	return s, nil
}

// prepareDir creates the directory and removes what crashtest owns in it.
func (s *setup) prepareDir() error {
	dir := s.cfg.Dir
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return &FileError{Path: dir, Err: errNotDir}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fileErr(dir, err)
	}
	for _, pat := range []string{"input.txt", "*.ptr", "crash-*", ".crash-*", "clean*", ".clean*", "run-*", ".run-*"} {
		old, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, p := range old {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fileErr(p, err)
			}
		}
	}
	return nil
}

// probeApp finds out whether the app keeps durable state and takes the
// state's batches.
func (s *setup) probeApp() error {
	cfg := s.cfg
	probe := s.path(".crash-probe-state.json")
	var err error
	if s.durable, err = apps.HasDurableState(s.app, probe); err != nil {
		return err
	}
	if cfg.KillAt == killpoint.StateSaved && !s.durable {
		return configf("--kill-at %s: app %s keeps no durable state (it takes no option state, or is not core.Durable)", cfg.KillAt, s.app.Name)
	}
	if !s.durable {
		return nil
	}
	opts := apps.StateBatchOptions(cfg.StateEvery, cfg.StateInterval)
	opts[apps.OptionState] = probe
	_, err = s.app.Build(opts)
	switch {
	case err == nil:
		s.batches = true
	case !errors.Is(err, core.ErrOption):
		return err
	case cfg.BatchSet:
		return configf("--state-every, --state-interval: app %s does not take them: %v", s.app.Name, err)
	}
	return nil
}

// cleanRuns records the clean run (and, with workers, the clean run on as
// many workers) and reads what the checks compare with.
func (s *setup) cleanRuns(ctx context.Context, p Progress) error {
	cfg := s.cfg
	p.Printf("the clean run: %s", s.clean)
	r := CleanRun{App: s.app.Name, Input: s.input, Store: s.clean, Format: cfg.Format, Pointer: s.path("clean-input.ptr"), Out: s.cleanOut, Workers: 1}
	if s.durable {
		r.State = s.cleanSt
	}
	if s.batches {
		r.StateEvery, r.StateInterval = cfg.StateEvery, cfg.StateInterval
	}
	if err := s.cleanRun(ctx, r, "the clean run"); err != nil {
		return err
	}
	var err error
	if s.want, err = readOutputs(s.cleanOut, cfg.Ignore); err != nil {
		return err
	}
	if (cfg.KillAt == "" || outPoint(cfg.KillAt)) && len(s.want) < 2 {
		return configf("the clean run of %s over %d lines emitted %d outputs: too few to place kills after output lines",
			s.app.Name, cfg.Lines, len(s.want))
	}
	if cfg.Workers > 1 && s.durable {
		if s.lineEnds, s.lineWorker, err = s.inputLines(); err != nil {
			return err
		}
	}
	if cfg.Workers <= 1 {
		return nil
	}
	// The state to compare with is a clean run's on as many workers (each
	// worker's state holds its keys'); the outputs and the diff compare
	// with the clean run on one.
	p.Printf("the clean run on %d workers: %s", cfg.Workers, s.cleanW)
	r.Store, r.Pointer, r.Out, r.Workers, r.Order = s.cleanW, s.path("clean-w-input.ptr"), s.path("clean-w-out.jsonl"), cfg.Workers, engine.OrderKey
	if s.durable {
		r.State = s.cleanWSt
	}
	return s.cleanRun(ctx, r, fmt.Sprintf("the clean run on %d workers", cfg.Workers))
}

// cleanRun records a clean run of r; one that is not settled and
// lossless, or whose recording broke, is a failure of the test, named what.
func (s *setup) cleanRun(ctx context.Context, r CleanRun, what string) error {
	record := s.cfg.Record
	if record == nil {
		record = s.childRecord
	}
	res, err := record(ctx, r)
	if err != nil {
		return err
	}
	if res.Recorded != nil || !res.Settled || !res.Lossless {
		s.failures = append(s.failures, fmt.Sprintf("%s is not settled and lossless (recording: %v)", what, res.Recorded))
	}
	return nil
}

// childRecord records r as a child process of the binary: exit 0 is
// settled and lossless with a whole recording, exit 3 is not (the log
// beside the recording says why), any other exit an error.
func (s *setup) childRecord(ctx context.Context, r CleanRun) (CleanResult, error) {
	args := []string{"run", "--app", r.App, "--input", r.Input, "--store", r.Store, "--format", r.Format,
		"--read", "committed", "--pointer", r.Pointer, "--out", r.Out, "--policy", "pause", "--queue", "1024"}
	if r.State != "" {
		args = append(args, "--state", r.State)
	}
	if r.StateEvery > 0 {
		args = append(args, "--state-every", strconv.Itoa(r.StateEvery), "--state-interval", r.StateInterval.String())
	}
	if r.Workers > 1 {
		args = append(args, "--workers", strconv.Itoa(r.Workers), "--order", string(r.Order))
	}
	logPath := r.Store + ".log"
	code, err := runChild(ctx, s.exe, args, logPath)
	switch {
	case err != nil:
		return CleanResult{}, err
	case code == 0:
		return CleanResult{Settled: true, Lossless: true}, nil
	case code == 3:
		return CleanResult{Recorded: fmt.Errorf("crashtest: %s exited 3 (see %s)", r.Store, logPath)}, nil
	}
	b, _ := os.ReadFile(logPath)
	return CleanResult{}, fmt.Errorf("crashtest: the clean run exited %d: %s", code, b)
}
