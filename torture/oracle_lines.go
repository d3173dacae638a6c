package torture

// The oracle's checks of every line the harness wrote: applied once, in
// --out and in a recording, or lost where a run and explain say so; and of
// explain, report and diff over the stitched runs.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// checkLines checks every line the harness wrote against the final state,
// --out and the recordings (invariants 1 and 2), and explain and diff
// against what the oracle knows (invariant 3).
func (o *oracle) checkLines() {
	f := o.lineFates(o.outputsByID(), o.processedByPayload())
	lossSaid := o.lossSaid(true)
	recorded := o.recorded()
	explain, ecode := o.explainRuns(recorded)
	if len(f.twice) > 0 {
		o.fail(InvOnce, "%d lines applied more than once: %s", len(f.twice), strings.Join(head(f.twice, 5), "; "))
	}
	if len(f.unrecorded) > 0 {
		o.fail(InvOnce, "%d lines applied to the state but in no recording (the write-ahead order): %s", len(f.unrecorded), strings.Join(head(f.unrecorded, 5), "; "))
	}
	if len(f.missing) > 0 {
		switch {
		case lossSaid == "":
			o.fail(InvLossless, "%d lines lost while every run said lossless: %s", len(f.missing), strings.Join(head(f.missing, 5), "; "))
		case explain != nil && ecode == 0 && o.lossSaidByRuns(true) != "":
			// explain reads the runs' recordings, not the second members'.
			o.fail(InvLossless, "%d lines lost (%s), but explain says nothing was lost: %s", len(f.missing), lossSaid, strings.Join(head(f.missing, 3), "; "))
		}
	}
	if explain != nil && explain.Lost && lossSaid == "" && len(f.missing) == 0 && len(f.twice) == 0 && !o.anyKilledIncomplete() {
		o.fail(InvAgree, "explain says something was lost, but every run said lossless and the oracle finds every line applied once")
	}
	if said := o.lossSaidByRuns(false); explain != nil && !explain.Lost && explain.Complete && said != "" {
		o.fail(InvAgree, "explain says nothing was lost, but %s", said)
	}
	o.checkDiff(recorded)
	if o.sr.s.Seed%3 == 0 {
		o.checkRunSets(recorded)
	}
}

// outputsByID counts the outputs every out file holds, by identity (a
// torn last line, which checkOut judges, aside).
func (o *oracle) outputsByID() map[string]int {
	outs := map[string]int{}
	outFiles, _ := filepath.Glob(filepath.Join(o.sr.dir, "out*.jsonl"))
	for _, f := range outFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			o.fail(InvAgree, "reading %s: %v", filepath.Base(f), err)
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for sc.Scan() {
			p, _, ok := unwrapLine(sc.Bytes(), o.sr.s.outFormat())
			if !ok {
				continue
			}
			if id := outputID(o.sr.s.App, p); id != "" {
				outs[id]++
			}
		}
	}
	return outs
}

// processedByPayload counts the inputs the recordings hold, by payload.
func (o *oracle) processedByPayload() map[string]int {
	processed := map[string]int{}
	for _, rec := range o.recs {
		for _, in := range rec.inputs() {
			var s string
			if json.Unmarshal(in.payload, &s) == nil {
				processed[s]++
			}
		}
	}
	return processed
}

// lineFates are what the oracle finds wrong with the lines the harness
// wrote, one description a line.
type lineFates struct {
	missing    []string // never applied, or without its outputs
	twice      []string // applied more than once
	unrecorded []string // applied to the state but in no recording
}

// lineFates reads what became of each line the harness wrote: with the
// ledger's state, how many times it was applied (appliedByState), else
// whether a recording holds it (processed, by payload) and --out its
// outputs (outs, by identity).
func (o *oracle) lineFates(outs, processed map[string]int) lineFates {
	sr := o.sr
	lines := sr.gen.lines
	applied := map[int]int{} // line id -> times applied (ledger state)
	stateKnown := false
	if sr.s.State {
		applied, stateKnown = o.appliedByState(lines)
	}
	var f lineFates
	for _, l := range lines {
		switch l.kind {
		case lineFail, lineOversize, lineTick, lineQuiet:
			continue
		}
		if sr.gen.atRisk[l.id] && applied[l.id] <= 1 {
			continue // destroyed while a run followed: perhaps never seen
		}
		if stateKnown && l.postings != nil {
			switch n := applied[l.id]; {
			case n == 0:
				f.missing = append(f.missing, fmt.Sprintf("line %d %q never applied", l.id, l.text))
			case n > 1:
				f.twice = append(f.twice, fmt.Sprintf("line %d %q applied %d times", l.id, l.text, n))
			}
			if applied[l.id] > 0 {
				for _, id := range l.outputs {
					if outs[id] == 0 {
						f.missing = append(f.missing, fmt.Sprintf("line %d %q applied but its output %s is in no out file", l.id, l.text, id))
					}
				}
				if processed[l.text] == 0 {
					// The write-ahead order: an input's rows are written
					// before its completion saves the state.
					f.unrecorded = append(f.unrecorded, fmt.Sprintf("line %d %q", l.id, l.text))
				}
			}
			continue
		}
		seen := processed[l.text] > 0
		for _, id := range l.outputs {
			if outs[id] == 0 {
				seen = false
			}
		}
		if !seen {
			f.missing = append(f.missing, fmt.Sprintf("line %d %q: processed %d times, outputs %v", l.id, l.text, processed[l.text], countsOf(outs, l.outputs)))
		}
	}
	return f
}

