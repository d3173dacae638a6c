package torture

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Config configures a torture session. A plain value.
type Config struct {
	// Binary is the blackbox binary the scenarios run; it must know App
	// (cmd/blackbox does).
	Binary string
	// Seed is the first scenario's seed; scenario i has seed Seed+i.
	Seed uint64
	// Scenarios is how many scenarios to run; with Time, at most that
	// many. 0 with Time: as many as fit.
	Scenarios int
	// Time bounds the session: no scenario starts after it. 0: Scenarios.
	Time time.Duration
	// Parallel is how many scenarios run at once (default 2).
	Parallel int
	// Dir is where the scenarios run, one directory each (default: a new
	// temporary directory). A failing scenario's directory is kept.
	Dir string
	// Keep keeps every scenario's directory.
	Keep bool
	// Limits shrink every scenario (a reproduction's).
	Limits Limits
	// Only restricts the scenarios to an app or a source.
	Only Only
	// NoShrink reports a failing scenario as it was generated.
	NoShrink bool
	// Log receives a line per failing scenario (nil: discarded).
	Log io.Writer
	// Verbose logs a line per scenario: its seed, runs, time and
	// dimensions.
	Verbose bool
}

// Report is what a torture session did. A plain value.
type Report struct {
	Seed       uint64         `json:"seed"`
	Scenarios  int            `json:"scenarios"`
	Runs       int            `json:"runs"`
	Elapsed    time.Duration  `json:"elapsedNs"`
	Dimensions map[string]int `json:"dimensions"` // scenarios that exercised each dimension
	Failures   []Failure      `json:"failures"`
	// Inconclusive lists the scenarios the harness could not carry out
	// for a defect of its environment (kfake keeping a killed member:
	// ghostError; kfake losing a partition's offsets across a bounce:
	// bounceLostError), neither passed nor failed.
	Inconclusive []uint64 `json:"inconclusive"`
}

// Failure is a scenario that broke an invariant, shrunk. A plain value.
type Failure struct {
	Seed       uint64      `json:"seed"`
	Limits     string      `json:"limits"`
	Violations []Violation `json:"violations"`
	Events     []string    `json:"events"`
	Dir        string      `json:"dir"`
	// Command reproduces it: blackbox torture --seed S --scenarios 1 ...
	Command string `json:"command"`
}

// Run runs a torture session: scenarios generated from cfg.Seed on, each
// checked by the oracle; a failing one is shrunk (fewer runs, lines,
// faults, operations) and reported with the command that reproduces it.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg, cleanup, err := cfg.withDefaults()
	if err != nil {
		return Report{}, err
	}
	defer cleanup()
	ss := &session{cfg: cfg, start: time.Now(), rep: Report{Seed: cfg.Seed, Dimensions: map[string]int{}}}
	seeds := ss.seeds(ctx)
	var wg sync.WaitGroup
	for range cfg.Parallel {
		wg.Go(func() {
			for seed := range seeds {
				if !ss.scenario(ctx, seed) {
					return
				}
			}
		})
	}
	wg.Wait()
	ss.rep.Elapsed = time.Since(ss.start)
	sort.Slice(ss.rep.Failures, func(i, j int) bool { return ss.rep.Failures[i].Seed < ss.rep.Failures[j].Seed })
	return ss.rep, nil
}

// withDefaults checks cfg and fills in its defaults: 2 in parallel, a
// discarding log, a new temporary directory (removed by cleanup if the
// session left nothing in it).
func (cfg Config) withDefaults() (_ Config, cleanup func(), _ error) {
	cleanup = func() {}
	if cfg.Binary == "" {
		return cfg, cleanup, errors.New("torture: no binary to run")
	}
	if cfg.Scenarios <= 0 && cfg.Time <= 0 {
		return cfg, cleanup, errors.New("torture: give a number of scenarios or a time")
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 2
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "blackbox-torture-")
		if err != nil {
			return cfg, cleanup, err
		}
		cfg.Dir = d
		cleanup = func() {
			if ents, _ := os.ReadDir(d); len(ents) == 0 {
				os.Remove(d)
			}
		}
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return cfg, cleanup, err
	}
	return cfg, cleanup, nil
}

