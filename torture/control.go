package torture

// The control dimension: a run of a scenario is started with its operator
// window (run --listen 127.0.0.1:0 --control-token-file) and, while it
// follows its input, the harness sends it a drawn sequence of control
// actions over HTTP (console.Client), checking each answer as it comes;
// oracle_control.go then holds the recording to the answers
// (docs/TORTURE.md, "Control").

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/console"
)

// ctlKind is one control step.
type ctlKind string

// The control steps.
const (
	ctlBadToken     ctlKind = "bad-token"     // a pause with a token the file does not hold: 401, nothing done
	ctlPause        ctlKind = "pause"         // an indefinite pause: 200
	ctlPauseUntil   ctlKind = "pause-until"   // a pause with a short deadline: 200, and the window ends it (a resume by console)
	ctlResume       ctlKind = "resume"        // 200 (with the generation read, half the time)
	ctlClear        ctlKind = "clear"         // 200 when the binding is LATCHED, else 422
	ctlRelease      ctlKind = "release"       // with the generation read: fenced, 200 or 422 (nothing held); not fenced, 422
	ctlStaleRelease ctlKind = "stale-release" // with a generation spent or never issued: 409
	ctlSeek         ctlKind = "seek"          // a dry run (fenced: 200, a plan; else 422), then the seek with its hash (200, or 409 if the plan moved)
	ctlStalePlan    ctlKind = "stale-plan"    // a dry run, then the seek with another plan's hash: 409
	ctlSeekBack     ctlKind = "seek-back"     // a seek to a seq before the group's position (the file read again for it): as seek, or 422 when the engine or the source cannot move it back
	ctlKill         ctlKind = "kill"          // 200: the run is killed (in-flight items finish) and ends, exit 3
)

// ctlStep is one step: Until is a pause-until's deadline after the
// request; ByGen says a resume names the generation read (Engine.Resume).
type ctlStep struct {
	Kind  ctlKind
	Until time.Duration
	ByGen bool
	Back  int  // a seek back's distance, in seqs, below the group's position (at least to seq 1)
	Await bool // a pause waits first (ctlAwait at most) for the group to complete a few items
}

// ctlBackToFirst is a seek back's distance that reaches seq 1 from any
// position (the target is at least seq 1).
const ctlBackToFirst = 1 << 30

// ctlAwait bounds a pause's wait for the group to complete a few items
// (ctlStep.Await): a run given fewer lines is paused when it passes.
const ctlAwait = 2 * time.Second

func (st ctlStep) String() string {
	switch {
	case st.Kind == ctlPauseUntil:
		return fmt.Sprintf("%s %s", st.Kind, st.Until)
	case st.Kind == ctlResume && st.ByGen:
		return "resume generation"
	case st.Kind == ctlSeekBack && st.Back == ctlBackToFirst:
		return fmt.Sprintf("%s to seq 1", st.Kind)
	case st.Kind == ctlSeekBack:
		return fmt.Sprintf("%s %d", st.Kind, st.Back)
	case st.Kind == ctlPause && st.Await:
		return "pause after some items"
	}
	return string(st.Kind)
}

// controlled makes run a run that is sent control actions (drawn from r):
// it follows its input (appends only while it runs), slowed by --delay so
// that a pause finds items in its queue, meets no fault, and is ended by
// SIGTERM after the actions (or by a kill among them).
//
// A Kafka run (kafka) always draws a move back, and its steps differ
// (genControl).
func (run *runSpec) controlled(r, back *rand.Rand, kafka bool) {
	run.Follow, run.Fault, run.Alias, run.Member = true, runFault{}, "", false
	run.Delay = time.Duration(1+r.IntN(8)) * time.Millisecond
	var during []inputOp
	for _, op := range run.During {
		if op.Kind == opAppend {
			during = append(during, op)
		}
	}
	run.During = during
	run.End = runEnd{Kind: endTerm, After: time.Duration(r.IntN(100)) * time.Millisecond}
	run.Control = genControl(r, back, kafka)
}

