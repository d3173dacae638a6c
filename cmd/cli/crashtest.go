package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/store"
)

// crashConfig is one crash test.
type crashConfig struct {
	app    string
	lines  int
	kills  int
	seed   uint64
	dir    string
	format string
}

// killReport is one kill of a crash test.
type killReport struct {
	Run        int    `json:"run"`
	Store      string `json:"store"`
	AfterMs    int64  `json:"afterMs"`    // the run's lifetime when it was killed
	Target     int64  `json:"target"`     // the output line count the kill waited for
	Outputs    int64  `json:"outputs"`    // output lines in the --out file after the kill
	Pointer    int64  `json:"pointer"`    // the committed pointer offset after the kill
	Applied    int64  `json:"applied"`    // the state's applied postings after the kill
	Offset     int64  `json:"offset"`     // the state's offset after the kill
	Duplicates int    `json:"duplicates"` // output lines the next run emitted again
}

// crashReport is the JSON of `blackbox crashtest --json`.
type crashReport struct {
	Dir        string           `json:"dir"`
	Input      string           `json:"input"`
	Lines      int              `json:"lines"`
	Postings   int64            `json:"postings"`
	Kills      []killReport     `json:"kills"`
	Last       string           `json:"last"`
	Clean      string           `json:"clean"`
	Crashed    apps.LedgerState `json:"crashed"`
	Expected   apps.LedgerState `json:"expected"`
	Outputs    int              `json:"outputs"`    // lines in the crashed runs' --out file
	Want       int              `json:"want"`       // lines in the clean run's --out file
	Missing    int              `json:"missing"`    // clean outputs absent from the crashed runs' file
	Duplicates int              `json:"duplicates"` // extra lines in the crashed runs' file
	Problems   []string         `json:"problems"`   // recording problems that should not be there
	Holds      bool             `json:"holds"`
	Failures   []string         `json:"failures"`
}