// session is a torture session under way: its scenarios run on
// cfg.Parallel goroutines, which add to rep under mu.
type session struct {
	cfg   Config
	start time.Time
	mu    sync.Mutex
	rep   Report
}

// seeds sends the session's seeds, cfg.Seed on, until cfg.Scenarios were
// sent, cfg.Time has gone by or ctx is done; then it closes the channel.
func (ss *session) seeds(ctx context.Context) <-chan uint64 {
	cfg := ss.cfg
	seeds := make(chan uint64)
	go func() {
		defer close(seeds)
		for i := 0; cfg.Scenarios <= 0 || i < cfg.Scenarios; i++ {
			if cfg.Time > 0 && time.Since(ss.start) >= cfg.Time || ctx.Err() != nil {
				return
			}
			select {
			case seeds <- cfg.Seed + uint64(i):
			case <-ctx.Done():
				return
			}
		}
	}()
	return seeds
}

// scenario runs and checks the scenario of seed and adds it to the
// report: as inconclusive, passed, or failed (shrunk, unless
// cfg.NoShrink). It reports false when ctx ended it: the session stops.
func (ss *session) scenario(ctx context.Context, seed uint64) bool {
	cfg := ss.cfg
	s := generate(seed, cfg.Limits, cfg.Only)
	began := time.Now()
	vs, events, dir, err := runScenario(ctx, cfg, s)
	if err != nil && ctx.Err() != nil {
		return false
	}
	if cfg.Keep && dir != "" && len(events) > 0 {
		// What the harness did (the control steps and their answers), beside
		// the artifacts kept.
		if werr := os.WriteFile(filepath.Join(dir, "events.txt"), []byte(strings.Join(events, "\n")+"\n"), 0o644); werr != nil {
			fmt.Fprintf(cfg.Log, "seed %d: writing its events: %v\n", seed, werr)
		}
	}
	var inc inconclusiveError
	if errors.As(err, &inc) {
		fmt.Fprintf(cfg.Log, "inconclusive seed %d: %v\n", seed, err)
		ss.mu.Lock()
		ss.rep.Scenarios++
		ss.rep.Inconclusive = append(ss.rep.Inconclusive, seed)
		ss.mu.Unlock()
		if !cfg.Keep {
			os.RemoveAll(dir)
		}
		return true
	}
	var f *Failure
	if err != nil || len(vs) > 0 {
		if err != nil {
			vs = append(vs, Violation{Invariant: InvAgree, What: err.Error()})
		}
		f = &Failure{Seed: seed, Limits: cfg.Limits.String(), Violations: vs, Events: events, Dir: dir}
		ss.shrink(ctx, s, f)
		f.Command = reproduce(f.Seed, f.Limits, cfg.Only)
		fmt.Fprintf(cfg.Log, "FAIL seed %d: %s\n  reproduce: %s\n", seed, f.Violations[0], f.Command)
	}
	if cfg.Verbose {
		fmt.Fprintf(cfg.Log, "seed %d: %d runs, %s, %s\n", seed, len(s.Runs), time.Since(began).Round(time.Millisecond), strings.Join(dedupe(s.Dimensions()), " "))
	}
	ss.mu.Lock()
	ss.rep.Scenarios++
	ss.rep.Runs += len(s.Runs)
	for _, d := range dedupe(s.Dimensions()) {
		ss.rep.Dimensions[d]++
	}
	if f != nil {
		ss.rep.Failures = append(ss.rep.Failures, *f)
	}
	ss.mu.Unlock()
	return true
}

// shrink shrinks the failure f of scenario s (shrinkFailure), within the
// session's time when it has one; not with cfg.NoShrink.
func (ss *session) shrink(ctx context.Context, s scenarioSpec, f *Failure) {
	if ss.cfg.NoShrink {
		return
	}
	if ss.cfg.Time > 0 { // shrinking keeps to the session's time too
		sctx, cancel := context.WithDeadline(ctx, ss.start.Add(ss.cfg.Time))
		defer cancel()
		ctx = sctx
	}
	shrinkFailure(ctx, ss.cfg, s, f)
}