// genControl draws a sequence of control steps: a pause with a deadline,
// a clear and a release in any state, and a pause during which the group
// is released, sought, and sent stale generations and plans, resumed at its
// end; then, drawn from back, a pause once the group completed a few
// items and a move back (one or two seeks back) before its resume; a
// request with a wrong token anywhere; sometimes a kill last.
//
// For a Kafka run (kafka) the move back is always drawn: its distance
// spans one partition's records or several (the engine moves each
// partition back to its last record at or before the target), it may
// follow a seek back to seq 1 (refused, changing nothing, when another
// partition has records after seq 1 and none at or before it), and a
// third of the time the run is killed after the seek and before the
// resume (the next run reads from the commit the move back lowered).
func genControl(r, back *rand.Rand, kafka bool) []ctlStep {
	var steps []ctlStep
	maybe := func(n int, st ctlStep) {
		if r.IntN(n) == 0 {
			steps = append(steps, st)
		}
	}
	maybe(2, ctlStep{Kind: ctlBadToken})
	maybe(3, ctlStep{Kind: ctlPauseUntil, Until: time.Duration(200+r.IntN(400)) * time.Millisecond})
	maybe(4, ctlStep{Kind: ctlClear})
	maybe(5, ctlStep{Kind: ctlRelease}) // not fenced: 422
	maybe(6, ctlStep{Kind: ctlSeek})    // not fenced: 422
	if r.IntN(5) > 0 {
		steps = append(steps, ctlStep{Kind: ctlPause})
		inner := []ctlStep{{Kind: ctlRelease}, {Kind: ctlStaleRelease}, {Kind: ctlSeek}, {Kind: ctlStalePlan},
			{Kind: ctlClear}, {Kind: ctlBadToken}}
		r.Shuffle(len(inner), func(i, j int) { inner[i], inner[j] = inner[j], inner[i] })
		steps = append(steps, inner[:1+r.IntN(len(inner))]...)
		steps = append(steps, ctlStep{Kind: ctlResume, ByGen: r.IntN(2) == 0})
	}
	switch {
	case kafka:
		steps = append(steps, ctlStep{Kind: ctlPause, Await: true})
		if back.IntN(3) == 0 {
			steps = append(steps, ctlStep{Kind: ctlSeekBack, Back: ctlBackToFirst}) // to seq 1
		}
		steps = append(steps, ctlStep{Kind: ctlSeekBack, Back: 1 + back.IntN(30)})
		if back.IntN(3) == 0 {
			steps = append(steps, ctlStep{Kind: ctlSeekBack, Back: 1 + back.IntN(30)})
		}
		if back.IntN(3) == 0 {
			// Killed with the move back recorded, maybe not yet applied:
			// the steps end here.
			return append(steps, ctlStep{Kind: ctlKill})
		}
		steps = append(steps, ctlStep{Kind: ctlResume, ByGen: back.IntN(2) == 0})
	case back.IntN(2) == 0:
		// A move back (a stream of its own: the seeds before it draw what
		// they drew): once the group completed a few items, a pause, the
		// seek back, maybe a stale plan's, and the resume.
		steps = append(steps, ctlStep{Kind: ctlPause, Await: true}, ctlStep{Kind: ctlSeekBack, Back: 1 + back.IntN(30)})
		if back.IntN(3) == 0 {
			steps = append(steps, ctlStep{Kind: ctlSeekBack, Back: 1 + back.IntN(30)}) // the first not applied yet, or a second
		}
		steps = append(steps, ctlStep{Kind: ctlResume, ByGen: back.IntN(2) == 0})
	}
	maybe(3, ctlStep{Kind: ctlBadToken})
	maybe(4, ctlStep{Kind: ctlKill})
	if len(steps) == 0 {
		steps = append(steps, ctlStep{Kind: ctlBadToken})
	}
	return steps
}

// The operator of the token file the harness writes, and its reasons.
const (
	ctlWho       = "torture"
	ctlTokenFile = "tokens"
)

// ctlResult is one request of a control step and what it was answered.
// Code is the HTTP status, 0 when no answer came.
type ctlResult struct {
	step   int // the step's index
	kind   ctlKind
	action console.Action
	req    console.Request
	code   int
	ans    console.Answer
}

