package torture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The oracle's invariants (docs/GUARANTEES.md, "The torture harness").
const (
	// InvLossless: a run that says lossless leaves no line unapplied;
	// a line never applied means some run said not lossless and explain
	// names a loss.
	InvLossless = 1
	// InvOnce: no line is applied twice by an app with durable state, or
	// the run refuses its flags before it does any work.
	InvOnce = 2
	// InvAgree: verify, replay, diff and explain never contradict each
	// other, nor the oracle's own reading, and each exit code matches
	// the status it prints.
	InvAgree = 3
	// InvShape: a killed run's recording has at most unfinished, torn or
	// orphan problems; a cleanly stopped run's is complete.
	InvShape = 4
	// InvClaims: a COMMIT row is a claim: nothing it covers is delivered
	// again, and Kafka holds the offsets it names.
	InvClaims = 5
	// InvLive: nothing waits without bound: a run that should end ends (a
	// hang is a failure), and a member joining a Kafka group while another
	// works through a backlog is given partitions within seconds.
	InvLive = 7
)

// Violation is one broken invariant of a scenario. A plain value.
type Violation struct {
	Invariant int    `json:"invariant"`
	What      string `json:"what"`
}

func (v Violation) String() string { return fmt.Sprintf("invariant %d: %s", v.Invariant, v.What) }

type oracle struct {
	sr   *scenarioRun
	ctx  context.Context
	recs map[string]*recording
	// empty: the recordings a killed or faulted run left empty (it recorded
	// nothing before it ended).
	empty map[string]bool
	vs    []Violation
}

func (o *oracle) fail(inv int, format string, args ...any) {
	o.vs = append(o.vs, Violation{Invariant: inv, What: fmt.Sprintf(format, args...)})
}

// blackbox runs a command of the binary in the scenario's directory and
// returns its output and exit code (-1 when a signal ended it).
func (o *oracle) blackbox(args ...string) ([]byte, int) {
	cmd := exec.CommandContext(o.ctx, o.sr.cfg.Binary, args...)
	cmd.Dir = o.sr.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = -1
		}
	} else if err != nil {
		code = -2
	}
	if code != 0 && stdout.Len() == 0 {
		stdout.Write(stderr.Bytes())
	}
	return stdout.Bytes(), code
}

type verifyDoc struct {
	Complete bool         `json:"complete"`
	Problems []problemDoc `json:"problems"`
}

type problemDoc struct {
	Kind      string `json:"kind"`
	Processor string `json:"processor"`
	Line      int64  `json:"line"`
	Detail    string `json:"detail"`
}

type replayDoc struct {
	Identical bool `json:"identical"`
	Complete  bool `json:"complete"`
	Lossless  bool `json:"lossless"`
}

type explainDoc struct {
	Lost     bool `json:"lost"`
	Complete bool `json:"complete"`
}

type diffDoc struct {
	Same     bool     `json:"same"`
	Verdict  string   `json:"verdict"`
	Complete bool     `json:"complete"`
	Why      []string `json:"why"`
}

// recorded are the runs that wrote a recording (not refused), in order.
func (o *oracle) recorded() []*outcome {
	var out []*outcome
	for _, r := range o.sr.runs {
		if r.refused {
			continue
		}
		if o.recs[r.store] == nil { // none, or not a recording (checkRun says so)
			continue
		}
		out = append(out, r)
	}
	return out
}

// check runs every check of the scenario's artifacts.
func (o *oracle) check() []Violation {
	o.recs, o.empty = map[string]*recording{}, map[string]bool{}
	for _, r := range o.sr.runs {
		o.checkRun(r)
		if r.member != nil {
			o.checkRun(r.member)
		}
	}
	o.checkLines()
	o.checkClaims()
	o.checkJoins()
	return o.vs
}

// checkJoins: in a backlog scenario the second member stays 12 s while
// the first works through thousands of records; on a topic of several
// partitions it must have been given some (its run prints each partition
// it owned). Whether it then had records to handle depends on how much
// of the backlog was left (a scenario shrunk to a few lines has none).
func (o *oracle) checkJoins() {
	if !o.sr.s.Backlog || o.sr.kafka == nil || o.sr.kafka.partitions < 2 {
		return
	}
	for _, r := range o.sr.runs {
		if r.member == nil || o.recs[r.member.store] == nil || r.member.exit != 0 {
			continue
		}
		if len(partitionsOf(r.member.output)) == 0 {
			o.fail(InvLive, "run %d: the second member was given no partition of %d in 12 s while the first worked through its backlog (a rebalance waits for it)",
				r.index, o.sr.kafka.partitions)
		}
	}
}

