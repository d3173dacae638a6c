package crashtest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// check compares the crashed runs with the clean one and fills rep's
// verdict: the state, the outputs, the recordings, the stitched diff.
// stores are every run's recording, the last one's included; a killed run
// that created none (KillReport.NoRecording) recorded nothing and is left
// out of the checks that read recordings.
func (s *setup) check(ctx context.Context, rep *Report, stores []string, bounds []int64) error {
	if err := s.checkState(rep); err != nil {
		return err
	}
	recs := s.checkNoRecordings(rep, stores)
	if err := s.checkRedelivered(rep, stores); err != nil {
		return err
	}
	if err := s.checkOutputs(rep, recs, bounds); err != nil {
		return err
	}
	s.checkRecordings(rep, stores)
	if err := s.checkDiff(ctx, rep, recs); err != nil {
		return err
	}
	if len(rep.Problems) > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d unexpected recording problems", len(rep.Problems)))
	}
	rep.Holds = len(rep.Failures) == 0
	return nil
}

// checkNoRecordings finds the killed runs that created no recording
// (killed in their outbox's recovery, which delivers what earlier runs
// recorded before the run creates anything, or before their first write):
// they recorded nothing, so they committed nothing either: the pointer did
// not move. It returns the recordings there are (the last run's always).
func (s *setup) checkNoRecordings(rep *Report, stores []string) []string {
	var recs []string
	pointer := int64(0) // before the first run: none
	for i, path := range stores {
		if i == len(rep.Kills) || recorded(path) {
			recs = append(recs, path)
			if i < len(rep.Kills) {
				pointer = rep.Kills[i].Pointer
			}
			continue
		}
		k := &rep.Kills[i]
		k.NoRecording, k.Problems = true, "no recording"
		if k.Pointer != pointer {
			rep.Failures = append(rep.Failures, fmt.Sprintf("kill %d: the run created no recording, but the pointer moved from offset %d to %d: it committed inputs it did not record",
				k.Run, pointer, k.Pointer))
		}
		pointer = k.Pointer
	}
	return recs
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

// checkOutputs: the outbox's guarantee: the crashed runs' --out file
// holds every output of the clean run exactly once, and each of its lines
// is an OUTPUT row of one of the runs' recordings (recs): outputLines.
func (s *setup) checkOutputs(rep *Report, recs []string, bounds []int64) error {
	lines, err := readLines(s.outFile)
	if err != nil {
		return err
	}
	rows, err := outputRows(recs)
	if err != nil {
		return err
	}
	outputLines(rep, s.outFile, lines, s.want, rows, bounds, s.cfg.Ignore)
	return nil
}

// outputLines checks the lines of the --out file at path against want,
// the clean run's outputs (without the ignored keys), and rows, the OUTPUT
// rows of the runs' recordings by value: compared without the ignored
// keys, every output of want is in lines exactly once (none missing, no
// line more); each line is an OUTPUT row, byte for byte, a row for each
// line (the outbox delivers what was recorded, nothing else). bounds are
// the line counts after each kill: each kill's Duplicates counts the lines
// after it beyond want's count of their output (0 when the guarantee
// holds). It fills rep's counts and failures; rows is consumed.
func outputLines(rep *Report, path string, lines, want []string, rows map[string]int, bounds []int64, ignore []string) {
	rep.Outputs, rep.Want = len(lines), len(want)
	wanted := map[string]int{}
	for _, o := range want {
		wanted[o]++
	}
	// Walk the file in order: an output's lines past the clean run's
	// count of it are extra, counted for the kill whose restarts wrote them.
	seen := map[string]int{}
	kill := -1 // the last kill before line i
	for i, l := range lines {
		for kill+1 < len(bounds) && kill+1 < len(rep.Kills) && bounds[kill+1] <= int64(i) {
			kill++
		}
		o := withoutKeys(l, ignore)
		seen[o]++
		if seen[o] <= wanted[o] {
			continue
		}
		rep.Duplicates++
		if kill >= 0 {
			rep.Kills[kill].Duplicates++
		}
	}
	for o, n := range wanted {
		rep.Missing += max(0, n-seen[o])
	}
	if rep.Missing > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d outputs of the clean run are missing from %s", rep.Missing, path))
	}
	if rep.Duplicates > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d extra lines in %s: outputs it holds more often than the clean run emitted them (want each exactly once)",
			rep.Duplicates, path))
	}
	for _, l := range lines {
		if rows[l] == 0 {
			rep.Unrecorded++
			continue
		}
		rows[l]--
	}
	if rep.Unrecorded > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d lines of %s are no OUTPUT row of the runs' recordings (want a row for each line)", rep.Unrecorded, path))
	}
}