// applied reports whether the window said it did the action: the CONTROL
// row it then wrote.
func (x ctlResult) applied() bool { return x.code == http.StatusOK && x.ans.Applied }

func (x ctlResult) String() string {
	s := fmt.Sprintf("step %d %s: %s -> %d", x.step+1, x.kind, x.action, x.code)
	switch {
	case x.applied():
		s += fmt.Sprintf(" applied (before %d, after %d)", x.ans.Before, x.ans.After)
	case x.ans.Error != "":
		s += ": " + x.ans.Error
	case x.ans.Plan != nil:
		s += fmt.Sprintf(" plan %+v", *x.ans.Plan)
	}
	return s
}

// ctlRun is what the harness did to a run's window: the requests in order,
// the pauses the window ended at their deadline, and what the harness found
// wrong while it acted (each a violation of InvControl).
type ctlRun struct {
	addr     string
	results  []ctlResult
	ended    []time.Time // the deadlines of the pauses the window ended, in order
	problems []string
	killed   bool // a kill was applied
}

func (cr *ctlRun) problem(format string, args ...any) {
	cr.problems = append(cr.problems, fmt.Sprintf(format, args...))
}

// ctlDeadline bounds each wait of the control steps (the window's line, a
// pause's end): past it the step is a violation, never a silent pass.
const ctlDeadline = 20 * time.Second

// writeTokens writes the run's token file.
func (sr *scenarioRun) writeTokens() error {
	line := fmt.Sprintf("%s %s\n", ctlWho, sr.token(false))
	return os.WriteFile(filepath.Join(sr.dir, ctlTokenFile), []byte(line), 0o600)
}

// token is the operator's token, or (bad) one the file does not hold.
func (sr *scenarioRun) token(bad bool) string {
	if bad {
		return fmt.Sprintf("mallory-%016x", sr.s.Seed)
	}
	return fmt.Sprintf("torture-%016x", sr.s.Seed)
}

// listening waits for the line of c saying where its window listens and
// returns the address; "" when c ended first (a refused run) or the
// deadline passed (a problem).
func (sr *scenarioRun) listening(c *child, cr *ctlRun) string {
	const prefix = "blackbox: listening on http://"
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	deadline := time.NewTimer(ctlDeadline)
	defer deadline.Stop()
	for {
		if _, rest, ok := strings.Cut(c.out.String(), prefix); ok {
			if addr, _, ok := strings.Cut(rest, "\n"); ok {
				return addr
			}
		}
		select {
		case <-c.done:
			return ""
		case <-deadline.C:
			cr.problem("the run printed no %q line within %s", prefix, ctlDeadline)
			return ""
		case <-t.C:
		}
	}
}

// control sends run i's control steps to c's window, each answer checked
// against what the step must be answered; a refused request (or a dry run)
// must leave the binding's generation and fence as they were.
func (sr *scenarioRun) control(ctx context.Context, i int, run runSpec, c *child) *ctlRun {
	cr := &ctlRun{}
	if cr.addr = sr.listening(c, cr); cr.addr == "" {
		sr.logf("run %d: control: no window (the run ended before it listened)", i)
		return cr
	}
	opts := console.ClientOptions{Token: sr.token(false), Timeout: ctlDeadline}
	cl, err := console.NewClient(cr.addr, opts)
	if err != nil {
		cr.problem("%v", err)
		return cr
	}
	opts.Token = sr.token(true)
	bad, err := console.NewClient(cr.addr, opts)
	if err != nil {
		cr.problem("%v", err)
		return cr
	}
	a := &actor{sr: sr, ctx: ctx, cl: cl, bad: bad, cr: cr, workers: max(run.Workers, 1)}
	for n, st := range run.Control {
		if !a.step(n, st) {
			break
		}
		if st.Kind == ctlKill && a.cr.killed {
			break // the run ends: no window to act on
		}
	}
	for _, x := range cr.results {
		sr.logf("run %d: control: %s", i, x)
	}
	for _, p := range cr.problems {
		sr.logf("run %d: control: PROBLEM %s", i, p)
	}
	return cr
}