func dedupe(xs []string) []string {
	slices.Sort(xs)
	return slices.Compact(xs)
}

// reproduce is the command line that runs one failing scenario again.
func reproduce(seed uint64, limits string, only Only) string {
	c := fmt.Sprintf("blackbox torture --seed %d --scenarios 1", seed)
	if limits != "" {
		c += " --limit " + limits
	}
	if only.Kind != "" {
		c += " --kind " + only.Kind
	}
	if only.App != "" {
		c += " --app " + only.App
	}
	if only.Source != "" {
		c += " --source " + only.Source
	}
	return c
}

// runScenario runs one scenario in a directory of its own under cfg.Dir,
// named by its seed and limits (each shrinking step of a failure has its
// own), and checks it. The directory is removed when the scenario passes
// (unless cfg.Keep).
func runScenario(ctx context.Context, cfg Config, s scenarioSpec) (vs []Violation, events []string, dir string, err error) {
	name := fmt.Sprintf("seed-%d", s.Seed)
	if l := cfg.Limits.String(); l != "" {
		name += "-" + strings.NewReplacer(",", "-", "=", "").Replace(l)
	}
	dir = filepath.Join(cfg.Dir, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, nil, dir, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, dir, err
	}
	sr := &scenarioRun{s: s, cfg: cfg, dir: dir}
	defer sr.close()
	switch s.Kind {
	case "engine":
		vs, events := checkEngine(ctx, s)
		return vs, events, dir, nil
	case "crashtest":
		o := &oracle{sr: sr, ctx: ctx}
		return o.checkCrashtest(), sr.events, dir, nil
	}
	defer func() {
		if err == nil && len(vs) == 0 && !cfg.Keep {
			os.RemoveAll(dir)
		}
	}()
	if err := sr.setup(ctx); err != nil {
		return nil, sr.events, dir, err
	}
	for i, run := range s.Runs {
		o, err := sr.doRun(ctx, i+1, run)
		if err != nil {
			var he *hangError
			if errors.As(err, &he) {
				return []Violation{{Invariant: InvLive, What: err.Error()}}, sr.events, dir, nil
			}
			return nil, sr.events, dir, err
		}
		sr.runs = append(sr.runs, o)
	}
	if err := sr.finish(ctx); err != nil {
		var he *hangError
		if errors.As(err, &he) {
			return []Violation{{Invariant: InvLive, What: err.Error()}}, sr.events, dir, nil
		}
		return nil, sr.events, dir, err
	}
	o := &oracle{sr: sr, ctx: ctx}
	return o.check(), sr.events, dir, nil
}

// finish makes sure the scenario ends with a run that ran to its end:
// when the last run was refused (flags another run's state cannot take),
// it runs again with the flags of the last run that ran and was at work
// (its recording appeared: a run killed or stopped before that wrote no
// state either, so its flags are not the state's).
func (sr *scenarioRun) finish(ctx context.Context) error {
	last := sr.runs[len(sr.runs)-1]
	if !last.refused {
		return nil
	}
	run := last.run
	run.Before, run.During, run.Fault, run.Alias = nil, nil, runFault{}, ""
	run.Workers, run.Order, run.MaxGap = 1, "", 0 // no run ran: one worker, which any state takes
	for i := len(sr.runs) - 1; i >= 0; i-- {
		if r := sr.runs[i]; !r.refused && sr.atWorkOnce(r) {
			run.Workers, run.Order, run.MaxGap = r.run.Workers, r.run.Order, r.run.MaxGap
			break
		}
	}
	sr.logf("the last run was refused: once more with the flags of the last run that ran")
	o, err := sr.doRun(ctx, len(sr.runs)+1, run)
	if err != nil {
		return err
	}
	sr.runs = append(sr.runs, o)
	return nil
}

