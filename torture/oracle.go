package torture

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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
	// Invariant is the one broken: InvLossless, InvOnce, InvAgree,
	// InvShape, InvClaims, InvEngine, InvLive, InvDelivered or
	// InvControl.
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
	for _, r := range o.sr.runs {
		o.checkControl(r)
	}
	o.checkLines()
	o.checkOut()
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