func (c *CLI) crashtestCmd() *cobra.Command {
	var (
		cfg    crashConfig
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "crashtest",
		Short: "Kill a recorded run K times, restart it, and check nothing was lost or applied twice",
		Long: `Generate N ledger lines in DIR/input.txt and run "blackbox run --read committed
--follow --state DIR/crash-state.json --out DIR/crash-out.jsonl" over them as a
child process (this same binary), recording run K to DIR/run-K.db. Kill it
with SIGKILL K times at random moments (after a random number of output
lines, seeded by --seed) and restart it each time; the last restart runs
without --follow and ends once settled. Then run the same input cleanly
(a fresh pointer and state, recording to DIR/clean.db) and check:

  - the crashed state equals the clean one (balances, postings applied,
    offset), and every posting line was applied exactly once;
  - every output of the clean run is in the crashed runs' --out file (the
    "at" field aside), and the only extra lines are the re-emitted outputs
    of the delivery each kill interrupted (at most one delivery per kill);
  - every killed run's recording is unfinished and nothing else; the last
    and the clean recordings are complete.

crashtest owns DIR/input.txt, DIR/*.ptr, DIR/crash-*, DIR/clean*, DIR/run-*:
it removes them first. It prints a table of the kills and the verdict.

Exit: 0 the guarantees held; 1 they did not; 2 a usage or I/O error.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.app != apps.LedgerName {
				return usagef("crashtest checks the ledger app's state; --app %q is not supported", cfg.app)
			}
			if _, err := c.app(cfg.app); err != nil {
				return err
			}
			switch {
			case cfg.lines < 2:
				return usagef("--lines must be at least 2, got %d", cfg.lines)
			case cfg.kills < 0:
				return usagef("--kills must not be negative, got %d", cfg.kills)
			}
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
	fl.StringVar(&cfg.app, "app", apps.LedgerName, "the app to crash (ledger)")
	fl.IntVar(&cfg.lines, "lines", 5000, "how many ledger lines to generate")
	fl.IntVar(&cfg.kills, "kills", 5, "how many times to kill the run")
	fl.Uint64Var(&cfg.seed, "seed", 1, "seed of the input and of the kill moments")
	fl.StringVar(&cfg.dir, "dir", "crashtest-out", "the directory to work in (created if missing)")
	fl.StringVar(&cfg.format, "format", "sqlite", "the recordings' format: sqlite or csv")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON instead of the table")
	return cmd
}

// crashtest runs the test; table, if set, prints the kills as they happen
// and the verdict.
func (c *CLI) crashtest(ctx context.Context, cfg crashConfig, out io.Writer, table bool) (*crashReport, error) {
	exe := c.executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("crashtest: finding this binary to run: %w", err)
		}
	}
	if fi, err := os.Stat(cfg.dir); err == nil && !fi.IsDir() {
		return nil, &fileError{cfg.dir, errors.New("is not a directory")}
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return nil, &fileError{cfg.dir, unwrapPathError(err)}
	}
	for _, pat := range []string{"input.txt", "*.ptr", "crash-*", "clean*", "run-*"} {
		old, _ := filepath.Glob(filepath.Join(cfg.dir, pat))
		for _, p := range old {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, &fileError{p, unwrapPathError(err)}
			}
		}
	}
	ext := ".db"
	if cfg.format == formatCSV {
		ext = ".csv"
	}
	path := func(name string) string { return filepath.Join(cfg.dir, name) }
	input := path("input.txt")
	postings, err := ledgerLinesOpts(input, cfg.lines, cfg.seed, false)
	if err != nil {
		return nil, err
	}
	rep := &crashReport{Dir: cfg.dir, Input: input, Lines: cfg.lines, Postings: postings, Kills: []killReport{},
		Problems: []string{}, Failures: []string{}}
	var (
		pointer = path("crash-input.ptr")
		state   = path("crash-state.json")
		outFile = path("crash-out.jsonl")
	)
	runArgs := func(storePath string, follow bool) []string {
		a := []string{"run", "--app", cfg.app, "--input", input, "--store", storePath, "--format", cfg.format,
			"--read", "committed", "--pointer", pointer, "--state", state, "--out", outFile}
		if follow {
			a = append(a, "--follow")
		}
		return a
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 0x6b696c6c)) // "kill"
	// The kill moments: K output line counts, spread over the expected
	// outputs (one per posting).
	targets := make([]int64, cfg.kills)
	for i := range targets {
		targets[i] = 1 + rng.Int64N(max(postings-1, 1))
	}
	slices.Sort(targets)
	if table {
		fmt.Fprintf(out, "crashtest: %s over %d lines (%d postings), %d kills, seed %d, in %s\n",
			cfg.app, cfg.lines, postings, cfg.kills, cfg.seed, cfg.dir)
	}
	p := c.progress()
	defer p.Done()
	var stores []string
	var boundaries []int64 // output lines in the --out file after each run
	for k := 1; k <= cfg.kills; k++ {
		storePath := path(fmt.Sprintf("run-%d%s", k, ext))
		stores = append(stores, storePath)
		lines0, _ := countLines(outFile)
		target := max(targets[k-1], lines0+1)
		p.Printf("kill %d of %d: running %s until %d output lines", k, cfg.kills, storePath, target)
		kr, err := c.killRun(ctx, exe, runArgs(storePath, true), path(fmt.Sprintf("run-%d.log", k)), outFile, target)
		if err != nil {
			return nil, err
		}
		kr.Run, kr.Store, kr.Target = k, storePath, target
		if p, err := filesource.ReadPointer(pointer); err == nil {
			kr.Pointer = p.Offset
		}
		if st, err := readLedgerState(state); err == nil {
			kr.Applied, kr.Offset = st.Applied, st.Offset
		}
		rep.Kills = append(rep.Kills, kr)
		boundaries = append(boundaries, kr.Outputs)
	}
	// The last restart finishes the input and ends once settled.
	last := path(fmt.Sprintf("run-%d%s", cfg.kills+1, ext))
	stores = append(stores, last)
	rep.Last = last
	p.Printf("the last run: %s until settled", last)
	if code, err := c.child(ctx, exe, runArgs(last, false), path(fmt.Sprintf("run-%d.log", cfg.kills+1))); err != nil {
		return nil, err
	} else if code != 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("the last run (%s) exited %d, want 0 (see %s)", last, code,
			path(fmt.Sprintf("run-%d.log", cfg.kills+1))))
	}
	// The clean run: the same input, a fresh pointer and state.
	clean := path("clean" + ext)
	rep.Clean = clean
	p.Printf("the clean run: %s", clean)
	res, err := c.record(ctx, recordConfig{app: cfg.app, input: input, store: clean, format: cfg.format,
		read: filesource.Committed, pointer: path("clean-input.ptr"), state: path("clean-state.json"),
		out: path("clean-out.jsonl"), policy: engine.Pause(), queue: 1024})
	if err != nil {
		return nil, err
	}
	if res.Recorded != nil || !res.Status.Settled || !res.Status.Lossless {
		rep.Failures = append(rep.Failures, fmt.Sprintf("the clean run is not settled and lossless (recording: %v)", res.Recorded))
	}

	// State: equal to the clean run's, every posting applied once.
	crashed, err := readLedgerState(state)
	if err != nil {
		return nil, err
	}
	expected, err := readLedgerState(path("clean-state.json"))
	if err != nil {
		return nil, err
	}
	rep.Crashed, rep.Expected = crashed, expected
	crashed.Epoch, expected.Epoch = 0, 0 // each pointer has its own epoch
	if !ledgerStatesEqual(crashed, expected) {
		rep.Failures = append(rep.Failures, fmt.Sprintf("state differs: crashed applied %d, %d accounts, offset %d; clean applied %d, %d accounts, offset %d",
			crashed.Applied, len(crashed.Balances), crashed.Offset, expected.Applied, len(expected.Balances), expected.Offset))
	}
	if expected.Applied != postings || crashed.Applied != postings {
		rep.Failures = append(rep.Failures, fmt.Sprintf("postings applied: crashed %d, clean %d, want %d (each line exactly once)",
			crashed.Applied, expected.Applied, postings))
	}

	// Outputs: every clean one present, the extras only re-emissions.
	got, err := readOutputs(outFile)
	if err != nil {
		return nil, err
	}
	want, err := readOutputs(path("clean-out.jsonl"))
	if err != nil {
		return nil, err
	}
	rep.Outputs, rep.Want = len(got), len(want)
	have := map[string]int{}
	for _, o := range got {
		have[o]++
	}
	for _, o := range want {
		if have[o] == 0 {
			rep.Missing++
			continue
		}
		have[o]--
	}
	if rep.Missing > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d outputs of the clean run are missing from %s", rep.Missing, outFile))
	}
	boundaries = append(boundaries, int64(len(got)))
	dups := 0
	for i := range rep.Kills {
		d := reemitted(got, boundaries, i)
		rep.Kills[i].Duplicates = d
		dups += d
	}
	rep.Duplicates = len(got) - len(want) + rep.Missing
	if rep.Duplicates != dups {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d extra output lines, but only %d are re-emissions of an interrupted delivery",
			rep.Duplicates, dups))
	}
	for _, k := range rep.Kills {
		if k.Duplicates > 2 { // a ledger delivery emits at most two postings
			rep.Failures = append(rep.Failures, fmt.Sprintf("kill %d: %d outputs emitted again, more than one delivery's", k.Run, k.Duplicates))
		}
	}

	// Recordings: the killed ones unfinished and nothing else, the last and
	// the clean ones complete.
	for i, s := range append(stores, clean) {
		killed := i < cfg.kills
		ps, err := verifyFile(s)
		if err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			continue
		}
		unfinished := 0
		for _, p := range ps {
			if killed && p.Kind == store.ProblemUnfinished {
				unfinished++
				continue
			}
			rep.Problems = append(rep.Problems, problemText(s, p))
		}
		if killed && unfinished == 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: a killed run's recording is not unfinished", s))
		}
	}
	if len(rep.Problems) > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d unexpected recording problems", len(rep.Problems)))
	}
	rep.Holds = len(rep.Failures) == 0

	p.Done()
	if table {
		fmt.Fprintf(out, "%-4s %-8s %-8s %-8s %-9s %-8s %-9s %-5s %s\n", "kill", "after", "target", "outputs", "pointer",
			"applied", "offset", "dups", "store")
		for _, k := range rep.Kills {
			fmt.Fprintf(out, "%-4d %-8s %-8d %-8d %-9d %-8d %-9d %-5d %s\n", k.Run, time.Duration(k.AfterMs)*time.Millisecond,
				k.Target, k.Outputs, k.Pointer, k.Applied, k.Offset, k.Duplicates, k.Store)
		}
		fmt.Fprintf(out, "last run  %s: settled\n", last)
		fmt.Fprintf(out, "clean run %s: %d outputs\n", clean, len(want))
		fmt.Fprintf(out, "state     crashed: %d postings applied, %d accounts; clean: %d, %d; want %d postings\n",
			rep.Crashed.Applied, len(rep.Crashed.Balances), rep.Expected.Applied, len(rep.Expected.Balances), postings)
		fmt.Fprintf(out, "outputs   crashed runs: %d lines, clean: %d, missing %d, emitted twice %d\n",
			len(got), len(want), rep.Missing, rep.Duplicates)
		fmt.Fprintf(out, "recordings %d killed (unfinished), last and clean complete; unexpected problems: %d\n",
			cfg.kills, len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintf(out, "  %s\n", p)
		}
		for _, f := range rep.Failures {
			fmt.Fprintf(out, "FAIL      %s\n", f)
		}
		if rep.Holds {
			fmt.Fprintln(out, "verdict   holds: nothing lost, every line applied once, each kill re-emitted at most one delivery")
		} else {
			fmt.Fprintln(out, "verdict   does not hold")
		}
		fmt.Fprintf(out, "compare   blackbox diff %s %s --ignore at\n", strings.Join(stores, ","), clean)
	}
	return rep, nil
}

// reemitted counts the output lines the run after kill i emitted again:
// the longest m (at most two, a ledger delivery's outputs) such that the
// first m lines of the next run equal the last m of the killed run.
func reemitted(lines []string, bounds []int64, i int) int {
	lo := int64(0)
	if i > 0 {
		lo = bounds[i-1]
	}
	end, next := bounds[i], bounds[i+1]
	for m := int64(2); m >= 1; m-- {
		if end-m < lo || end+m > next {
			continue
		}
		if slices.Equal(lines[end-m:end], lines[end:end+m]) {
			return int(m)
		}
	}
	return 0
}

// killRun starts a followed run, waits until its --out file holds target
// lines, kills it with SIGKILL and waits for it to be gone.
func (c *CLI) killRun(ctx context.Context, exe string, args []string, logPath, outFile string, target int64) (killReport, error) {
	var kr killReport
	logf, err := os.Create(logPath)
	if err != nil {
		return kr, &fileError{logPath, unwrapPathError(err)}
	}
	defer logf.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return kr, fmt.Errorf("crashtest: starting %s: %w", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	kill := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	lc := &lineCounter{path: outFile}
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			return kr, fmt.Errorf("crashtest: the run exited (%v) before it was killed; %s: %s", err, logPath, bytes.TrimSpace(b))
		case <-ctx.Done():
			kill()
			return kr, ctx.Err()
		case <-deadline.C:
			kill()
			n, _ := countLines(outFile)
			return kr, fmt.Errorf("crashtest: the run did not reach %d output lines in 2 minutes (%d); see %s", target, n, logPath)
		case <-tick.C:
		}
		n, err := lc.count()
		if err != nil {
			kill()
			return kr, err
		}
		if n >= target {
			kill()
			kr.AfterMs = time.Since(start).Milliseconds()
			kr.Outputs, err = countLines(outFile)
			return kr, err
		}
	}
}

// child runs the binary to its end and returns its exit code.
func (c *CLI) child(ctx context.Context, exe string, args []string, logPath string) (int, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return 0, &fileError{logPath, unwrapPathError(err)}
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("crashtest: running %s: %w", exe, err)
	}
	return 0, nil
}

// lineCounter counts the lines of a growing file, reading only what was
// appended since the last count.
type lineCounter struct {
	path string
	off  int64
	n    int64
	buf  []byte
}

func (l *lineCounter) count() (int64, error) {
	f, err := os.Open(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return l.n, nil
	}
	if err != nil {
		return l.n, &fileError{l.path, unwrapPathError(err)}
	}
	defer f.Close()
	if l.buf == nil {
		l.buf = make([]byte, 64<<10)
	}
	for {
		k, err := f.ReadAt(l.buf, l.off)
		l.n += int64(bytes.Count(l.buf[:k], []byte{'\n'}))
		l.off += int64(k)
		if err == io.EOF || k == 0 {
			return l.n, nil
		}
		if err != nil {
			return l.n, &fileError{l.path, unwrapPathError(err)}
		}
	}
}

// countLines counts the complete lines of a file (0 for a missing file).
func countLines(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, &fileError{path, unwrapPathError(err)}
	}
	return int64(bytes.Count(b, []byte{'\n'})), nil
}

// readOutputs reads an --out file: one JSON output per line, each returned
// re-encoded without its "at" field (the clock differs between runs).
func readOutputs(path string) ([]string, error) {
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
		delete(m, "at")
		b, _ := json.Marshal(m)
		outs = append(outs, string(b))
	}
	if err := sc.Err(); err != nil {
		return nil, &fileError{path, fmt.Errorf("line %d: %w", line+1, err)}
	}
	return outs, nil
}

func readLedgerState(path string) (apps.LedgerState, error) {
	var st apps.LedgerState
	b, err := os.ReadFile(path)
	if err != nil {
		return st, &fileError{path, unwrapPathError(err)}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, &fileError{path, fmt.Errorf("not a ledger state: %w", err)}
	}
	return st, nil
}

func ledgerStatesEqual(a, b apps.LedgerState) bool {
	if a.Applied != b.Applied || a.Offset != b.Offset || a.Epoch != b.Epoch || len(a.Balances) != len(b.Balances) {
		return false
	}
	for k, v := range a.Balances {
		if w, ok := b.Balances[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// verifyFile opens and verifies a recording.
func verifyFile(path string) ([]store.Problem, error) {
	r, _, err := openStore(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return store.Verify(r), nil
}
