package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// crashConfig is one crash test. A plain value.
type crashConfig struct {
	app     string
	lines   int
	kills   int
	seed    uint64
	dir     string
	format  string
	ignore  []string // output keys left out of comparisons (clock readings)
	killAt  string   // a killpoint name: kill there instead of after output lines
	workers int      // the crashed runs' workers (key-ordered); 1 or more
	// The state's batches (--state-every, --state-interval): every run's
	// options state-every and state-interval, for an app with durable
	// state. 1 saves each line before it is committed.
	stateEvery    int
	stateInterval time.Duration
	batchSet      bool // --state-every or --state-interval given: an app that does not take them is a usage error
}

// runKillPoints are the points --kill-at accepts: those a recorded run
// reaches. (convert and golden-update have tests of their own.)
var runKillPoints = []string{killpoint.StateSaved, killpoint.RowsWritten, killpoint.StoreWrite, killpoint.PointerWritten}

// killReport is one kill of a crash test. A plain value.
type killReport struct {
	Run         int    `json:"run"`
	Store       string `json:"store"`
	AfterMs     int64  `json:"afterMs"`              // the run's lifetime when it was killed
	Target      int64  `json:"target"`               // the output line count, or (--kill-at) the input lines past the pointer, the kill waited for
	Reached     bool   `json:"reached"`              // the run died at its target (false: it outlived the point, or was idle, and was killed)
	Idle        bool   `json:"idle,omitempty"`       // --kill-at: the run had nothing left to reach its point with (the input committed, or for state-saved applied, whole before it): killed once it committed the input; no failure
	Outputs     int64  `json:"outputs"`              // output lines in the --out file after the kill
	Pointer     int64  `json:"pointer"`              // the committed pointer offset after the kill
	Applied     int64  `json:"applied"`              // the state's applied effects after the kill (-1: no state)
	Offset      int64  `json:"offset"`               // the state's offset after the kill (-1: no state)
	Duplicates  int    `json:"duplicates"`           // output lines the next run emitted again
	Lag         int64  `json:"lag"`                  // input lines the run processed (recorded) past the pointer: not committed
	Redelivered int64  `json:"redelivered"`          // input lines the next run delivered again (recorded by both)
	Problems    string `json:"problems"`             // what verify names in the killed recording
	Unexpected  bool   `json:"unexpected,omitempty"` // a problem no kill explains
}

// crashReport is the JSON of `blackbox crashtest --json`. Filled by one
// goroutine; a plain value once returned.
type crashReport struct {
	Dir           string              `json:"dir"`
	Input         string              `json:"input"`
	Lines         int                 `json:"lines"`
	Postings      int64               `json:"postings"` // postings the ledger applies for the input
	KillAt        string              `json:"killAt,omitempty"`
	Workers       int                 `json:"workers"`         // the crashed runs' key-ordered workers
	StateEvery    int                 `json:"stateEvery"`      // the state's batch: lines per save at most
	StateInterval time.Duration       `json:"stateIntervalNs"` // the state's batch: how long a line waits for its save at most
	Ignore        []string            `json:"ignore"`          // output keys left out of the comparisons
	Kills         []killReport        `json:"kills"`
	Last          string              `json:"last"`
	Clean         string              `json:"clean"`
	Crashed       *stateReport        `json:"crashed"`    // nil: the app exposes no durable state
	Expected      *stateReport        `json:"expected"`   // the clean run's state
	Outputs       int                 `json:"outputs"`    // lines in the crashed runs' --out file
	Want          int                 `json:"want"`       // lines in the clean run's --out file
	Missing       int                 `json:"missing"`    // clean outputs absent from the crashed runs' file
	Duplicates    int                 `json:"duplicates"` // extra lines in the crashed runs' file
	Diff          replayer.DiffCounts `json:"diff"`       // the stitched runs against the clean one
	Problems      []string            `json:"problems"`   // recording problems that should not be there
	Holds         bool                `json:"holds"`
	Failures      []string            `json:"failures"`
	Elapsed       time.Duration       `json:"elapsedNs"`
}

// stateReport is a core.DurableState as the report shows it. A plain value.
type stateReport struct {
	Applied int64 `json:"applied"`
	Epoch   int64 `json:"epoch"`
	Offset  int64 `json:"offset"`
}