// outputRows counts the OUTPUT rows of the recordings at paths by their
// value. A killed recording's rows that cannot be read (a torn tail) are
// skipped.
func outputRows(paths []string) (map[string]int, error) {
	rows := map[string]int{}
	for _, path := range paths {
		r, err := openStore(path)
		if err != nil {
			return nil, err
		}
		for e, err := range r.Rows() {
			if err == nil && e.Kind == store.KindOutput {
				rows[string(e.Payload)]++
			}
		}
		r.Close()
	}
	return rows, nil
}

// checkRecordings: each killed recording is unfinished (and, killed inside
// a write, torn, with the complete rows of that write orphaned) and nothing
// else; the last and the clean ones are complete. A killed run that created
// no recording (checkNoRecordings) has nothing to verify.
func (s *setup) checkRecordings(rep *Report, stores []string) {
	for i, path := range append(slices.Clone(stores), s.clean) {
		killed := i < len(rep.Kills)
		if killed && rep.Kills[i].NoRecording {
			continue
		}
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

// checkDiff: the stitched runs (their recordings, recs) show no
// difference from the clean one.
func (s *setup) checkDiff(ctx context.Context, rep *Report, recs []string) error {
	a, err := store.OpenAll(recs, openStore)
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
func (rep *Report) writeTable(out io.Writer) {
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
	fmt.Fprintf(out, "outputs   crashed runs: %d lines, clean: %d, missing %d, extra %d, in no recording %d\n",
		rep.Outputs, rep.Want, rep.Missing, rep.Duplicates, rep.Unrecorded)
	fmt.Fprintf(out, "diff      stitched runs against the clean run: only crashed %d, only clean %d, different %d, processed twice %d\n",
		rep.Diff.OnlyA, rep.Diff.OnlyB, rep.Diff.Different, rep.Diff.Twice)
	none := 0
	for _, k := range rep.Kills {
		if k.NoRecording {
			none++
		}
	}
	fmt.Fprintf(out, "recordings %d killed (unfinished; %d killed before they created one), last and clean complete; unexpected problems: %d\n",
		len(rep.Kills), none, len(rep.Problems))
	for _, p := range rep.Problems {
		fmt.Fprintf(out, "  %s\n", p)
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(out, "FAIL      %s\n", f)
	}
	switch {
	case rep.Holds && rep.Crashed != nil && rep.StateEvery > 1:
		fmt.Fprintf(out, "verdict   holds: nothing lost, every line applied once (state saved every %d lines or %s), every output in --out exactly once\n", rep.StateEvery, rep.StateInterval)
	case rep.Holds && rep.Crashed != nil && rep.Workers > 1:
		fmt.Fprintf(out, "verdict   holds: nothing lost, every line applied once (%d workers), every output in --out exactly once\n", rep.Workers)
	case rep.Holds && rep.Crashed != nil:
		fmt.Fprintln(out, "verdict   holds: nothing lost, every line applied once, every output in --out exactly once")
	case rep.Holds:
		fmt.Fprintln(out, "verdict   holds: nothing lost, every output in --out exactly once")
	default:
		fmt.Fprintln(out, "verdict   does not hold")
	}
	var recs []string
	for _, k := range rep.Kills {
		if !k.NoRecording {
			recs = append(recs, k.Store)
		}
	}
	recs = append(recs, rep.Last)
	fmt.Fprintf(out, "compare   blackbox diff %s %s --ignore %s\n", strings.Join(recs, ","), rep.Clean, strings.Join(rep.Ignore, ","))
}