// checkRun checks one run: its refusal, its exit against its status, its
// recording's shape against verify and replay.
func (o *oracle) checkRun(r *outcome) {
	name := fmt.Sprintf("run %d", r.index)
	if strings.Contains(r.store, "-m2") {
		name += " (second member)"
	}
	mustRefuse := r.run.Alias != "" || r.run.Fault.Kind == FaultLocked
	if strings.Contains(r.store, "-m2") {
		mustRefuse = false
	}
	switch {
	case mustRefuse && !r.refused && !r.killed():
		o.fail(InvOnce, "%s: given %s, it was not refused (exit %s)", name, refusalWhy(r.run), r.exitText())
	case r.refused && len(r.refusedChanged) > 0:
		o.fail(InvOnce, "%s was refused (exit 2) but changed %s", name, strings.Join(r.refusedChanged, ", "))
	}
	if r.exit == 1 || r.exit < -1 || r.exit > 3 {
		o.fail(InvAgree, "%s exited %s: %s", name, r.exitText(), firstLine(r.output))
	}
	if r.status != nil && r.exit >= 0 {
		want := 3
		if r.status.Settled && r.status.Lossless {
			want = 0
		}
		if r.exit != want && r.exit != 2 {
			o.fail(InvAgree, "%s exited %d but its status says settled %v, lossless %v", name, r.exit, r.status.Settled, r.status.Lossless)
		}
	}
	path := filepath.Join(o.sr.dir, r.store)
	fi, err := os.Stat(path)
	if err != nil {
		if !r.refused && !r.killed() && !r.faulted && r.exit != 2 {
			o.fail(InvShape, "%s left no recording %s (exit %s)", name, r.store, r.exitText())
		}
		return
	}
	if r.refused {
		return
	}
	if fi.Size() == 0 && (r.killed() || r.faulted) {
		// Killed (or its store failing) before its first write reached the
		// file: a recording appears whole or not at all, and this run
		// recorded nothing, so it applied and committed nothing. verify
		// says it is not a recording.
		if vb, vcode := o.blackbox("verify", r.store); vcode != 2 {
			o.fail(InvAgree, "verify %s (an empty file) exits %d, want 2: %s", r.store, vcode, firstLine(string(vb)))
		}
		o.empty[r.store] = true
		return
	}
	rec, err := readRecording(path)
	if err != nil {
		o.fail(InvShape, "%s (%s) left %s, which is not a recording: %v", name, r.exitText(), r.store, err)
		return
	}
	o.recs[r.store] = rec
	shape := rec.shape()
	cleanStop := !r.killed() && !r.faulted && (r.exit == 0 || r.exit == 3)
	// A failure the app reported (its status counts it) is recorded as
	// such: the stream's one honest problem.
	appFailed := r.status != nil && r.status.failed() || o.sr.s.Poison || r.faulted
	for k := range shape {
		switch {
		case k == "failed" && appFailed:
		case cleanStop && !strings.Contains(r.store, "-m2"):
			o.fail(InvShape, "%s stopped cleanly (exit %s) but its recording %s has %s problems (%v)", name, r.exitText(), r.store, k, shape)
		case k != "unfinished" && k != "torn" && k != "orphan":
			o.fail(InvShape, "%s (%s) left %s with %s problems (%v)", name, r.exitText(), r.store, k, shape)
		}
	}
	// verify, replay: agree with each other and with the oracle's reading.
	vb, vcode := o.blackbox("verify", r.store, "--json")
	var v verifyDoc
	if err := json.Unmarshal(vb, &v); err != nil {
		o.fail(InvAgree, "verify %s: exit %d, no JSON: %s", r.store, vcode, firstLine(string(vb)))
		return
	}
	if want := boolExit(v.Complete, 0, 3); vcode != want {
		o.fail(InvAgree, "verify %s says complete %v but exits %d", r.store, v.Complete, vcode)
	}
	ownComplete := len(shape) == 0
	if v.Complete && !ownComplete {
		o.fail(InvAgree, "verify calls %s complete; the oracle's reader finds %v", r.store, shape)
	}
	if !v.Complete && ownComplete && !onlyKinds(v.Problems, "missing-journal", "malformed", "missing-input") {
		o.fail(InvAgree, "verify calls %s incomplete (%s); the oracle's reader finds it whole", r.store, problemKinds(v.Problems))
	}
	rb, rcode := o.blackbox("replay", r.store, "--json")
	var rp replayDoc
	if err := json.Unmarshal(rb, &rp); err != nil {
		o.fail(InvAgree, "replay %s: exit %d, no JSON: %s", r.store, rcode, firstLine(string(rb)))
		return
	}
	want := 0
	switch {
	case !rp.Identical:
		want = 1
	case !rp.Complete || !rp.Lossless:
		want = 3
	}
	if rcode != want {
		o.fail(InvAgree, "replay %s says identical %v, complete %v, lossless %v but exits %d", r.store, rp.Identical, rp.Complete, rp.Lossless, rcode)
	}
	if !rp.Identical {
		o.fail(InvAgree, "replay %s diverges from the live run", r.store)
	}
	if rp.Complete != v.Complete {
		o.fail(InvAgree, "replay calls %s complete %v, verify %v", r.store, rp.Complete, v.Complete)
	}
	if v.Complete && rp.Complete && rp.Lossless && o.sr.s.Seed%2 == 0 {
		// One recording that verify and replay call whole: explain must
		// not call it lost.
		eb, ecode := o.blackbox("explain", r.store, "--json")
		var e explainDoc
		if err := json.Unmarshal(eb, &e); err != nil {
			o.fail(InvAgree, "explain %s: exit %d, no JSON: %s", r.store, ecode, firstLine(string(eb)))
		} else if e.Lost || !e.Complete {
			o.fail(InvAgree, "verify and replay call %s complete and lossless, explain calls it lost %v, complete %v", r.store, e.Lost, e.Complete)
		}
	}
	if v.Complete && rp.Complete && strings.HasSuffix(r.store, ".csv") && o.sr.s.Seed%4 == 1 {
		o.checkTampered(rec, r.store)
	}
	if lossRows := rec.count("DROPPED") + rec.count("LOST"); lossRows > 0 && rp.Lossless {
		o.fail(InvAgree, "replay calls %s lossless; it holds %d DROPPED and LOST rows", r.store, lossRows)
	}
	if r.status != nil && !r.status.Lossless && rp.Lossless && rp.Complete && !strings.Contains(r.store, "-m2") {
		o.fail(InvAgree, "%s said not lossless, but replay of its recording %s says complete and lossless", name, r.store)
	}
}