// explainRuns runs explain over the recorded runs and checks its exit
// against its answer; it returns the answer (nil when there is no run to
// explain or it printed no JSON) and the exit code.
func (o *oracle) explainRuns(recorded []*outcome) (*explainDoc, int) {
	if len(recorded) == 0 {
		return nil, 0
	}
	var names []string
	for _, r := range recorded {
		names = append(names, r.store)
	}
	args := []string{"explain", strings.Join(names, ","), "--json"}
	eb, code := o.blackbox(args...)
	var e explainDoc
	if err := json.Unmarshal(eb, &e); err != nil {
		o.fail(InvAgree, "explain %s: exit %d, no JSON: %s", names, code, firstLine(string(eb)))
		return nil, code
	}
	if want := boolExit(!e.Lost && e.Complete, 0, 3); code != want {
		o.fail(InvAgree, "explain says lost %v, complete %v but exits %d", e.Lost, e.Complete, code)
	}
	return &e, code
}

// checkRunSets gives explain and report sets of runs they cannot answer
// for, as a careless operator would: the same recording twice, a copy of
// one beside it, the runs out of order. Each must be refused (exit 2).
func (o *oracle) checkRunSets(recorded []*outcome) {
	if len(recorded) == 0 {
		return
	}
	first := recorded[0].store
	sets := map[string][]string{"the same recording twice": {first, first}}
	if strings.HasSuffix(first, ".csv") {
		cp := "copy-of-" + first
		if copyFile(filepath.Join(o.sr.dir, first), filepath.Join(o.sr.dir, cp)) == nil {
			sets["a recording and a copy of it"] = []string{first, cp}
		}
	}
	if len(recorded) >= 2 {
		sets["runs out of order"] = []string{recorded[1].store, first}
	}
	for what, set := range sets {
		runs := strings.Join(set, ",")
		if b, code := o.blackbox("explain", runs, "--json"); code != 2 {
			o.fail(InvAgree, "explain %s (%s) answered (exit %d) instead of refusing: %s", runs, what, code, firstLine(string(b)))
		}
		if b, code := o.blackbox("report", runs, "-o", "report-check.html"); code != 2 {
			o.fail(InvAgree, "report %s (%s) answered (exit %d) instead of refusing: %s", runs, what, code, firstLine(string(b)))
		}
	}
}

func head[T any](xs []T, n int) []T { return xs[:min(n, len(xs))] }

func countsOf(m map[string]int, ids []string) []int {
	var out []int
	for _, id := range ids {
		out = append(out, m[id])
	}
	return out
}

// anyKilledIncomplete reports whether a killed run's recording lost rows
// no later run holds (its cut batch): explain may then say so.
func (o *oracle) anyKilledIncomplete() bool {
	for _, r := range o.sr.runs {
		if r.killed() || r.faulted {
			return true
		}
	}
	return false
}

// lossSaid names the first run (or member) whose status or exit says it
// was not lossless, or whose recording holds a loss it counted (a killed
// run can say it no other way), "" if none did. With stopped false it
// leaves out the runs that stopped on their fault (exit 3: a disk that
// filled up, a state that could not be saved): like a killed run's, the
// lines such a run did not finish are the next run's to deliver again, so
// "nothing lost" over the runs is no contradiction of it; a line never
// applied still needs a run's claim and explain's (checkLines).
func (o *oracle) lossSaid(stopped bool) string { return o.said(stopped, true) }

// lossSaidByRuns is lossSaid of the runs alone, without the second
// members beside them: what explain over the runs' recordings reads.
func (o *oracle) lossSaidByRuns(stopped bool) string { return o.said(stopped, false) }

func (o *oracle) said(stopped, members bool) string {
	for _, r := range o.sr.runs {
		xs := []*outcome{r}
		if members {
			xs = append(xs, r.member)
		}
		for _, x := range xs {
			if x == nil || o.empty[x.store] {
				continue
			}
			if x.faulted && x.exit == 3 {
				if !stopped {
					continue
				}
				return fmt.Sprintf("run %d stopped on its fault (exit 3)", x.index)
			}
			if x.status != nil && !x.status.Lossless {
				return fmt.Sprintf("run %d said not lossless", x.index)
			}
			if rec := o.recs[x.store]; rec != nil && rec.count("LOST")+rec.count("DROPPED") > 0 {
				return fmt.Sprintf("run %d recorded a loss (%s)", x.index, x.store)
			}
			if rec := o.recs[x.store]; rec != nil && slices.ContainsFunc(rec.rows, releasedProcessed) {
				// The operator released (or seeked past) processed items
				// still holding the commit: no DROPPED row (their rows
				// stand), but the run counted them, and explain names the
				// CONTROL row among its losses.
				return fmt.Sprintf("run %d recorded a release of processed items (%s)", x.index, x.store)
			}
			if rec := o.recs[x.store]; x.killed() && rec != nil && slices.ContainsFunc(rec.rows, func(r row) bool { return r.kind == "LOST" }) {
				// A killed run says nothing, but the loss it counted is
				// in its recording: a restart may resume past it (the
				// commit moved on), and explain names it.
				return fmt.Sprintf("run %d recorded a LOST row before it was killed", x.index)
			}
		}
	}
	return ""
}

