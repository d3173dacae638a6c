package crashtest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// check compares the crashed runs with the clean one and fills rep's
// verdict: the state, the outputs, the recordings, the stitched diff.
func (s *setup) check(ctx context.Context, rep *Report, stores []string, bounds []int64) error {
	if err := s.checkState(rep); err != nil {
		return err
	}
	if err := s.checkRedelivered(rep, stores); err != nil {
		return err
	}
	if err := s.checkOutputs(rep, bounds); err != nil {
		return err
	}
	if !s.durable && s.cfg.Workers <= 1 {
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
func (s *setup) checkState(rep *Report) error {
	if !s.durable {
		return nil
	}
	if s.cfg.Workers > 1 {
		return s.checkWorkerStates(rep)
	}
	crashed, err := apps.DurableStateOf(s.app, s.state)
	if err != nil {
		return err
	}
	clean, err := apps.DurableStateOf(s.app, s.cleanSt)
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

func newStateReport(d core.DurableState) *StateReport {
	return &StateReport{Applied: d.Applied, Epoch: d.Epoch, Offset: d.Position.Offset}
}

// checkOutputs: every clean output present, the extras only re-emissions
// of one interrupted delivery per kill.
func (s *setup) checkOutputs(rep *Report, bounds []int64) error {
	got, err := readOutputs(s.outFile, s.cfg.Ignore)
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
		case s.cfg.StateEvery > 1:
			// Saving in batches, the ledger's completion is a
			// BatchCompletion: its lines are written in batches of up to
			// core.MaxBatch per worker, and a kill can cut a whole batch
			// whose outputs the live sink already had.
			most[i] = s.perInput * (int(k.Redelivered) + s.cfg.Workers*core.MaxBatch)
		default:
			most[i] = s.perInput * s.cfg.Workers
		}
	}
	if s.cfg.Workers > 1 {
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
	case !s.durable && s.cfg.Workers <= 1:
		// Re-delivered past the commit, a stateless app emits again all it
		// emitted: checkExtrasExplained accounts for every extra line.
	case s.durable && s.cfg.StateEvery > 1:
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
func (s *setup) checkExtrasExplained(rep *Report, stores []string, bounds []int64) error {
	rs, err := store.OpenAll(stores, openStore)
	if err != nil {
		return err
	}
	defer store.CloseAll(rs)
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
func (s *setup) checkRecordings(rep *Report, stores []string) {
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
		k.Problems = store.CountKinds(ps)
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
func (s *setup) checkDiff(ctx context.Context, rep *Report, stores []string) error {
	a, err := store.OpenAll(stores, openStore)
	if err != nil {
		return err
	}
	defer store.CloseAll(a)
	b, err := store.OpenAll([]string{s.clean}, openStore)
	if err != nil {
		return err
	}
	defer store.CloseAll(b)
	d, err := replayer.Diff(ctx, a, b, replayer.DiffOptions{Ignore: s.cfg.Ignore})
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
func (rep *Report) writeTable(out io.Writer, stores []string) {
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