func (c *CLI) crashtestCmd() *cobra.Command {
	var (
		cfg    crashConfig
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "crashtest",
		Short: "Kill a recorded run K times, restart it, and check nothing was lost or applied twice",
		Long: `Generate N ledger lines in DIR/input.txt and run the app over them cleanly
(a fresh pointer and state, recording to DIR/clean.db). Then run "blackbox run
--read committed --follow --state DIR/crash-state.json --out DIR/crash-out.jsonl"
over the same input as a child process (this same binary), recording run K to
DIR/run-K.db. Kill it with SIGKILL K times at random moments (after a random
number of output lines, seeded by --seed) and restart it each time; the last
restart runs without --follow and ends once settled. A restart with nothing
left to do (the input committed, or every output emitted) is killed once it
has committed the input: an idle kill, shown "idle". Then check:

  - for an app that exposes its durable state (the ledger): the crashed state
    equals the clean one (effects applied exactly once, the same balances
    and offset);
  - every output of the clean run is in the crashed runs' --out file (the
    --ignore keys aside), and the only extra lines are the re-emitted outputs
    of the delivery each kill interrupted (at most one delivery per kill)
    and, with --state-every N > 1 (the state saved in batches), of the lines
    the restart delivered again because the last save did not hold them and
    of the batch of rows (at most 64 lines per worker) the kill cut;
    for an app without durable state, which emits again whatever a restart
    delivers again, explain's answers account for every extra line: the
    outputs the recordings show emitted again for an input, and each killed
    run's output lines with no row (the live outputs of the batch of rows
    the kill cut, at most that batch's outputs);
  - each restart delivered again (column "again", JSON "redelivered": its
    recorded inputs that an earlier run recorded) at most the lines
    processed before the kill but not committed (column "lag": the inputs
    the runs so far recorded past the pointer);
  - the killed runs' recordings stitched with the last one show no
    difference from the clean recording (every input in some recording, the
    same outputs): "blackbox diff" of the two sides;
  - verify names each killed run's recording unfinished (and torn, for a
    kill inside a CSV write), nothing else; the last and the clean
    recordings are complete.

crashtest owns DIR/input.txt, DIR/*.ptr, DIR/crash-*, DIR/clean*, DIR/run-*
(and the hidden temporary files a killed run leaves beside them): it removes
them first. It prints a table of the kills and the verdict.

Exit: 0 the guarantees held; 1 they did not; 2 a usage or I/O error.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			app, err := c.app(cfg.app)
			if err != nil {
				return err
			}
			switch {
			case cfg.workers < 1:
				return usagef("--workers must be at least 1, got %d", cfg.workers)
			case cfg.workers > 1 && app.Key == nil:
				return usagef("--workers %d: app %s has no key function (crashtest runs workers key-ordered)", cfg.workers, cfg.app)
			case cfg.lines < 2:
				return usagef("--lines must be at least 2, got %d", cfg.lines)
			case cfg.kills < 0:
				return usagef("--kills must not be negative, got %d", cfg.kills)
			case cfg.stateEvery < 1:
				return usagef("--state-every must be at least 1, got %d", cfg.stateEvery)
			case cfg.stateInterval <= 0:
				return usagef("--state-interval must be positive, got %s", cfg.stateInterval)
			case cfg.killAt != "" && !slices.Contains(runKillPoints, cfg.killAt):
				return usagef("--kill-at %q: want one of %s", cfg.killAt, strings.Join(runKillPoints, ", "))
			}
			cfg.batchSet = cmd.Flags().Changed("state-every") || cmd.Flags().Changed("state-interval")
			f, err := formatOf("", cfg.format)
			if err != nil {
				return err
			}
			cfg.format = f
			rep, err := c.crashtest(cmd.Context(), cfg, cmd.OutOrStdout(), !asJSON)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			}
			if !rep.Holds {
				return exit(ExitDifferent, nil)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.app, "app", apps.LedgerName, "the app to crash")
	fl.IntVar(&cfg.lines, "lines", 5000, "how many ledger lines to generate")
	fl.IntVar(&cfg.kills, "kills", 5, "how many times to kill the run")
	fl.Uint64Var(&cfg.seed, "seed", 1, "seed of the input and of the kill moments")
	fl.StringVar(&cfg.dir, "dir", "crashtest-out", "the directory to work in (created if missing)")
	fl.StringVar(&cfg.format, "format", "sqlite", "the recordings' format: sqlite or csv")
	fl.StringSliceVar(&cfg.ignore, "ignore", []string{"at"}, "output JSON keys left out of every comparison (clock readings)")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON instead of the table")
	fl.IntVar(&cfg.stateEvery, "state-every", 1, "the runs save the app's state at least every `N` lines (run --state-every; 1: each line, before it is committed)")
	fl.DurationVar(&cfg.stateInterval, "state-interval", apps.DefaultSaveInterval, "the runs save lines processed since the last save within this `DURATION` (run --state-interval)")
	fl.IntVar(&cfg.workers, "workers", 1, "run the crashed runs on `N` key-ordered workers (an input without transfers; compared with a clean run on one worker and one on N)")
	// Tests only: kill each run at the N-th reach of a named point of the
	// write path (internal/killpoint), N random.
	fl.StringVar(&cfg.killAt, "kill-at", "", "kill each run at a random reach of this point ("+strings.Join(runKillPoints, ", ")+")")
	_ = fl.MarkHidden("kill-at")
	return cmd
}

// crashSetup is a crash test's input, files and clean run: everything the
// kill loop and the checks read. Not modified after crashSetUp; the checks
// fill the report, on one goroutine.
type crashSetup struct {
	cfg        crashConfig
	app        core.App
	durable    bool // the app keeps durable state (hasDurableState)
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
	perInput   int      // the most outputs one input emitted in the clean run
	failures   []string // problems of the clean run itself
}

func (s *crashSetup) path(name string) string { return filepath.Join(s.cfg.dir, name) }

// runArgs are the arguments of a crashed run recording to storePath.
func (s *crashSetup) runArgs(storePath string, follow bool) []string {
	a := []string{"run", "--app", s.cfg.app, "--input", s.input, "--store", storePath, "--format", s.cfg.format,
		"--read", "committed", "--pointer", s.pointer, "--out", s.outFile}
	if s.durable {
		a = append(a, "--state", s.state)
	}
	if s.batches {
		a = append(a, "--state-every", strconv.Itoa(s.cfg.stateEvery), "--state-interval", s.cfg.stateInterval.String())
	}
	if s.cfg.workers > 1 {
		a = append(a, "--workers", strconv.Itoa(s.cfg.workers), "--order", string(engine.OrderKey))
	}
	if follow {
		a = append(a, "--follow")
	}
	return a
}

// crashtest runs the test: set-up, the kill loop, the checks; table, if
// set, prints the kills and the verdict.
func (c *CLI) crashtest(ctx context.Context, cfg crashConfig, out io.Writer, table bool) (*crashReport, error) {
	start := time.Now()
	p := c.progress()
	defer p.Done()
	s, err := c.crashSetUp(ctx, cfg, p)
	if err != nil {
		return nil, err
	}
	rep := &crashReport{Dir: cfg.dir, Input: s.input, Lines: cfg.lines, Postings: s.postings, KillAt: cfg.killAt, Workers: max(1, cfg.workers),
		StateEvery: cfg.stateEvery, StateInterval: cfg.stateInterval,
		Ignore: slices.Clone(cfg.ignore), Clean: s.clean, Kills: []killReport{}, Problems: []string{}, Failures: append([]string{}, s.failures...)}
	if table {
		how := "at random output lines"
		if cfg.killAt != "" {
			how = "at random reaches of " + cfg.killAt
		}
		fmt.Fprintf(out, "crashtest: %s over %d lines (%d postings), %d kills %s, seed %d, in %s\n",
			cfg.app, cfg.lines, s.postings, cfg.kills, how, cfg.seed, cfg.dir)
	}
	stores, bounds, err := c.killLoop(ctx, s, rep, p)
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx, rep, stores, bounds); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	p.Done()
	if table {
		rep.writeTable(out, stores)
	}
	return rep, nil
}

// crashSetUp checks the directory, removes what a previous test left,
// writes the input and runs it cleanly.
func (c *CLI) crashSetUp(ctx context.Context, cfg crashConfig, p *progress) (*crashSetup, error) {
	app, err := c.app(cfg.app)
	if err != nil {
		return nil, err
	}
	s := &crashSetup{cfg: cfg, app: app, ext: ".db"}
	if s.exe, err = os.Executable(); err != nil {
		return nil, fmt.Errorf("crashtest: finding this binary to run: %w", err)
	}
	if fi, err := os.Stat(cfg.dir); err == nil && !fi.IsDir() {
		return nil, &fileError{cfg.dir, errors.New("is not a directory")}
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return nil, &fileError{cfg.dir, unwrapPathError(err)}
	}
	for _, pat := range []string{"input.txt", "*.ptr", "crash-*", ".crash-*", "clean*", ".clean*", "run-*"} {
		old, _ := filepath.Glob(filepath.Join(cfg.dir, pat))
		for _, p := range old {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, &fileError{p, unwrapPathError(err)}
			}
		}
	}
	if s.durable, err = hasDurableState(app, s.path(".crash-probe-state.json")); err != nil {
		return nil, err
	}
	if cfg.killAt == killpoint.StateSaved && !s.durable {
		return nil, usagef("--kill-at %s: app %s keeps no durable state (it takes no option state, or is not core.Durable)", cfg.killAt, cfg.app)
	}
	if s.durable {
		rc := recordConfig{state: s.path(".crash-probe-state.json"), stateEvery: cfg.stateEvery, stateInterval: cfg.stateInterval}
		opts := stateBatchOptions(rc)
		opts[stateOption] = rc.state
		_, err := app.Build(opts)
		switch {
		case err == nil:
			s.batches = true
		case !errors.Is(err, core.ErrOption):
			return nil, err
		case cfg.batchSet:
			return nil, usagef("--state-every, --state-interval: app %s does not take them: %v", cfg.app, err)
		}
	}
	if cfg.format == formatCSV {
		s.ext = ".csv"
	}
	s.input = s.path("input.txt")
	// With workers the input has no transfer lines: a transfer touches two
	// accounts, and the ledger's outputs must depend on one key's state
	// for the runs to compare with a 1-worker run.
	if s.postings, err = ledgerLinesOpts(s.input, cfg.lines, cfg.seed, false, cfg.workers <= 1); err != nil {
		return nil, err
	}
	fi, err := os.Stat(s.input)
	if err != nil {
		return nil, &fileError{s.input, unwrapPathError(err)}
	}
	s.inputSize = fi.Size()
	s.pointer, s.state, s.outFile = s.path("crash-input.ptr"), s.path("crash-state.json"), s.path("crash-out.jsonl")
	s.clean, s.cleanOut, s.cleanSt = s.path("clean"+s.ext), s.path("clean-out.jsonl"), s.path("clean-state.json")
	s.cleanW, s.cleanWSt = s.path("clean-w"+s.ext), s.path("clean-w-state.json")

	p.Printf("the clean run: %s", s.clean)
	rc := recordConfig{app: cfg.app, input: s.input, store: s.clean, format: cfg.format,
		read: filesource.Committed, pointer: s.path("clean-input.ptr"), out: s.cleanOut, policy: engine.Pause(), queue: 1024}
	if s.durable {
		rc.state = s.cleanSt
	}
	if s.batches {
		rc.stateEvery, rc.stateInterval = cfg.stateEvery, cfg.stateInterval
	}
	if err := s.cleanRun(ctx, c, rc, "the clean run"); err != nil {
		return nil, err
	}
	if s.want, err = readOutputs(s.cleanOut, cfg.ignore); err != nil {
		return nil, err
	}
	if cfg.killAt == "" && len(s.want) < 2 {
		return nil, usagef("the clean run of %s over %d lines emitted %d outputs: too few to place kills after output lines",
			cfg.app, cfg.lines, len(s.want))
	}
	if s.perInput, err = maxOutputsPerInput(s.clean); err != nil {
		return nil, err
	}
	if cfg.workers > 1 && s.durable {
		if s.lineEnds, s.lineWorker, err = s.inputLines(); err != nil {
			return nil, err
		}
	}
	if cfg.workers > 1 {
		// The state to compare with is a clean run's on as many workers
		// (each worker's state holds its keys'); the outputs and the diff
		// compare with the clean run on one.
		p.Printf("the clean run on %d workers: %s", cfg.workers, s.cleanW)
		rc.store, rc.pointer, rc.out, rc.workers, rc.order = s.cleanW, s.path("clean-w-input.ptr"), s.path("clean-w-out.jsonl"), cfg.workers, engine.OrderKey
		if s.durable {
			rc.state = s.cleanWSt
		}
		if err := s.cleanRun(ctx, c, rc, fmt.Sprintf("the clean run on %d workers", cfg.workers)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// cleanRun records a clean run of rc; one that is not settled and
// lossless, or whose recording broke, is a failure of the test, named what.
func (s *crashSetup) cleanRun(ctx context.Context, c *CLI, rc recordConfig, what string) error {
	res, err := c.record(ctx, rc)
	if err != nil {
		return err
	}
	if res.Recorded != nil || !res.Status.Settled || !res.Status.Lossless {
		s.failures = append(s.failures, fmt.Sprintf("%s is not settled and lossless (recording: %v)", what, res.Recorded))
	}
	return nil
}

// maxOutputsPerInput is the most OUTPUT rows one input (or timer) has in
// a recording: how many lines one interrupted delivery may re-emit.
func maxOutputsPerInput(path string) (int, error) {
	r, _, err := openStore(path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	most := 0
	for e, err := range r.Rows() {
		if err != nil {
			return 0, storeErr(path, err)
		}
		switch e.Kind {
		case store.KindIndexed, store.KindInline, store.KindTimer:
			most = max(most, int(e.N))
		}
	}
	return most, nil
}

// check compares the crashed runs with the clean one and fills rep's
// verdict: the state, the outputs, the recordings, the stitched diff.
func (s *crashSetup) check(ctx context.Context, rep *crashReport, stores []string, bounds []int64) error {
	if err := s.checkState(rep); err != nil {
		return err
	}
	if err := s.checkRedelivered(rep, stores); err != nil {
		return err
	}
	if err := s.checkOutputs(rep, bounds); err != nil {
		return err
	}
	if !s.durable && s.cfg.workers <= 1 {
		if err := s.checkExtrasExplained(rep, stores, bounds); err != nil {
			return err
		}
	}
	s.checkRecordings(rep, stores)
	if err := s.checkDiff(ctx, rep, stores); err != nil {
		return err
	}
	if len(rep.Problems) > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d unexpected recording problems", len(rep.Problems)))
	}
	rep.Holds = len(rep.Failures) == 0
	return nil
}

// checkState: the crashed state equals the clean one, for an app that
// exposes its durable state.
func (s *crashSetup) checkState(rep *crashReport) error {
	if !s.durable {
		return nil
	}
	if s.cfg.workers > 1 {
		return s.checkWorkerStates(rep)
	}
	crashed, err := durableState(s.app, s.state)
	if err != nil {
		return err
	}
	clean, err := durableState(s.app, s.cleanSt)
	if err != nil {
		return err
	}
	rep.Crashed, rep.Expected = newStateReport(crashed), newStateReport(clean)
	if crashed.Applied != clean.Applied {
		rep.Failures = append(rep.Failures, fmt.Sprintf("effects applied: crashed %d, clean %d (each input exactly once)",
			crashed.Applied, clean.Applied))
	}
	if rep.Crashed.Offset != rep.Expected.Offset { // each pointer has its own epoch
		rep.Failures = append(rep.Failures, fmt.Sprintf("last input applied: crashed at offset %d, clean at %d",
			rep.Crashed.Offset, rep.Expected.Offset))
	}
	if crashed.Effects != clean.Effects {
		rep.Failures = append(rep.Failures, fmt.Sprintf("the crashed state's effects differ from the clean run's (%s, %s)", s.state, s.cleanSt))
	}
	return nil
}

func newStateReport(d core.DurableState) *stateReport {
	return &stateReport{Applied: d.Applied, Epoch: d.Epoch, Offset: d.Position.Offset}
}

// checkOutputs: every clean output present, the extras only re-emissions
// of one interrupted delivery per kill.
func (s *crashSetup) checkOutputs(rep *crashReport, bounds []int64) error {
	got, err := readOutputs(s.outFile, s.cfg.ignore)
	if err != nil {
		return err
	}
	rep.Outputs, rep.Want = len(got), len(s.want)
	have := map[string]int{}
	for _, o := range got {
		have[o]++
	}
	for _, o := range s.want {
		if have[o] == 0 {
			rep.Missing++
			continue
		}
		have[o]--
	}
	if rep.Missing > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d outputs of the clean run are missing from %s", rep.Missing, s.outFile))
	}
	bounds = append(bounds, int64(len(got)))
	// An app with durable state skips what it applied: a kill re-emits at
	// most the delivery it interrupted, and, saving in batches, the
	// outputs of the lines its last save did not cover, which the restart
	// delivers again (at most the kill's Redelivered), and those of the
	// batch of rows the kill cut (at most core.MaxBatch per worker). One
	// without re-emits every output of the deliveries the pointer had not
	// committed.
	most := make([]int, len(rep.Kills))
	for i, k := range rep.Kills {
		switch {
		case !s.durable:
			most[i] = -1
		case s.cfg.stateEvery > 1:
			// Saving in batches, the ledger's completion is a
			// BatchCompletion: its lines are written in batches of up to
			// core.MaxBatch per worker, and a kill can cut a whole batch
			// whose outputs the live sink already had.
			most[i] = s.perInput * (int(k.Redelivered) + s.cfg.workers*core.MaxBatch)
		default:
			most[i] = s.perInput * s.cfg.workers
		}
	}
	if s.cfg.workers > 1 {
		return s.checkWorkerOutputs(rep, got, bounds, most)
	}
	dups, bound := 0, 0
	for i := range rep.Kills {
		d := reemitted(got, bounds, i, most[i])
		rep.Kills[i].Duplicates = d
		dups += d
		bound += most[i]
	}
	rep.Duplicates = len(got) - len(s.want) + rep.Missing
	switch {
	case !s.durable && s.cfg.workers <= 1:
		// Re-delivered past the commit, a stateless app emits again all it
		// emitted: checkExtrasExplained accounts for every extra line.
	case s.durable && s.cfg.stateEvery > 1:
		// A restart killed while it re-emits a batch leaves the rest to the
		// next one: the re-emissions need not follow each kill whole.
		if rep.Duplicates > bound {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%d extra output lines, more than the %d the kills may re-emit (the outputs of the lines each restart delivered again, and of the batch of rows each kill cut)",
				rep.Duplicates, bound))
		}
	case rep.Duplicates != dups:
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d extra output lines, but only %d are re-emissions of an interrupted delivery",
			rep.Duplicates, dups))
	}
	return nil
}

// checkExtrasExplained accounts, for an app without durable state (which
// emits again whatever a restart delivers again), for every extra line of
// the --out file with explain's answers (incident.Explain over the killed
// runs and the last): the outputs the recordings show emitted again for an
// input (answer 6), and, per killed run, its --out lines that its
// recording holds no row for: the live outputs of the batch whose rows the
// kill cut, at most the outputs of the batch maybe in flight (answer 2).
func (s *crashSetup) checkExtrasExplained(rep *crashReport, stores []string, bounds []int64) error {
	rs, err := openStores(strings.Join(stores, ","))
	if err != nil {
		return err
	}
	defer closeAll(rs)
	recs := make([]incident.Recording, len(rs))
	for i, r := range rs {
		recs[i] = incident.Recording{File: stores[i], Reader: r}
	}
	f, err := incident.Explain(recs, incident.Options{})
	if err != nil {
		return fmt.Errorf("crashtest: explain: %w", err)
	}
	var dups int64
	maybe := map[int]int64{} // run -> outputs of its batch maybe in flight
	for _, a := range f.Answers {
		dups += int64(len(a.Duplicates))
		for _, c := range a.Crashes {
			maybe[c.Run] += c.MaybeInFlightOutputs
		}
	}
	var live, before int64
	for i := range rep.Kills {
		run := i + 1
		unrecorded := bounds[i] - before - f.Runs[i].Counts[string(store.KindOutput)]
		if unrecorded < 0 || unrecorded > maybe[run] {
			rep.Failures = append(rep.Failures, fmt.Sprintf("run %d: %d --out lines with no OUTPUT row, want 0 to the %d outputs of the batch it may have had in flight (explain)",
				run, unrecorded, maybe[run]))
		}
		live += max(0, unrecorded)
		before = bounds[i]
	}
	if got := dups + live; int64(rep.Duplicates) != got {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d extra output lines, but explain accounts for %d: %d outputs emitted again for an input in the recordings, %d live outputs of batches the kills cut",
			rep.Duplicates, got, dups, live))
	}
	return nil
}

// checkRecordings: each killed recording is unfinished (and, killed inside
// a write, torn, with the complete rows of that write orphaned) and nothing
// else; the last and the clean ones are complete. (A run killed in its
// first write leaves an empty file, no recording: crashtest's kills never
// fall there, as the first write holds no input and its points are armed at
// an input line or an output line.)
func (s *crashSetup) checkRecordings(rep *crashReport, stores []string) {
	for i, path := range append(slices.Clone(stores), s.clean) {
		killed := i < len(rep.Kills)
		ps, err := verifyFile(path)
		if err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			continue
		}
		if !killed {
			for _, p := range ps {
				rep.Problems = append(rep.Problems, problemText(path, p))
			}
			continue
		}
		k := &rep.Kills[i]
		k.Problems = countKinds(ps)
		if k.Problems == "" {
			k.Problems = "none"
		}
		kinds := map[store.ProblemKind]bool{}
		for _, p := range ps {
			kinds[p.Kind] = true
		}
		if !kinds[store.ProblemUnfinished] {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: a killed run's recording is not named unfinished", path))
		}
		for _, p := range ps {
			switch {
			case p.Kind == store.ProblemUnfinished, p.Kind == store.ProblemTorn:
			case p.Kind == store.ProblemOrphan && kinds[store.ProblemTorn]:
			default:
				k.Unexpected = true
				rep.Problems = append(rep.Problems, problemText(path, p))
			}
		}
	}
}

// checkDiff: the stitched runs show no difference from the clean one.
func (s *crashSetup) checkDiff(ctx context.Context, rep *crashReport, stores []string) error {
	a, err := openStores(strings.Join(stores, ","))
	if err != nil {
		return err
	}
	defer closeAll(a)
	b, err := openStores(s.clean)
	if err != nil {
		return err
	}
	defer closeAll(b)
	d, err := replayer.Diff(ctx, a, b, replayer.DiffOptions{Ignore: s.cfg.ignore})
	if err != nil {
		return fmt.Errorf("crashtest: diff: %w", err)
	}
	for _, pd := range d.Processors {
		rep.Diff.OnlyA += pd.Counts.OnlyA
		rep.Diff.OnlyB += pd.Counts.OnlyB
		rep.Diff.Different += pd.Counts.Different
		rep.Diff.Twice += pd.Counts.Twice
		rep.Diff.DuplicateOutputs += pd.Counts.DuplicateOutputs
		for _, r := range pd.OnlyB {
			rep.Failures = append(rep.Failures, fmt.Sprintf("input at offset %d (%q) is in no recording of the crashed runs", r.Offset, r.Input))
		}
		for _, r := range pd.Different {
			rep.Failures = append(rep.Failures, fmt.Sprintf("input at offset %d (%q): the crashed runs' outputs differ from the clean run's:\n%s",
				r.Offset, r.Input, strings.TrimRight(r.Diff, "\n")))
		}
	}
	if !d.Same {
		rep.Failures = append(rep.Failures, fmt.Sprintf("the stitched diff with the clean run is not empty: %d inputs only in the crashed runs, %d only in the clean run, %d with different outputs",
			rep.Diff.OnlyA, rep.Diff.OnlyB, rep.Diff.Different))
	}
	return nil
}

// writeTable prints the kills and the verdict.
func (rep *crashReport) writeTable(out io.Writer, stores []string) {
	fmt.Fprintf(out, "%-4s %-8s %-8s %-8s %-9s %-8s %-9s %-5s %-6s %-7s %-22s %s\n", "kill", "after", "target", "outputs", "pointer",
		"applied", "offset", "dups", "lag", "again", "problems", "store")
	for _, k := range rep.Kills {
		target := fmt.Sprint(k.Target)
		switch {
		case k.Idle:
			target = "idle"
		case !k.Reached:
			target += "!"
		}
		fmt.Fprintf(out, "%-4d %-8s %-8s %-8d %-9d %-8d %-9d %-5d %-6d %-7d %-22s %s\n", k.Run, time.Duration(k.AfterMs)*time.Millisecond,
			target, k.Outputs, k.Pointer, k.Applied, k.Offset, k.Duplicates, k.Lag, k.Redelivered, k.Problems, k.Store)
	}
	fmt.Fprintf(out, "last run  %s: settled\n", rep.Last)
	fmt.Fprintf(out, "clean run %s: %d outputs\n", rep.Clean, rep.Want)
	if rep.Crashed != nil {
		fmt.Fprintf(out, "state     crashed: %d applied, offset %d; clean: %d applied, offset %d\n",
			rep.Crashed.Applied, rep.Crashed.Offset, rep.Expected.Applied, rep.Expected.Offset)
	} else {
		fmt.Fprintln(out, "state     not checked: the app exposes no durable state")
	}
	fmt.Fprintf(out, "outputs   crashed runs: %d lines, clean: %d, missing %d, emitted twice %d\n",
		rep.Outputs, rep.Want, rep.Missing, rep.Duplicates)
	fmt.Fprintf(out, "diff      stitched runs against the clean run: only crashed %d, only clean %d, different %d, processed twice %d\n",
		rep.Diff.OnlyA, rep.Diff.OnlyB, rep.Diff.Different, rep.Diff.Twice)
	fmt.Fprintf(out, "recordings %d killed (unfinished), last and clean complete; unexpected problems: %d\n",
		len(rep.Kills), len(rep.Problems))
	for _, p := range rep.Problems {
		fmt.Fprintf(out, "  %s\n", p)
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(out, "FAIL      %s\n", f)
	}
	switch {
	case rep.Holds && rep.Crashed != nil && rep.StateEvery > 1:
		fmt.Fprintf(out, "verdict   holds: nothing lost, every line applied once (state saved every %d lines or %s), each kill re-emitted only the outputs of the lines its restart delivered again and of the batch of rows it cut (per worker)\n", rep.StateEvery, rep.StateInterval)
	case rep.Holds && rep.Crashed != nil && rep.Workers > 1:
		fmt.Fprintf(out, "verdict   holds: nothing lost, every line applied once, the kills re-emitted at most one delivery per worker each (%d workers)\n", rep.Workers)
	case rep.Holds && rep.Crashed != nil:
		fmt.Fprintln(out, "verdict   holds: nothing lost, every line applied once, each kill re-emitted at most one delivery")
	case rep.Holds:
		fmt.Fprintln(out, "verdict   holds: nothing lost, each kill re-emitted only the outputs of the deliveries not committed")
	default:
		fmt.Fprintln(out, "verdict   does not hold")
	}
	fmt.Fprintf(out, "compare   blackbox diff %s %s --ignore %s\n", strings.Join(stores, ","), rep.Clean, strings.Join(rep.Ignore, ","))
}

// reemitted counts the output lines the run after kill i emitted again:
// the longest m (at most most, one delivery's outputs; no bound if most is
// negative) such that the first m lines of the next run equal the last m
// of the killed run.
func reemitted(lines []string, bounds []int64, i, most int) int {
	lo := int64(0)
	if i > 0 {
		lo = bounds[i-1]
	}
	end, next := bounds[i], bounds[i+1]
	m0 := int64(most)
	if most < 0 {
		m0 = end - lo
	}
	for m := m0; m >= 1; m-- {
		if end-m < lo || end+m > next {
			continue
		}
		if slices.Equal(lines[end-m:end], lines[end:end+m]) {
			return int(m)
		}
	}
	return 0
}

// readOutputs reads an --out file: one JSON output per line, each returned
// re-encoded without the ignored keys (the clock differs between runs).
func readOutputs(path string, ignore []string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &fileError{path, unwrapPathError(err)}
	}
	defer f.Close()
	var outs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			outs = append(outs, sc.Text()) // not an object: compared as it is
			continue
		}
		for _, k := range ignore {
			delete(m, k)
		}
		b, _ := json.Marshal(m)
		outs = append(outs, string(b))
	}
	if err := sc.Err(); err != nil {
		return nil, &fileError{path, fmt.Errorf("line %d: %w", line+1, err)}
	}
	return outs, nil
}

// verifyFile opens and verifies a recording.
func verifyFile(path string) ([]store.Problem, error) {
	r, _, err := openStore(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Problems(), nil
}