// releasedProcessed reports whether r is the CONTROL row of a release or
// a forward seek that took processed items still holding the commit (its
// detail's processed count, docs/FORMAT.md).
func releasedProcessed(r row) bool {
	if r.kind != "CONTROL" {
		return false
	}
	var d struct {
		Processed int64 `json:"processed"`
	}
	return json.Unmarshal([]byte(r.detail), &d) == nil && d.Processed > 0
}

// appliedByState decodes, from the ledger's state files of the last run
// that ran (FILE, or FILE#wK for its workers), how many times each line
// was applied: each account's balance in base 3 (summed over the
// workers' files) holds one digit per line of that account.
func (o *oracle) appliedByState(lines []line) (map[int]int, bool) {
	workers := 0
	for _, r := range o.sr.runs {
		if !r.refused {
			workers = r.workers
		}
	}
	if workers == 0 {
		return nil, false
	}
	names := []string{stateFile}
	if workers > 1 {
		names = names[:0]
		for w := range workers {
			names = append(names, stateFile+"#w"+strconv.Itoa(w))
		}
	}
	bal := map[string]*big.Int{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(o.sr.dir, n))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			o.fail(InvOnce, "reading the state %s: %v", n, err)
			return nil, false
		}
		var st struct {
			Balances map[string]json.Number `json:"balances"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			o.fail(InvOnce, "the state %s is not the ledger's JSON: %v", n, err)
			return nil, false
		}
		for acct, v := range st.Balances {
			x, ok := new(big.Int).SetString(v.String(), 10)
			if !ok {
				o.fail(InvOnce, "the state %s: balance %s of %s", n, v, acct)
				return nil, false
			}
			if bal[acct] == nil {
				bal[acct] = new(big.Int)
			}
			bal[acct].Add(bal[acct], x)
		}
	}
	// Each line's digit in each account it moves: the digit must be the
	// same in all of them (a transfer moves two).
	digits := map[string][]int64{}
	for acct, b := range bal {
		x := new(big.Int).Abs(b)
		var ds []int64
		three := big.NewInt(3)
		m := new(big.Int)
		for x.Sign() > 0 {
			x.DivMod(x, three, m)
			ds = append(ds, m.Int64())
		}
		digits[acct] = ds
	}
	applied := map[int]int{}
	for _, l := range lines {
		n := -1
		for acct, t := range l.postings {
			d := int64(0)
			if ds := digits[acct]; t < len(ds) {
				d = ds[t]
			}
			if n >= 0 && int64(n) != d {
				o.fail(InvOnce, "line %d %q: its accounts disagree on how many times it was applied", l.id, l.text)
			}
			n = int(d)
		}
		if n >= 0 {
			applied[l.id] = n
		}
	}
	return applied, true
}

// checkDiff checks diff of the stitched runs: its completeness against
// the runs' shapes, and, for a scenario where nothing was lost and the
// input was only appended to, that it matches a clean run of the input.
func (o *oracle) checkDiff(recorded []*outcome) {
	if len(recorded) == 0 {
		return
	}
	var names []string
	for _, r := range recorded {
		names = append(names, r.store)
	}
	side := strings.Join(names, ",")
	db, dcode := o.blackbox("diff", side, side, "--json", "--ignore", "at,n,balance")
	var d diffDoc
	if err := json.Unmarshal(db, &d); err != nil {
		o.fail(InvAgree, "diff %s: exit %d, no JSON: %s", side, dcode, firstLine(string(db)))
		return
	}
	// The stitching rule: every run but the last may end as a kill
	// leaves a recording (no END, a torn last line, the orphan rows of
	// the input whose write the kill cut); any other problem, or a last
	// run that is not complete, is not complete. An input a kill cut is
	// known only if a later run delivered it again (else its outputs are
	// not known, and diff may say not complete): with one, the verdict
	// is not judged.
	want, cut := true, false
	for i, r := range recorded {
		for k := range o.recs[r.store].shape() {
			if i == len(recorded)-1 || k != "unfinished" && k != "torn" && k != "orphan" {
				want = false
			}
			cut = cut || k == "orphan" && i < len(recorded)-1
		}
	}
	if d.Complete != want && !(cut && want) {
		o.fail(InvAgree, "diff calls the stitched runs %s complete %v; by their recordings they are %v", side, d.Complete, want)
	}
	if code := boolExit(d.Complete, 0, 3); d.Complete && d.Same && dcode != 0 || !d.Complete && dcode != code {
		o.fail(InvAgree, "diff says complete %v, same %v but exits %d", d.Complete, d.Same, dcode)
	}
}