// actor carries out the steps of one run: the harness's model of the
// group (fenced, the generation a release or a seek spent).
type actor struct {
	sr      *scenarioRun
	ctx     context.Context
	cl      *console.Client
	bad     *console.Client
	cr      *ctlRun
	workers int // the run's, the most items its group handles at once
	fenced  bool
	spent   int64
}

// binding reads the run's one binding (GET /bindings); false (a problem)
// when it cannot.
func (a *actor) binding(what string) (console.Binding, bool) {
	bs, err := a.cl.Bindings(a.ctx)
	switch {
	case err != nil:
		a.cr.problem("%s: GET /bindings: %v", what, err)
		return console.Binding{}, false
	case len(bs) != 1:
		a.cr.problem("%s: GET /bindings: %d bindings %+v, want the run's one", what, len(bs), bs)
		return console.Binding{}, false
	}
	return bs[0], true
}

// held reads (GET /status) how many items b's queue was given that its
// group did not complete; false (a problem) when it cannot.
func (a *actor) held(b console.Binding) (int64, bool) {
	st, err := a.cl.Status(a.ctx)
	if err != nil {
		a.cr.problem("GET /status: %v", err)
		return 0, false
	}
	for _, f := range st.Feeds {
		for _, sub := range f.Subscribers {
			if f.Feed == b.Feed && sub.Queue == b.Group+"/"+b.Feed && !sub.Removed { // Group is not in the JSON
				return sub.Position - sub.Dispatched, true
			}
		}
	}
	a.cr.problem("GET /status: no live queue of group %q on feed %q", b.Group, b.Feed)
	return 0, false
}

// send posts one request and records it; false when no answer came (what
// the window did is unknown: the steps stop).
func (a *actor) send(n int, kind ctlKind, cl *console.Client, action console.Action, req console.Request) (ctlResult, bool) {
	x := ctlResult{step: n, kind: kind, action: action, req: req}
	ans, err := cl.Control(a.ctx, action, req)
	var he *console.HTTPError
	switch {
	case err == nil:
		x.code, x.ans = http.StatusOK, ans
	case errors.As(err, &he):
		x.code = he.Code
		if he.Answer != nil {
			x.ans = *he.Answer
		} else {
			x.ans.Error = he.Message
		}
	default:
		a.cr.results = append(a.cr.results, x)
		a.cr.problem("step %d %s: %s got no answer: %v", n+1, kind, action, err)
		return x, false
	}
	a.cr.results = append(a.cr.results, x)
	return x, true
}

// want checks x's status is one of codes.
func (a *actor) want(x ctlResult, codes ...int) {
	for _, c := range codes {
		if x.code == c {
			return
		}
	}
	a.cr.problem("%s, want HTTP %v", x, codes)
}

// unchanged checks that a refused request or a dry run left the binding's
// generation and fence as they were (b, read before it).
func (a *actor) unchanged(x ctlResult, b console.Binding) bool {
	if x.applied() {
		return true
	}
	after, ok := a.binding(fmt.Sprintf("after step %d", x.step+1))
	if !ok {
		return false
	}
	if after.Generation != b.Generation || after.Fenced != b.Fenced {
		a.cr.problem("%s changed the binding: generation %d fenced %v before, %d %v after", x, b.Generation, b.Fenced, after.Generation, after.Fenced)
	}
	return true
}

