package torture

// The oracle's checks of one run: its refusal, its exit against its
// status, its recording's shape, and verify, replay and explain of it.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// checkRun checks one run: its refusal, its exit against its status, its
// recording's shape against verify and replay.
func (o *oracle) checkRun(r *outcome) {
	name := fmt.Sprintf("run %d", r.index)
	if strings.Contains(r.store, "-m2") {
		name += " (second member)"
	}
	o.checkExit(r, name)
	rec := o.readRun(r, name)
	if rec == nil {
		return
	}
	shape := rec.shape()
	o.checkShape(r, name, shape)
	v, ok := o.checkVerify(r.store, shape)
	if !ok {
		return
	}
	rp, ok := o.checkReplay(r.store, v)
	if !ok {
		return
	}
	o.checkVerdicts(r, name, rec, v, rp)
}

// checkExit checks a run's refusal (a run given a worker's state file or
// a locked output must be refused, and a refused run changes nothing) and
// its exit code against the status it wrote.
func (o *oracle) checkExit(r *outcome, name string) {
	mustRefuse := r.run.Alias != "" || r.run.Fault.Kind == faultLocked
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
		undelivered := int64(0)
		if r.status.Outbox != nil {
			undelivered = r.status.Outbox.Undelivered
		}
		if r.status.Settled && r.status.Lossless && undelivered == 0 {
			want = 0
		}
		if r.exit != want && r.exit != 2 {
			o.fail(InvAgree, "%s exited %d but its status says settled %v, lossless %v, %d outputs not delivered to --out",
				name, r.exit, r.status.Settled, r.status.Lossless, undelivered)
		}
	}
}

// readRun reads the recording a run left and keeps it in o.recs; nil when
// there is none to check further: the run left none (a violation unless it
// was refused, killed, faulted or exited 2), was refused, or left an empty
// file (o.empty) or one that is not a recording (a violation).
func (o *oracle) readRun(r *outcome, name string) *recording {
	path := filepath.Join(o.sr.dir, r.store)
	fi, err := os.Stat(path)
	if err != nil {
		if !r.refused && !r.killed() && !r.faulted && r.exit != 2 {
			o.fail(InvShape, "%s left no recording %s (exit %s)", name, r.store, r.exitText())
		}
		return nil
	}
	if r.refused {
		return nil
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
		return nil
	}
	rec, err := readRecording(path)
	if err != nil {
		o.fail(InvShape, "%s (%s) left %s, which is not a recording: %v", name, r.exitText(), r.store, err)
		return nil
	}
	o.recs[r.store] = rec
	return rec
}

// checkShape checks the problems the oracle's reader finds in a run's
// recording (invariant 4): none after a clean stop, at most unfinished,
// torn or orphan after a kill; a failure the app reported is recorded as
// such.
func (o *oracle) checkShape(r *outcome, name string, shape map[string]int) {
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
}

// checkVerify runs verify on a recording and checks its exit against its
// answer and its answer against the oracle's reading (shape); false when
// it printed no JSON.
func (o *oracle) checkVerify(store string, shape map[string]int) (verifyDoc, bool) {
	vb, vcode := o.blackbox("verify", store, "--json")
	var v verifyDoc
	if err := json.Unmarshal(vb, &v); err != nil {
		o.fail(InvAgree, "verify %s: exit %d, no JSON: %s", store, vcode, firstLine(string(vb)))
		return v, false
	}
	if want := boolExit(v.Complete, 0, 3); vcode != want {
		o.fail(InvAgree, "verify %s says complete %v but exits %d", store, v.Complete, vcode)
	}
	ownComplete := len(shape) == 0
	if v.Complete && !ownComplete {
		o.fail(InvAgree, "verify calls %s complete; the oracle's reader finds %v", store, shape)
	}
	if !v.Complete && ownComplete && !onlyKinds(v.Problems, "missing-journal", "malformed", "missing-input") {
		o.fail(InvAgree, "verify calls %s incomplete (%s); the oracle's reader finds it whole", store, problemKinds(v.Problems))
	}
	return v, true
}

// checkReplay runs replay on a recording and checks its exit against its
// answer, that it is identical to the live run, and that it agrees with
// verify (v) on completeness; false when it printed no JSON.
func (o *oracle) checkReplay(store string, v verifyDoc) (replayDoc, bool) {
	rb, rcode := o.blackbox("replay", store, "--json")
	var rp replayDoc
	if err := json.Unmarshal(rb, &rp); err != nil {
		o.fail(InvAgree, "replay %s: exit %d, no JSON: %s", store, rcode, firstLine(string(rb)))
		return rp, false
	}
	want := 0
	switch {
	case !rp.Identical:
		want = 1
	case !rp.Complete || !rp.Lossless:
		want = 3
	}
	if rcode != want {
		o.fail(InvAgree, "replay %s says identical %v, complete %v, lossless %v but exits %d", store, rp.Identical, rp.Complete, rp.Lossless, rcode)
	}
	if !rp.Identical {
		o.fail(InvAgree, "replay %s diverges from the live run", store)
	}
	if rp.Complete != v.Complete {
		o.fail(InvAgree, "replay calls %s complete %v, verify %v", store, rp.Complete, v.Complete)
	}
	return rp, true
}

// checkVerdicts checks what verify (v) and replay (rp) said of a run's
// recording against explain, a tampered copy (on some seeds), the loss
// rows it holds and the status the run wrote.
func (o *oracle) checkVerdicts(r *outcome, name string, rec *recording, v verifyDoc, rp replayDoc) {
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
	// A run stopped on its fault (a state it cannot save: exit 3, its group
	// failed) says not lossless for the failure, not for a loss: what it did
	// not process it did not commit, and the next run delivers it again.
	stoppedOnFault := r.faulted && r.exit == 3
	// A run its operator killed (the control dimension) counts a loss its
	// source found when the source found it (FeedStatus.Losses, and the
	// feed is not lossless), while the LOST row waits for its queue to
	// reach the loss's place: a kill that abandons the queue before it
	// leaves the run saying not lossless with no loss row. It committed
	// nothing past the loss, and the next run meets and records it again
	// (invariants 1, 4 and 5): the status errs towards "not lossless",
	// never towards a false "lossless".
	killedByOperator := r.ctl != nil && r.ctl.killed
	if r.status != nil && !r.status.Lossless && rp.Lossless && rp.Complete && !strings.Contains(r.store, "-m2") && !stoppedOnFault && !killedByOperator {
		o.fail(InvAgree, "%s said not lossless, but replay of its recording %s says complete and lossless", name, r.store)
	}
}

func refusalWhy(run runSpec) string {
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