func refusalWhy(run RunSpec) string {
	if run.Alias != "" {
		return "--" + run.Alias + " " + stateFile + "#w1/#w0 (a worker's state file)"
	}
	return "an output locked by another process"
}

func boolExit(b bool, yes, no int) int {
	if b {
		return yes
	}
	return no
}

func onlyKinds(ps []problemDoc, kinds ...string) bool {
	for _, p := range ps {
		if !slices.Contains(kinds, p.Kind) {
			return false
		}
	}
	return len(ps) > 0
}

func problemKinds(ps []problemDoc) string {
	var ks []string
	for _, p := range ps {
		if !slices.Contains(ks, p.Kind) {
			ks = append(ks, p.Kind)
		}
	}
	return strings.Join(ks, ", ")
}

// partitionsOf reads the partitions a Kafka run's output names (run prints
// one line per partition it owned: "partition t/2: committed 12, processed
// 12, lag 0, paused no[, lost N][, fenced N]"), each with the records it
// fenced (processed, never committed).
func partitionsOf(output string) map[string]int64 {
	out := map[string]int64{}
	for _, l := range strings.Split(output, "\n") {
		rest, ok := strings.CutPrefix(l, "partition ")
		if !ok {
			continue
		}
		key, fields, ok := strings.Cut(rest, ": ")
		if !ok {
			continue
		}
		out[key] += 0
		for _, f := range strings.Split(fields, ", ") {
			if v, ok := strings.CutPrefix(f, "fenced "); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					out[key] = n
				}
			}
		}
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// checkLines checks every line the harness wrote against the final state,
// --out and the recordings (invariants 1 and 2), and explain and diff
// against what the oracle knows (invariant 3).
func (o *oracle) checkLines() {
	sr := o.sr
	lines := sr.gen.lines
	// Outputs every out file holds, by identity.
	outs := map[string]int{}
	outFiles, _ := filepath.Glob(filepath.Join(sr.dir, "out*.jsonl"))
	for _, f := range outFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			o.fail(InvAgree, "reading %s: %v", filepath.Base(f), err)
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for sc.Scan() {
			if id := outputID(sr.s.App, sc.Bytes()); id != "" {
				outs[id]++
			}
		}
	}
	// Inputs the recordings hold, by payload.
	processed := map[string]int{}
	for _, rec := range o.recs {
		for _, in := range rec.inputs() {
			var s string
			if json.Unmarshal(in.payload, &s) == nil {
				processed[s]++
			}
		}
	}
	applied := map[int]int{} // line id -> times applied (ledger state)
	stateKnown := false
	if sr.s.State {
		applied, stateKnown = o.appliedByState(lines)
	}
	var missing, twice, unrecorded []string
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
				missing = append(missing, fmt.Sprintf("line %d %q never applied", l.id, l.text))
			case n > 1:
				twice = append(twice, fmt.Sprintf("line %d %q applied %d times", l.id, l.text, n))
			}
			if applied[l.id] > 0 {
				for _, id := range l.outputs {
					if outs[id] == 0 && !o.outFaulted() {
						missing = append(missing, fmt.Sprintf("line %d %q applied but its output %s is in no out file", l.id, l.text, id))
					}
				}
				if processed[l.text] == 0 {
					// The write-ahead order: an input's rows are written
					// before its completion saves the state.
					unrecorded = append(unrecorded, fmt.Sprintf("line %d %q", l.id, l.text))
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
			missing = append(missing, fmt.Sprintf("line %d %q: processed %d times, outputs %v", l.id, l.text, processed[l.text], countsOf(outs, l.outputs)))
		}
	}
	lossSaid := o.lossSaid(true)
	recorded := o.recorded()
	var explain *explainDoc
	var ecode int
	if len(recorded) > 0 {
		var names []string
		for _, r := range recorded {
			names = append(names, r.store)
		}
		args := []string{"explain", strings.Join(names, ","), "--json"}
		eb, code := o.blackbox(args...)
		ecode = code
		var e explainDoc
		if err := json.Unmarshal(eb, &e); err != nil {
			o.fail(InvAgree, "explain %s: exit %d, no JSON: %s", names, code, firstLine(string(eb)))
		} else {
			explain = &e
			if want := boolExit(!e.Lost && e.Complete, 0, 3); code != want {
				o.fail(InvAgree, "explain says lost %v, complete %v but exits %d", e.Lost, e.Complete, code)
			}
		}
	}
	if len(twice) > 0 {
		o.fail(InvOnce, "%d lines applied more than once: %s", len(twice), strings.Join(head(twice, 5), "; "))
	}
	if len(unrecorded) > 0 {
		o.fail(InvOnce, "%d lines applied to the state but in no recording (the write-ahead order): %s", len(unrecorded), strings.Join(head(unrecorded, 5), "; "))
	}
	if len(missing) > 0 {
		switch {
		case lossSaid == "":
			o.fail(InvLossless, "%d lines lost while every run said lossless: %s", len(missing), strings.Join(head(missing, 5), "; "))
		case explain != nil && ecode == 0 && o.lossSaidByRuns(true) != "":
			// explain reads the runs' recordings, not the second members'.
			o.fail(InvLossless, "%d lines lost (%s), but explain says nothing was lost: %s", len(missing), lossSaid, strings.Join(head(missing, 3), "; "))
		}
	}
	if explain != nil && explain.Lost && lossSaid == "" && len(missing) == 0 && len(twice) == 0 && !o.anyKilledIncomplete() {
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

func head(xs []string, n int) []string { return xs[:min(n, len(xs))] }

func countsOf(m map[string]int, ids []string) []int {
	var out []int
	for _, id := range ids {
		out = append(out, m[id])
	}
	return out
}

// outFaulted reports whether a run met a fault that may cut its --out.
func (o *oracle) outFaulted() bool {
	for _, r := range o.sr.runs {
		if r.run.Fault.Kind == FaultDiskFull {
			return true
		}
	}
	return false
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

// checkClaims checks that no position a COMMIT row covers is delivered
// again (invariant 5). For a file: by a later run, the same epoch at an
// offset at or below the commit. For Kafka: the same partition, by any
// member of the group in any run, after the commit (a delivery whose
// instant is past the first row written after the COMMIT row: the commit
// was made by then); a deleted topic starts its offsets again, and the
// claims before it lapse.
func (o *oracle) checkClaims() {
	if o.sr.kafka != nil {
		o.checkKafkaClaims()
		return
	}
	type claim struct {
		run    int
		store  string
		offset int64
	}
	claims := map[string]claim{} // feed|epoch -> highest committed
	for _, r := range o.recorded() {
		rec := o.recs[r.store]
		for _, in := range rec.inputs() {
			if c, ok := claims["input|"+strconv.FormatInt(in.epoch, 10)]; ok && c.run < r.index && in.offset <= c.offset {
				o.fail(InvClaims, "run %d (%s) delivered the file's offset %d (epoch %d) again, behind the COMMIT row of run %d (%s) at %d",
					r.index, r.store, in.offset, in.epoch, c.run, c.store, c.offset)
				break
			}
		}
		for _, row := range rec.rows {
			if row.kind != "COMMIT" || row.key != "" {
				continue
			}
			k := row.source + "|" + strconv.FormatInt(row.epoch, 10)
			if c, ok := claims[k]; !ok || row.offset > c.offset {
				claims[k] = claim{run: r.index, store: r.store, offset: row.offset}
			}
		}
	}
}

// claimMargin is how long after the last row written before a Kafka
// COMMIT row a delivery of what it covers must come to be surely after the
// commit: more than the batches of rows a group writes at once take, less
// than a rebalance (a revocation, a session) takes.
const claimMargin = 300 * time.Millisecond

// checkKafkaClaims is checkClaims for a Kafka feed.
func (o *oracle) checkKafkaClaims() {
	type claim struct {
		store  string
		offset int64
		by     time.Time // the commit was made by then
	}
	type era struct{ recs []*outcome }
	// Runs between topic deletions share their offsets.
	var eras []era
	for _, r := range o.sr.runs {
		if len(eras) == 0 || o.sr.topicDeletedBefore(r.index) {
			eras = append(eras, era{})
		}
		for _, x := range []*outcome{r, r.member} {
			if x != nil && !x.refused && o.recs[x.store] != nil {
				eras[len(eras)-1].recs = append(eras[len(eras)-1].recs, x)
			}
		}
	}
	for _, e := range eras {
		var claims []claim
		keys := map[int]string{}
		for _, x := range e.recs {
			rows := o.recs[x.store].rows
			for i, row := range rows {
				if row.kind != "COMMIT" || row.key == "" {
					continue
				}
				// The COMMIT row is written with the first rows written after
				// the commit was made, so every row before it was processed
				// before; with workers the rows after it may have been
				// processed before the commit too (a worker's batch written
				// later). A delivery well past the last instant before the
				// row (a rebalance's worth) was surely made after it.
				var last time.Time
				for _, prev := range rows[:i] {
					if prev.instant.After(last) {
						last = prev.instant
					}
				}
				if last.IsZero() {
					continue
				}
				by := last.Add(claimMargin)
				keys[len(claims)] = row.key
				claims = append(claims, claim{store: x.store, offset: row.offset, by: by})
			}
		}
		for _, x := range e.recs {
			// A member processes the records of a partition it had
			// queued when the partition was revoked (the revocation
			// waits only --revoke-timeout for them), possibly after the
			// next owner committed them: they are fenced, never
			// committed, and the member's run prints how many
			// (docs/GUARANTEES.md, "a rebalance revokes a partition").
			// So many deliveries of a partition behind another member's
			// claim are those; one more is a claim broken.
			fenced := partitionsOf(x.output)
			behind := map[string]int64{}
			for _, in := range o.recs[x.store].inputs() {
				for ci, c := range claims {
					if keys[ci] != in.key || in.offset > c.offset || in.at.IsZero() || !in.at.After(c.by) {
						continue
					}
					if c.store != x.store {
						if behind[in.key]++; behind[in.key] <= fenced[in.key] {
							break
						}
					}
					o.fail(InvClaims, "%s delivered %s offset %d at %s, after %s's COMMIT row claimed it committed (offset %d, made by %s); its run fenced %d of %s",
						x.store, in.key, in.offset, in.at.Format("15:04:05.000"), c.store, c.offset, c.by.Format("15:04:05.000"), fenced[in.key], in.key)
					return
				}
			}
		}
	}
}