// step carries out step n; false when the steps cannot go on.
func (a *actor) step(n int, st ctlStep) bool {
	b, ok := a.binding(fmt.Sprintf("step %d %s", n+1, st))
	if !ok {
		return false
	}
	req := console.Request{Feed: b.Feed, Group: b.Group, Reason: fmt.Sprintf("torture step %d: %s", n+1, st.Kind)}
	switch st.Kind {
	case ctlBadToken:
		req.Indefinite = true
		x, ok := a.send(n, st.Kind, a.bad, console.ActionPause, req)
		if !ok {
			return false
		}
		a.want(x, http.StatusUnauthorized)
		return a.unchanged(x, b)
	case ctlPause:
		if st.Await {
			if b, ok = a.completed(n, 4, a.sr.kafka != nil); !ok {
				return false
			}
		}
		req.Indefinite = true
		x, ok := a.send(n, st.Kind, a.cl, console.ActionPause, req)
		if !ok {
			return false
		}
		a.want(x, http.StatusOK)
		a.fenced = a.fenced || x.applied()
		return true
	case ctlPauseUntil:
		until := time.Now().Add(st.Until).UTC()
		req.Until = &until
		x, ok := a.send(n, st.Kind, a.cl, console.ActionPause, req)
		if !ok {
			return false
		}
		if x.code == http.StatusBadRequest && !x.ans.At.Before(until) {
			// The request reached the window after its deadline (a slow
			// machine): an honest refusal.
			return a.unchanged(x, b)
		}
		a.want(x, http.StatusOK)
		if !x.applied() {
			return a.unchanged(x, b)
		}
		return a.pauseEnds(x, until)
	case ctlResume:
		if st.ByGen {
			req.Generation = b.Generation
		}
		x, ok := a.send(n, st.Kind, a.cl, console.ActionResume, req)
		if !ok {
			return false
		}
		a.want(x, http.StatusOK)
		a.fenced = a.fenced && !x.applied()
		return true
	case ctlClear:
		x, ok := a.send(n, st.Kind, a.cl, console.ActionClear, req)
		if !ok {
			return false
		}
		if b.LossState == "LATCHED" {
			a.want(x, http.StatusOK)
		} else {
			a.want(x, http.StatusUnprocessableEntity)
		}
		return a.unchanged(x, b)
	case ctlRelease:
		req.Generation = b.Generation
		held, ok := a.held(b)
		if !ok {
			return false
		}
		x, ok := a.send(n, st.Kind, a.cl, console.ActionRelease, req)
		if !ok {
			return false
		}
		switch {
		case a.fenced && held > int64(a.workers):
			// More than its workers can be handling: items wait in the
			// queue, which a fenced group does not take.
			a.want(x, http.StatusOK)
		case a.fenced:
			a.want(x, http.StatusOK, http.StatusUnprocessableEntity) // 422: the items in flight completed, the queue holds nothing
		default:
			a.want(x, http.StatusUnprocessableEntity) // a live queue of a healthy group: nothing held
		}
		if x.applied() {
			a.spent = b.Generation
		}
		return a.unchanged(x, b)
	case ctlStaleRelease:
		req.Generation = a.spent
		if req.Generation == 0 {
			req.Generation = b.Generation + 1000 // never issued
		}
		x, ok := a.send(n, st.Kind, a.cl, console.ActionRelease, req)
		if !ok {
			return false
		}
		a.want(x, http.StatusConflict)
		return a.unchanged(x, b)
	case ctlSeek, ctlStalePlan, ctlSeekBack:
		return a.seek(n, st, b, req)
	case ctlKill:
		req = console.Request{Reason: req.Reason, Finish: true}
		x, ok := a.send(n, st.Kind, a.cl, console.ActionKill, req)
		if !ok {
			return false
		}
		a.want(x, http.StatusOK)
		a.cr.killed = x.applied()
		return true
	}
	panic("torture: unknown control step " + string(st.Kind))
}