// topicDeletedBefore reports whether the Kafka topic was deleted while
// stopped before run i (1-based), or while the run before it ran: its
// offsets start again.
func (sr *scenarioRun) topicDeletedBefore(i int) bool {
	if sr.kafka == nil || i > len(sr.s.Runs) {
		return false
	}
	deletes := func(ops []inputOp) bool {
		return slices.ContainsFunc(ops, func(op inputOp) bool { return op.Kind == opDeleteTopic })
	}
	return deletes(sr.s.Runs[i-1].Before) || deletes(sr.s.Runs[i-1].During) || i >= 2 && deletes(sr.s.Runs[i-2].During)
}

// shrinkFailure shrinks a failing scenario: fewer runs, then no faults,
// no operations, fewer lines, keeping each step that still fails the
// invariant the whole scenario failed first (a smaller scenario failing
// another one is another finding, not this one reproduced).
func shrinkFailure(ctx context.Context, cfg Config, s scenarioSpec, f *Failure) {
	lim := cfg.Limits
	full := generate(s.Seed, Limits{}, cfg.Only)
	inv := f.Violations[0].Invariant
	try := func(l Limits) bool {
		if ctx.Err() != nil {
			return false
		}
		c := cfg
		c.Limits = l
		vs, events, dir, err := runScenario(ctx, c, generate(s.Seed, l, cfg.Only))
		if err != nil || ctx.Err() != nil { // cut short: it proves nothing
			return false
		}
		if !slices.ContainsFunc(vs, func(v Violation) bool { return v.Invariant == inv }) {
			return false
		}
		slices.SortStableFunc(vs, func(a, b Violation) int { // the invariant shrunk for first
			return cmp.Compare(boolInt(a.Invariant != inv), boolInt(b.Invariant != inv))
		})
		if f.Dir != dir {
			os.RemoveAll(f.Dir)
		}
		f.Violations, f.Events, f.Dir, f.Limits = vs, events, dir, l.String()
		return true
	}
	for r := 1; r < len(full.Runs) && (lim.Runs == 0 || r < lim.Runs); r++ {
		l := lim
		l.Runs = r
		if try(l) {
			lim = l
			break
		}
	}
	if !lim.NoFaults {
		l := lim
		l.NoFaults = true
		if try(l) {
			lim = l
		}
	}
	if !lim.NoOps {
		l := lim
		l.NoOps = true
		if try(l) {
			lim = l
		}
	}
	for n := 40; n >= 5; n /= 2 {
		if lim.Lines != 0 && lim.Lines <= n {
			continue
		}
		l := lim
		l.Lines = n
		if !try(l) {
			break
		}
		lim = l
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// atWorkOnce reports whether run o was at work: its recording exists and
// holds a byte (a recording appears whole or not at all).
func (sr *scenarioRun) atWorkOnce(o *outcome) bool {
	st, err := os.Stat(filepath.Join(sr.dir, o.store))
	return err == nil && st.Size() > 0
}

// Summary writes the session's figures: scenarios, runs, time, how many
// scenarios covered each dimension, the failures.
func (rep Report) Summary(w io.Writer) {
	fmt.Fprintf(w, "torture: seed %d: %d scenarios, %d runs in %s; %d failed, %d inconclusive\n", rep.Seed, rep.Scenarios, rep.Runs,
		rep.Elapsed.Round(time.Millisecond), len(rep.Failures), len(rep.Inconclusive))
	var dims []string
	for d, n := range rep.Dimensions {
		dims = append(dims, fmt.Sprintf("%s %d", d, n))
	}
	slices.Sort(dims)
	fmt.Fprintf(w, "dimensions (scenarios): %s\n", strings.Join(dims, ", "))
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "\nFAIL seed %d (%s): %s\n", f.Seed, orDefault(f.Limits, "whole"), f.Dir)
		for _, v := range f.Violations {
			fmt.Fprintf(w, "  %s\n", v)
		}
		for _, e := range f.Events {
			fmt.Fprintf(w, "    %s\n", e)
		}
		fmt.Fprintf(w, "  reproduce: %s\n", f.Command)
	}
}