// seek is a seek step: the dry run (it must change nothing), then the
// seek with its plan's hash (ctlSeek) or with another plan's (ctlStalePlan:
// 409, nothing changed).
//
// A seek back (ctlSeekBack) names a seq below the group's position: the
// engine may refuse it (422: items the group has not completed in its
// queue, a move back not yet applied, a target whose position it no longer
// knows, another key of the items after the target with none at or before
// it: a Kafka partition) and so may the source (422: a file it does not
// read now; a partition not owned now, a commit of unknown outcome);
// applied, its plan is a re-delivery to the target, no loss.
func (a *actor) seek(n int, st ctlStep, b console.Binding, req console.Request) bool {
	req.Generation, req.Latest = b.Generation, true
	if st.Kind == ctlSeekBack {
		if b.Position < 2 {
			return true // nothing to move back over
		}
		req.Latest, req.To = false, max(1, b.Position-int64(st.Back))
	}
	dry, ok := a.send(n, st.Kind, a.cl, console.ActionSeek, req)
	if !ok {
		return false
	}
	if !a.fenced {
		a.want(dry, http.StatusUnprocessableEntity) // a group not fenced
		return a.unchanged(dry, b)
	}
	if st.Kind == ctlSeekBack {
		a.want(dry, http.StatusOK, http.StatusUnprocessableEntity)
		if p := dry.ans.Plan; dry.code == http.StatusOK && (p == nil || !p.Redelivery || p.Loss || p.After != req.To) {
			a.cr.problem("%s: a seek back to %d planned %+v, want a re-delivery after it, no loss", dry, req.To, p)
		}
	} else {
		a.want(dry, http.StatusOK)
	}
	if dry.code != http.StatusOK {
		return a.unchanged(dry, b)
	}
	if dry.ans.Applied || dry.ans.Plan == nil || dry.ans.PlanHash == "" || console.PlanHash(*dry.ans.Plan) != dry.ans.PlanHash {
		a.cr.problem("%s: a dry run answers applied %v, plan %v, hash %q: want a plan and its hash, nothing applied",
			dry, dry.ans.Applied, dry.ans.Plan, dry.ans.PlanHash)
		return true
	}
	if !a.unchanged(dry, b) {
		return false
	}
	req.PlanHash = dry.ans.PlanHash
	if st.Kind == ctlStalePlan {
		other := *dry.ans.Plan
		other.After++
		req.PlanHash = console.PlanHash(other)
	}
	x, ok := a.send(n, st.Kind, a.cl, console.ActionSeek, req)
	if !ok {
		return false
	}
	if st.Kind == ctlStalePlan {
		a.want(x, http.StatusConflict)
	} else {
		a.want(x, http.StatusOK, http.StatusConflict) // 409: the plan moved since the dry run (an item in flight completed)
	}
	if x.applied() {
		a.spent = b.Generation
		if x.ans.Plan == nil {
			a.cr.problem("%s: an applied seek answers no plan", x)
		}
	}
	return a.unchanged(x, b)
}

// completed waits, ctlAwait at most, until the group's position is at
// least n items (every 5ms: the run is another process) and, when drained,
// its queue holds nothing it did not complete (a move back is refused
// while it does: a Kafka run's, so that most are applied), and returns its
// binding then; false (a problem) when it cannot read it.
func (a *actor) completed(step int, n int64, drained bool) (console.Binding, bool) {
	limit := time.Now().Add(ctlAwait)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		b, ok := a.binding(fmt.Sprintf("step %d: %d items completed", step+1, n))
		if !ok || time.Now().After(limit) {
			return b, ok
		}
		if b.Position >= n && drained {
			held, ok := a.held(b)
			if !ok || held == 0 {
				return b, ok
			}
		} else if b.Position >= n {
			return b, ok
		}
		select {
		case <-a.ctx.Done():
			return b, true
		case <-t.C:
		}
	}
}

// pauseEnds waits until the window ended the pause x (its deadline
// until): the binding no longer fenced, within ctlDeadline of it; the
// window records the end as a resume by console.
func (a *actor) pauseEnds(x ctlResult, until time.Time) bool {
	limit := until.Add(ctlDeadline)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		b, ok := a.binding(fmt.Sprintf("step %d: the pause's end", x.step+1))
		if !ok {
			return false
		}
		if !b.Fenced {
			a.cr.ended = append(a.cr.ended, until)
			return true
		}
		if time.Now().After(limit) {
			a.cr.problem("%s: the pause until %s did not end within %s of its deadline", x, until.Format(time.RFC3339Nano), ctlDeadline)
			return false
		}
		select {
		case <-a.ctx.Done():
			a.cr.problem("%s: %v while the pause ran", x, a.ctx.Err())
			return false
		case <-t.C:
		}
	}
}
