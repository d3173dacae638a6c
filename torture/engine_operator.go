package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
)

// The operator scenario (engine property "operator"): a step list drawn
// from the seed interleaves publishing items into a positioned feed with
// every operator action on a running engine: pause (Engine.Fence) and
// resume (Engine.Resume, Engine.Unfence), clear a latched binding
// (Engine.ClearOverload), release a held queue (Engine.Release), a forward
// seek (Engine.Seek: a dry run, then the seek with the generation read),
// each real action preceded (as drawn) by an attempt the engine must refuse
// (a stale or foreign generation, a group not fenced, a seek target it
// cannot reach), and a kill (Engine.Kill). The oracle keeps its own model
// of what each action must do and holds the engine's observations to it
// (docs/TORTURE.md "operator").

// opStep is one step of an operator scenario: a plain value.
type opStep struct {
	Kind  string // publish, let, fence, offer, resume, release, seek, clear, kill, back
	Group int    // the group acted on (let, fence, resume, release, seek, clear, back)
	N     int    // publish, offer: how many items; let: how many more items pass the group's gate (0: all); back: the target seq
	Stuck int    // let: the Stuck-th of those items stays held back until the group's next let (0: none)
	Via   string // resume: Resume or Unfence; seek: latest or last; kill: abandon or finish
	Wrong string // the refused attempt made first: "" none; other, never, spent (a generation); past, back, within (a seek target)
}

func (s opStep) String() string {
	g := opGroupNames[s.Group]
	var out string
	switch s.Kind {
	case "publish", "offer":
		out = fmt.Sprintf("%s %d", s.Kind, s.N)
	case "let":
		out = fmt.Sprintf("let %s +%d", g, s.N)
		if s.Stuck > 0 {
			out += fmt.Sprintf(", holding back #%d of them", s.Stuck)
		}
		if s.N == 0 {
			out = "let " + g + " all"
		}
	case "fence", "clear":
		out = s.Kind + " " + g
	case "resume", "seek":
		out = fmt.Sprintf("%s %s %s", s.Kind, g, s.Via)
	case "release":
		out = "release " + g
	case "kill":
		out = "kill " + s.Via
	case "back":
		out = fmt.Sprintf("back %s to %d", g, s.N)
	}
	if s.Wrong != "" {
		out += " [refused first: " + s.Wrong + "]"
	}
	return out
}

// opGroupNames names the scenario's groups.
var opGroupNames = []string{"a", "b"}

// genOpSteps draws the step list of an operator scenario of n items and
// the given number of groups. It keeps the model the steps need to be
// drawn sensibly (which group is fenced, which has a spent generation);
// every action is drawn in every state: one the engine must refuse (a
// release or a seek of a group not fenced, a clear of a binding not
// latched) is part of what is tested.
func genOpSteps(r *rand.Rand, n, groups int) []opStep {
	fenced, spent := make([]bool, groups), make([]bool, groups)
	published := 0
	steps := []opStep{{Kind: "publish", N: 1 + r.IntN(max(1, n/3))}}
	published += steps[0].N
	for range 8 + r.IntN(16) {
		g := r.IntN(groups)
		gens := []string{"", "never"}
		if groups > 1 {
			gens = append(gens, "other")
		}
		if spent[g] {
			gens = append(gens, "spent", "spent")
		}
		kinds := []string{"offer", "release", "seek", "clear"}
		if published < n {
			kinds = append(kinds, "publish", "publish", "publish")
		}
		if fenced[g] {
			kinds = append(kinds, "resume", "release", "seek", "seek")
		} else {
			kinds = append(kinds, "let", "let", "let", "fence", "fence")
		}
		s := opStep{Kind: pick(r, kinds...), Group: g}
		switch s.Kind {
		case "publish":
			s.N = min(n-published, 1+r.IntN(max(1, n/4)))
			published += s.N
		case "let":
			if s.N = r.IntN(10); s.N > 1 && r.IntN(2) == 0 {
				s.Stuck = 1 + r.IntN(s.N-1) // items after it pass (with several workers)
			}
		case "fence":
			fenced[g] = true
		case "offer":
			s.N = 1 + r.IntN(4)
		case "resume":
			s.Via, s.Wrong = pick(r, "Resume", "Resume", "Unfence"), pick(r, gens...)
			fenced[g] = false
		case "release":
			if fenced[g] {
				s.Wrong = pick(r, gens...)
				spent[g] = true
			}
		case "seek":
			if fenced[g] {
				s.Via, s.Wrong = pick(r, "latest", "last"), pick(r, append(gens, "past", "back", "within")...)
				spent[g] = true
			}
		}
		steps = append(steps, s)
	}
	if r.IntN(3) == 0 {
		steps = append(steps, opStep{Kind: "kill", Via: pick(r, "abandon", "finish")})
	} else if published >= 2 && r.IntN(2) == 0 {
		// A backwards seek ends the steps: every group let through all it
		// was given, then the group fenced and moved back to seq N.
		gens := []string{"", "never", "unfenced"}
		if groups > 1 {
			gens = append(gens, "other")
		}
		steps = append(steps, opStep{Kind: "back", Group: r.IntN(groups), N: 1 + r.IntN(published-1), Wrong: pick(r, gens...)})
	}
	return steps
}

// opGroup is a group of the operator scenario: its processor, shared by
// the instances of its workers (safe for concurrent use), and the
// scenario's model of it (its goroutine's only). Items of feed f are the
// ints 1..n; an item passes the group's gate once it is at most allow and
// not the one held back (stuck).
type opGroup struct {
	name    string
	workers int

	mu      sync.Mutex
	allow   int
	stuck   int           // an item held back (0: none)
	changed chan struct{} // closed (and replaced) when the gate opens further

	entered, handled, completed []atomic.Int32 // by item, [0] unused
	pushHandled                 atomic.Int64

	// The model.
	fenced    bool
	base      int64    // the feed sequence its live queue began after (a release or seek replaced it then)
	lost      []opLoss // what its releases and seeks took
	spent     []int64  // the generations a release or a seek spent
	latched   bool     // its push binding lost an item since its last clear
	latches   int      // how many times it latched
	clears    []string // the reasons of the clears taken
	refusedRs []string // the reasons given to the attempts the engine refused
	offered   int64    // push items offered while it was not fenced
	// back is the backwards seek that moved the group back, if any.
	back *opBack
}

// opBack is a backwards seek of a group: to the target seq, the feed's
// last seq at the seek (through: the items to+1..through are read again
// for the group, under seqs after through), and how many times the group
// had handled and completed each item then.
type opBack struct {
	to, through        int64
	handled, completed []int32
}

// item is the item (its log offset) the feed published as seq: seq
// itself, or after a backwards seek of a group, the item read again
// (or read for the first time) at that place (o.obs.mu held, or the run
// stopped).
func (o *opObserver) item(seq int64) int64 {
	if b := o.back; b != nil && seq > b.through {
		return b.to + seq - b.through
	}
	return seq
}

// need is how many completions by g of item v, published as seq, a
// commit through seq needs: one more than before the seek for an item
// read again for the group moved back.
func (b *opBack) need(g, sought *opGroup, seq, v int64) int32 {
	if b == nil || g != sought || seq <= b.through {
		return 1
	}
	return b.completed[v] + 1
}

// opLoss is what one release or seek took from a group's queue.
type opLoss struct {
	step                   int
	reason                 string // the Drops' whole reason (prefix and the operator's)
	first, last            int64
	unprocessed, processed int64
}

// pushItem is an item of the push feed.
type pushItem int

func (g *opGroup) OnEvent(cy *core.Cycle, ev any) error {
	v, ok := ev.(int)
	if !ok {
		g.pushHandled.Add(1)
		return nil
	}
	g.entered[v].Add(1)
	cy.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
		g.completed[v].Add(1)
		return nil
	}))
	for {
		g.mu.Lock()
		pass, ch := v <= g.allow && v != g.stuck, g.changed
		g.mu.Unlock()
		if pass {
			break
		}
		select {
		case <-ch:
		case <-cy.Context().Done():
			return cy.Context().Err()
		}
	}
	g.handled[v].Add(1)
	return nil
}

// let lets items through the gate up to through, but stuck (0: none);
// the item held back before passes now.
func (g *opGroup) let(through, stuck int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.allow, g.stuck = max(g.allow, through), stuck
	close(g.changed)
	g.changed = make(chan struct{})
}

// gate is how far the gate lets items through, and the one it holds back.
func (g *opGroup) gate() (allow, stuck int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.allow, g.stuck
}

// releasedAt reports whether item v was taken from the group by a release
// or a seek.
func (g *opGroup) releasedAt(v int64) bool {
	return slices.ContainsFunc(g.lost, func(l opLoss) bool { return v >= l.first && v <= l.last })
}

// queue is what the group's live queue was given, the items after base
// through the feed's last sequence seq: how many it has not completed,
// and the last of the contiguous run of those it completed (base: none).
func (g *opGroup) queue(seq int64) (uncompleted, prefix int64) {
	prefix = g.base
	for prefix < seq && g.completed[prefix+1].Load() > 0 {
		prefix++
	}
	for v := g.base + 1; v <= seq; v++ {
		if g.completed[v].Load() == 0 {
			uncompleted++
		}
	}
	return uncompleted, prefix
}

// prefix is the last item of the contiguous run from 1 of items the group
// completed or lost (released or skipped), within 1..n.
func (g *opGroup) prefix(n int) int64 {
	p := int64(0)
	for p < int64(n) && (g.completed[p+1].Load() > 0 || g.releasedAt(p+1)) {
		p++
	}
	return p
}

// opObserver collects what the engine tells of the run: safe for
// concurrent use.
type opObserver struct {
	mu      sync.Mutex
	drops   []opDrop
	changes []engine.LossStateChange
	early   []opEarly // commits past an item a group had not completed
	checked int64
	// back and sought: the backwards seek of the run and its group, set
	// before the re-read items are published.
	back   *opBack
	sought *opGroup
	// completedRuns are the runs of items not handed again told
	// (Observer.AlreadyCompleted), per group and stream.
	completedRuns map[string][]engine.Completed
}

// opEarly is a commit through seq c of an item v that group g had not
// completed then: it must be one g lost.
type opEarly struct {
	g    *opGroup
	v, c int64
}

type opDrop struct {
	stream string
	d      engine.Drop
}

func (o *opObserver) observer(groups []*opGroup) engine.Observer {
	return engine.Observer{
		Dropped: func(stream string, d engine.Drop) {
			o.mu.Lock()
			o.drops = append(o.drops, opDrop{stream: stream, d: d})
			o.mu.Unlock()
		},
		LossState: func(_ string, c engine.LossStateChange) {
			o.mu.Lock()
			o.changes = append(o.changes, c)
			o.mu.Unlock()
		},
		// Each commit of f: every item it covers was completed by every
		// group, or lost by it (checked at the end: a release's range is
		// known once it returned, the commit past it may come before).
		Committed: func(feed string, c engine.Commit) {
			if feed != "f" {
				return
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			for s := o.checked + 1; s <= c.Seq; s++ {
				v := o.item(s)
				for _, g := range groups {
					if v >= int64(len(g.completed)) || g.completed[v].Load() < o.back.need(g, o.sought, s, v) {
						o.early = append(o.early, opEarly{g: g, v: v, c: c.Seq})
					}
				}
			}
			o.checked = max(o.checked, c.Seq)
		},
		AlreadyCompleted: func(group string, c engine.Completed) {
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.completedRuns == nil {
				o.completedRuns = map[string][]engine.Completed{}
			}
			g, _, _ := strings.Cut(group, "#") // a worker's stream: group#wN
			o.completedRuns[g] = append(o.completedRuns[g], c)
		},
	}
}

// opRun is an operator scenario under way.
type opRun struct {
	ctx       context.Context
	n         int
	steps     []opStep
	groups    []*opGroup
	log       *memsource.Log
	eng       *engine.Engine
	f, push   *engine.Feed
	obs       *opObserver
	published int
	paused    int64 // the feed's sequence when a group was fenced, none before: it takes nothing while one is (-1: none is)
	pushed    int64
	released  int64 // what the releases and seeks took, all groups
	what      string
	fail      func(string, ...any)
	note      func(string)
	step      int // the step under way, 1-based; 0 once the steps are done
}

// opDraw draws an operator scenario from e: each group's workers, the
// groups' MaxGap and the steps.
func opDraw(e engineSpec) (workers []int, maxGap int, steps []opStep) {
	r := rand.New(rand.NewPCG(e.Draw, 0x6f70))
	ng := 1 + r.IntN(2)
	maxGap = 1 + r.IntN(8)
	for range ng {
		workers = append(workers, pick(r, 1, e.Workers))
	}
	return workers, maxGap, genOpSteps(r, e.Items, ng)
}

// operatorRun runs the operator scenario of e (see the top of this file).
func operatorRun(ctx context.Context, e engineSpec, fail func(string, ...any), note func(string)) error {
	o := &opRun{ctx: ctx, n: e.Items, paused: -1, log: memsource.NewLog(), obs: &opObserver{}, note: note}
	workers, maxGap, steps := opDraw(e)
	var desc []string
	for i, w := range workers {
		g := &opGroup{name: opGroupNames[i], workers: w, changed: make(chan struct{}),
			entered: make([]atomic.Int32, o.n+1), handled: make([]atomic.Int32, o.n+1), completed: make([]atomic.Int32, o.n+1)}
		o.groups = append(o.groups, g)
		desc = append(desc, fmt.Sprintf("%s %d workers", g.name, g.workers))
	}
	o.steps = steps
	var list []string
	for _, s := range o.steps {
		list = append(list, s.String())
	}
	o.what = fmt.Sprintf("operator (%d items; %s; max gap %d; steps: %s)", o.n, strings.Join(desc, ", "), maxGap, strings.Join(list, "; "))
	o.fail = func(format string, args ...any) {
		at := "at the end"
		if o.step > 0 {
			at = fmt.Sprintf("step %d", o.step)
		}
		fail("%s: %s: %s", o.what, at, fmt.Sprintf(format, args...))
	}
	abandon := slices.ContainsFunc(o.steps, func(s opStep) bool { return s.Kind == "kill" && s.Via == "abandon" })
	cfg := engine.Config{Logger: quiet, DrainTimeout: 10 * time.Second, KillAbandon: abandon,
		Feeds: []engine.FeedConfig{{Name: "f", Source: o.log.GroupSource(), QueueSize: o.n + 1, SkipCompleted: true},
			{Name: "push", Policy: engine.Pause(), QueueSize: 1024}},
		Observer: o.obs.observer(o.groups),
	}
	for _, g := range o.groups {
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: g.name, Feeds: []string{"f", "push"}, Workers: g.workers,
			MaxGap: maxGap, Order: engine.OrderNone,
			Processors: []engine.ProcessorConfig{{Name: g.name, Processor: g, New: func() (core.Processor, error) { return g, nil }}}})
	}
	eng, err := engine.New(cfg)
	if err != nil {
		return err
	}
	o.eng, o.f, o.push = eng, eng.Feed("f"), eng.Feed("push")
	if err := eng.Start(ctx); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			for _, g := range o.groups {
				g.let(o.n, 0)
			}
			eng.Stop(context.WithoutCancel(ctx))
		}
	}()
	killed := false
	for i, s := range o.steps {
		o.step = i + 1
		note(fmt.Sprintf("step %d: %s", o.step, s))
		if s.Kind == "kill" {
			killed = true
			break
		}
		if s.Kind == "back" {
			if !o.seekBack(o.groups[s.Group], s) {
				return nil
			}
			continue
		}
		if !o.do(s) {
			return nil
		}
		if !o.quiesce() || !o.checkModel(true) {
			return nil
		}
	}
	stopped = true
	if killed {
		o.kill(o.steps[o.step-1].Via)
	} else {
		o.step = 0
		o.finish()
	}
	return nil
}

// gen is the generation of g's live queue of f.
func (o *opRun) gen(g *opGroup) int64 { return live(o.f.Status(), g).Generation }

// live is g's live queue of f in st.
func live(st engine.FeedStatus, g *opGroup) engine.SubscriberStatus {
	for _, s := range st.Subscribers {
		if s.Queue == g.name+"/f" && !s.Removed {
			return s
		}
	}
	return engine.SubscriberStatus{}
}

// refused runs an attempt the engine must refuse with want, changing
// nothing.
func (o *opRun) refused(what string, want error, attempt func() error) {
	before := o.view()
	err := attempt()
	if !errors.Is(err, want) {
		o.fail("%s returned %v, want %v", what, err, want)
	}
	o.note(fmt.Sprintf("  %s: %v", what, err))
	if !o.quiesce() {
		return
	}
	if after := o.view(); after != before {
		o.fail("%s (refused: %v) changed the engine:\n  before %s\n  after  %s", what, err, before, after)
	}
}

// wrongGen is a generation naming no live queue of g on f: as drawn
// (never issued, another group's, one g's release or seek spent); 0 for
// none.
func (o *opRun) wrongGen(g *opGroup, kind string) int64 {
	switch kind {
	case "never":
		return o.gen(g) + 1<<40
	case "other":
		for _, h := range o.groups {
			if h != g {
				return o.gen(h)
			}
		}
	case "spent":
		if len(g.spent) > 0 {
			return g.spent[len(g.spent)-1]
		}
	}
	return 0
}

// reason is the operator's reason of the step's action.
func (o *opRun) reason(what string) string { return fmt.Sprintf("torture step %d: %s", o.step, what) }

// do carries out one step (not a kill) and checks its immediate outcome.
// It reports false when the scenario cannot go on.
func (o *opRun) do(s opStep) bool {
	var g *opGroup
	if s.Kind != "publish" && s.Kind != "offer" {
		g = o.groups[s.Group]
	}
	switch s.Kind {
	case "publish":
		items := make([]any, s.N)
		for i := range items {
			items[i] = o.published + 1 + i
		}
		o.published += s.N
		o.log.Append(items...)
	case "let":
		allow, _ := g.gate()
		switch {
		case s.N == 0:
			g.let(o.n, 0)
		case s.Stuck > 0:
			g.let(allow+s.N, allow+s.Stuck)
		default:
			g.let(allow+s.N, 0)
		}
	case "fence":
		if o.paused < 0 { // quiescent, none fenced: the feed took every item published
			o.paused = int64(o.published)
		}
		if err := o.eng.Fence(g.name); err != nil {
			o.fail("Fence %s: %v", g.name, err)
			return false
		}
		g.fenced = true
	case "offer":
		for range s.N {
			o.pushed++
			if err := o.push.Offer(pushItem(o.pushed)); err != nil {
				o.fail("Offer: %v", err)
				return false
			}
		}
		for _, g := range o.groups {
			if g.fenced { // its copy is dropped: a PAUSE binding promised none, it latches
				if !g.latched {
					g.latches++
				}
				g.latched = true
			} else {
				g.offered += int64(s.N)
			}
		}
	case "resume":
		if w := o.wrongGen(g, s.Wrong); w != 0 {
			o.refused(fmt.Sprintf("Resume %s generation %d (%s)", g.name, w, s.Wrong), engine.ErrGeneration,
				func() error { return o.eng.Resume("f", g.name, w) })
		}
		var err error
		if s.Via == "Resume" {
			err = o.eng.Resume("f", g.name, o.gen(g))
		} else {
			err = o.eng.Unfence(g.name)
		}
		if err != nil {
			o.fail("%s %s: %v", s.Via, g.name, err)
			return false
		}
		g.fenced = false
		if !slices.ContainsFunc(o.groups, func(g *opGroup) bool { return g.fenced }) {
			o.paused = -1
		}
	case "release":
		return o.release(g, s)
	case "seek":
		return o.seek(g, s)
	case "clear":
		reason := o.reason("clear " + g.name)
		if !g.latched {
			o.refused("ClearOverload of "+g.name+" (not latched)", engine.ErrNotLatched,
				func() error { return o.eng.ClearOverload("push", g.name, reason) })
			g.refusedRs = append(g.refusedRs, reason)
			return true
		}
		if err := o.eng.ClearOverload("push", g.name, reason); err != nil {
			o.fail("ClearOverload of %s (latched): %v", g.name, err)
			return false
		}
		g.latched, g.clears = false, append(g.clears, engine.ClearedReason+reason)
		for _, q := range o.push.Status().Subscribers {
			if q.Queue == g.name+"/push" && (q.Loss.State != engine.LossUp || q.Loss.Reason != engine.ClearedReason+reason || q.Loss.Cleared.IsZero()) {
				o.fail("after the clear %s's push binding is %+v, want UP with the operator's reason %q", g.name, q.Loss, reason)
			}
		}
	}
	return true
}

// held is what g's live queue holds at a quiescent moment, as the oracle
// expects it: the feed's last sequence, and queue(seq).
func (o *opRun) held(g *opGroup) (seq, uncompleted, prefix int64) {
	seq = o.f.Status().Sequence
	uncompleted, prefix = g.queue(seq)
	return seq, uncompleted, prefix
}

// release: a release of a group not fenced is refused (its live queue is
// healthy); of a fenced one, after the drawn refused attempt, it takes
// what the queue holds, or is refused when it holds nothing.
func (o *opRun) release(g *opGroup, s opStep) bool {
	reason := o.reason("release " + g.name)
	if !g.fenced {
		o.refused("Release of "+g.name+" (not fenced)", engine.ErrNotHeld,
			func() error { _, err := o.eng.Release("f", g.name, o.gen(g), reason); return err })
		g.refusedRs = append(g.refusedRs, reason)
		return true
	}
	if w := o.wrongGen(g, s.Wrong); w != 0 {
		wr := o.reason("release " + g.name + " refused")
		o.refused(fmt.Sprintf("Release of %s generation %d (%s)", g.name, w, s.Wrong), engine.ErrGeneration,
			func() error { _, err := o.eng.Release("f", g.name, w, wr); return err })
		g.refusedRs = append(g.refusedRs, wr)
	}
	gen := o.gen(g)
	seq, uncompleted, _ := o.held(g)
	if uncompleted == 0 && live(o.f.Status(), g).Dispatched == seq-g.base {
		o.refused(fmt.Sprintf("Release of %s generation %d (holds nothing)", g.name, gen), engine.ErrNotHeld,
			func() error { _, err := o.eng.Release("f", g.name, gen, reason); return err })
		g.refusedRs = append(g.refusedRs, reason)
		return true
	}
	rel, err := o.eng.Release("f", g.name, gen, reason)
	if err != nil {
		o.fail("Release of %s generation %d holding seqs %d-%d: %v", g.name, gen, g.base+1, seq, err)
		return false
	}
	o.note(fmt.Sprintf("  released %+v", rel))
	if rel.Generation != gen || rel.Replacement == 0 || rel.Reason != reason {
		o.fail("Release returned %+v: want generation %d, a replacement, reason %q", rel, gen, reason)
	}
	o.checkTaken("the release", g, rel.FirstSeq, rel.LastSeq, rel.Unprocessed, rel.Processed)
	o.took(g, gen, rel.Replacement, seq, opLoss{step: o.step, reason: engine.ReleasedReason + reason,
		first: rel.FirstSeq, last: rel.LastSeq, unprocessed: rel.Unprocessed, processed: rel.Processed})
	if _, err := o.eng.Release("f", g.name, gen, reason); !errors.Is(err, engine.ErrGeneration) {
		o.fail("a second release of the spent generation %d returned %v, want ErrGeneration", gen, err)
	}
	return true
}

// seek: a seek (dry or not) of a group not fenced is refused; of a fenced
// one: a dry run, the drawn refused attempt (a stale or foreign
// generation, a target past the feed or before the group's position),
// the seek with the generation read (its plan is the dry run's), and the
// spent generation refused.
func (o *opRun) seek(g *opGroup, s opStep) bool {
	reason := o.reason("seek " + g.name)
	if !g.fenced {
		for _, dry := range []bool{true, false} {
			o.refused(fmt.Sprintf("Seek of %s (not fenced, dry run %v)", g.name, dry), engine.ErrNotFenced, func() error {
				_, err := o.eng.Seek("f", g.name, o.gen(g), engine.SeekTarget{Latest: true}, engine.SeekOptions{DryRun: dry, Reason: reason})
				return err
			})
		}
		g.refusedRs = append(g.refusedRs, reason)
		return true
	}
	gen := o.gen(g)
	seq, _, _ := o.held(g)
	to := engine.SeekTarget{Latest: true}
	if s.Via == "last" {
		to = engine.SeekTarget{Seq: seq}
	}
	dry, ok := o.dryRun(g, gen, to, reason)
	if !ok {
		return false
	}
	if dry.Generation != gen || dry.Replacement != 0 || !dry.DryRun || dry.After != seq || dry.Loss != (dry.Unprocessed+dry.Processed > 0) {
		o.fail("the dry run's plan %+v: want generation %d, no replacement, after the feed's last seq %d", dry, gen, seq)
	}
	if dry.Loss {
		o.checkTaken("the dry run", g, dry.FirstSeq, dry.LastSeq, dry.Unprocessed, dry.Processed)
		if dry.Before != dry.FirstSeq-1 {
			o.fail("the dry run's plan %+v: want Before just before its first seq", dry)
		}
	} else if _, uncompleted, _ := o.held(g); uncompleted > 0 || dry.Before != seq {
		o.fail("the dry run's plan %+v takes nothing, but %d items of the queue were not completed (want Before %d)", dry, uncompleted, seq)
	}
	wr := o.reason("seek " + g.name + " refused")
	switch s.Wrong {
	case "past", "back", "within":
		t, ok := engine.SeekTarget{Seq: seq + 1}, true
		switch s.Wrong {
		case "back": // refused while the queue holds an item not completed (a back step moves back)
			t, ok = engine.SeekTarget{Seq: dry.Before - 1}, dry.Before > 0 && dry.Unprocessed > 0
		case "within": // skip some of what the queue holds, keep the rest
			t, ok = engine.SeekTarget{Seq: dry.FirstSeq}, dry.Loss && dry.LastSeq > dry.FirstSeq
		}
		if ok {
			o.refused(fmt.Sprintf("Seek of %s to seq %d (%s; position %d, feed at %d)", g.name, t.Seq, s.Wrong, dry.Before, seq),
				engine.ErrSeekUnsupported, func() error {
					_, err := o.eng.Seek("f", g.name, gen, t, engine.SeekOptions{Reason: wr})
					return err
				})
			g.refusedRs = append(g.refusedRs, wr)
		}
	default:
		if w := o.wrongGen(g, s.Wrong); w != 0 {
			o.refused(fmt.Sprintf("Seek of %s generation %d (%s)", g.name, w, s.Wrong), engine.ErrGeneration, func() error {
				_, err := o.eng.Seek("f", g.name, w, to, engine.SeekOptions{Reason: wr})
				return err
			})
			g.refusedRs = append(g.refusedRs, wr)
		}
	}
	p, err := o.eng.Seek("f", g.name, gen, to, engine.SeekOptions{Reason: reason})
	if err != nil {
		o.fail("Seek of %s generation %d to %+v (dry run %+v): %v", g.name, gen, to, dry, err)
		return false
	}
	o.note(fmt.Sprintf("  sought %+v", p))
	want := dry
	want.DryRun, want.Replacement = false, p.Replacement
	if g.workers == 1 && p != want || p.Replacement == 0 || p.Generation != gen {
		o.fail("the seek's plan %+v: want the dry run's %+v with a replacement", p, dry)
	}
	if p.Loss {
		o.checkTaken("the seek", g, p.FirstSeq, p.LastSeq, p.Unprocessed, p.Processed)
	}
	o.took(g, gen, p.Replacement, seq, opLoss{step: o.step, reason: engine.SkippedReason + reason,
		first: p.FirstSeq, last: p.LastSeq, unprocessed: p.Unprocessed, processed: p.Processed})
	o.refused(fmt.Sprintf("Seek of %s with the spent generation %d", g.name, gen), engine.ErrGeneration, func() error {
		_, err := o.eng.Seek("f", g.name, gen, engine.SeekTarget{Latest: true}, engine.SeekOptions{Reason: wr})
		return err
	})
	g.refusedRs = append(g.refusedRs, wr)
	return true
}

// dryRun asks for the plan of a seek of g's generation gen to to, and
// checks that it changed nothing the engine shows once quiet. It is false
// when the run cannot go on (the failure recorded).
func (o *opRun) dryRun(g *opGroup, gen int64, to engine.SeekTarget, reason string) (engine.SeekPlan, bool) {
	before := o.view()
	dry, err := o.eng.Seek("f", g.name, gen, to, engine.SeekOptions{DryRun: true, Reason: reason})
	if err != nil {
		o.fail("the dry run of Seek of %s generation %d to %+v: %v", g.name, gen, to, err)
		return dry, false
	}
	o.note(fmt.Sprintf("  dry run %+v", dry))
	if !o.quiesce() {
		return dry, false
	}
	if after := o.view(); after != before {
		o.fail("the dry run changed the engine:\n  before %s\n  after  %s", before, after)
	}
	return dry, true
}

// finish ends a scenario without a kill: every group resumed and let
// through, the log closed; the run catches up, and stops. Then every item
// is completed by each group once, or was lost by it (released or
// skipped), the commit reaches the end.
func (o *opRun) finish() {
	for _, g := range o.groups {
		if g.fenced {
			if err := o.eng.Unfence(g.name); err != nil {
				o.fail("Unfence %s: %v", g.name, err)
			}
			g.fenced = false
		}
		g.let(o.n, 0)
	}
	o.paused = -1
	o.log.Close()
	ctx, cancel := context.WithTimeout(o.ctx, 10*time.Second)
	err := waitFor(ctx, func() bool {
		if o.log.Committed() != int64(o.published) || !o.backDone() {
			return false
		}
		for _, g := range o.groups {
			if g.prefix(o.n) < int64(o.published) || g.pushHandled.Load() < g.offered {
				return false
			}
		}
		return true
	})
	cancel()
	if err != nil {
		var gs []string
		for _, g := range o.groups {
			gs = append(gs, fmt.Sprintf("%s through %d, %d of %d push items", g.name, g.prefix(o.n), g.pushHandled.Load(), g.offered))
		}
		o.fail("the run never caught up: committed %d of %d; %s: %v", o.log.Committed(), o.published, strings.Join(gs, ", "), err)
	}
	if err := o.eng.Stop(o.ctx); err != nil {
		o.fail("Stop: %v", err)
		return
	}
	if !o.checkModel(true) {
		return
	}
	o.checkBack()
	for _, g := range o.groups {
		for v := 1; v <= o.published; v++ {
			h, c := g.handled[v].Load(), g.completed[v].Load()
			if b := g.back; b != nil && int64(v) > b.to && int64(v) <= b.through {
				h, c = b.handled[v], b.completed[v] // the re-delivery is checkBack's
			}
			if g.releasedAt(int64(v)) {
				if h > 1 || c > 1 {
					o.fail("%s handled item %d (lost) %d times, completed it %d times", g.name, v, h, c)
					break
				}
				continue
			}
			if h != 1 || c != 1 {
				o.fail("%s handled item %d %d times and completed it %d times, want once (not lost)", g.name, v, h, c)
				break
			}
		}
		if got := g.pushHandled.Load(); got != g.offered {
			o.fail("%s handled %d push items, want the %d offered while it was not fenced", g.name, got, g.offered)
		}
	}
	o.checkLosses(true)
}

// kill ends a scenario by Engine.Kill with items in flight: publishes are
// refused, the run is killed and not settled, its commit is exactly the
// contiguous prefix of what every group completed or lost; a new engine
// on the log then delivers every item past the commit once to each group
// and none before it.
func (o *opRun) kill(how string) {
	const reason = "torture: operator kill"
	if err := o.eng.Kill(reason); err != nil {
		o.fail("Kill: %v", err)
		return
	}
	if err := o.push.Offer(pushItem(0)); !errors.Is(err, engine.ErrKilled) {
		o.fail("an Offer after the kill returned %v, want ErrKilled", err)
	}
	for _, g := range o.groups {
		g.let(o.n, 0) // too late for an abandoned item; a finishing one finishes
	}
	if err := o.eng.Stop(o.ctx); err != nil {
		o.fail("Stop after the kill (%s): %v", how, err)
		return
	}
	if st := o.eng.Status(); st.Killed != reason || st.Settled {
		o.fail("status killed %q settled %v, want killed %q and not settled", st.Killed, st.Settled, reason)
	}
	want := int64(o.published)
	for _, g := range o.groups {
		want = min(want, g.prefix(o.n))
	}
	committed := o.log.Committed()
	if committed != want {
		o.fail("killed (%s): committed through %d, want exactly the contiguous prefix of what every group completed or lost, %d",
			how, committed, want)
	}
	if !o.checkModel(false) { // the push feed's queued items are lost by the kill
		return
	}
	o.checkLosses(false)

	// The restart: every item past the commit once to each group, none before it.
	o.log.Close()
	var gs []*opGroup
	cfg := engine.Config{Logger: quiet, Feeds: []engine.FeedConfig{{Name: "f", Source: o.log.Source(), QueueSize: o.n + 1}}}
	for _, g := range o.groups {
		g2 := &opGroup{name: g.name, workers: g.workers, changed: make(chan struct{}), allow: o.n,
			entered: make([]atomic.Int32, o.n+1), handled: make([]atomic.Int32, o.n+1), completed: make([]atomic.Int32, o.n+1)}
		gs = append(gs, g2)
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: g.name, Feeds: []string{"f"}, Workers: g.workers, Order: engine.OrderNone,
			Processors: []engine.ProcessorConfig{{Name: g.name, Processor: g2, New: func() (core.Processor, error) { return g2, nil }}}})
	}
	eng2, err := engine.New(cfg)
	if err != nil {
		o.fail("the restart: %v", err)
		return
	}
	if _, err := eng2.RunSettled(o.ctx); err != nil {
		o.fail("the restart after the kill: %v", err)
		return
	}
	for i, g2 := range gs {
		for v := 1; v <= o.published; v++ {
			h := g2.handled[v].Load()
			switch {
			case int64(v) <= committed && h != 0:
				o.fail("the restart delivered item %d to %s again, committed by the killed run (through %d)", v, g2.name, committed)
			case int64(v) > committed && h != 1:
				o.fail("the restart handled item %d, past the commit (%d), %d times in %s, want once", v, committed, h, g2.name)
			case h+o.groups[i].handled[v].Load() == 0 && !o.groups[i].releasedAt(int64(v)):
				o.fail("item %d was handled by %s in neither run, nor lost", v, g2.name)
			default:
				continue
			}
			break
		}
	}
	if c := o.log.Committed(); c != int64(o.published) {
		o.fail("the restart settled with the commit at %d of %d", c, o.published)
	}
}

// seekBack: a backwards seek of g, the last step. Every group is resumed
// and let through all it was given, so that g's queue holds nothing it
// has not completed; then, g fenced, after the drawn refused attempt (g
// not fenced yet, a stale or foreign generation), a dry run that must
// change nothing, the seek to seq s.N (its plan the dry run's: a
// re-delivery of s.N+1 through the feed's last seq), the spent generation
// refused, and the resume with the new one. The run's end (finish) holds
// the re-delivery to its model: each item of the range handled and
// completed once more by g, by no other group, the others told of it as
// not handed again, nothing lost.
func (o *opRun) seekBack(g *opGroup, s opStep) bool {
	for _, h := range o.groups {
		if h.fenced {
			if err := o.eng.Unfence(h.name); err != nil {
				o.fail("Unfence %s: %v", h.name, err)
				return false
			}
			h.fenced = false
		}
		h.let(o.n, 0)
	}
	o.paused = -1
	if !o.quiesce() {
		return false
	}
	reason, wr := o.reason("back "+g.name), o.reason("back "+g.name+" refused")
	to := engine.SeekTarget{Seq: int64(s.N)}
	if s.Wrong == "unfenced" {
		o.refused(fmt.Sprintf("Seek of %s back to %d (not fenced)", g.name, to.Seq), engine.ErrNotFenced, func() error {
			_, err := o.eng.Seek("f", g.name, o.gen(g), to, engine.SeekOptions{Reason: wr})
			return err
		})
		g.refusedRs = append(g.refusedRs, wr)
	}
	if err := o.eng.Fence(g.name); err != nil {
		o.fail("Fence %s: %v", g.name, err)
		return false
	}
	g.fenced, o.paused = true, int64(o.published)
	gen, seq := o.gen(g), o.f.Status().Sequence
	if w := o.wrongGen(g, s.Wrong); w != 0 {
		o.refused(fmt.Sprintf("Seek of %s back, generation %d (%s)", g.name, w, s.Wrong), engine.ErrGeneration, func() error {
			_, err := o.eng.Seek("f", g.name, w, to, engine.SeekOptions{Reason: wr})
			return err
		})
		g.refusedRs = append(g.refusedRs, wr)
	}
	dry, ok := o.dryRun(g, gen, to, reason)
	if !ok {
		return false
	}
	want := engine.SeekPlan{Feed: "f", Group: g.name, Generation: gen, Before: seq, After: to.Seq, Done: seq, Redelivery: true,
		FirstSeq: to.Seq + 1, LastSeq: seq, Redelivered: seq - to.Seq, Reason: reason, DryRun: true}
	if dry != want {
		o.fail("the dry run's plan %+v, want %+v", dry, want)
	}
	b := &opBack{to: to.Seq, through: seq, handled: make([]int32, o.n+1), completed: make([]int32, o.n+1)}
	for v := range b.handled {
		b.handled[v], b.completed[v] = g.handled[v].Load(), g.completed[v].Load()
	}
	o.obs.mu.Lock()
	o.obs.back, o.obs.sought = b, g
	o.obs.mu.Unlock()
	g.back = b
	p, err := o.eng.Seek("f", g.name, gen, to, engine.SeekOptions{Reason: reason})
	if err != nil {
		o.fail("the seek of %s generation %d back to %d (dry run %+v): %v", g.name, gen, to.Seq, dry, err)
		return false
	}
	o.note(fmt.Sprintf("  sought back %+v", p))
	want.DryRun, want.Replacement = false, p.Replacement
	if p != want || p.Replacement == 0 {
		o.fail("the seek's plan %+v: want the dry run's %+v with a replacement", p, dry)
	}
	g.spent = append(g.spent, gen)
	if err := o.eng.Resume("f", g.name, gen); !errors.Is(err, engine.ErrGeneration) {
		o.fail("Resume of %s with the spent generation %d returned %v, want ErrGeneration", g.name, gen, err)
	}
	if err := o.eng.Resume("f", g.name, p.Replacement); err != nil {
		o.fail("Resume of %s generation %d: %v", g.name, p.Replacement, err)
		return false
	}
	g.fenced, o.paused = false, -1
	return true
}

// backDone reports whether every group moved back completed each item
// of its range once more.
func (o *opRun) backDone() bool {
	for _, g := range o.groups {
		if b := g.back; b != nil {
			for v := b.to + 1; v <= b.through; v++ {
				if g.completed[v].Load() <= b.completed[v] {
					return false
				}
			}
		}
	}
	return true
}

// checkBack checks what a backwards seek re-delivered, once the run
// stopped: g handled and completed each item of the range exactly once
// more; every other group's streams were told the range's new seqs as
// not handed to it again (Observer.AlreadyCompleted: through+1 to
// through+to-through, each once per stream), and g's none.
func (o *opRun) checkBack() {
	o.obs.mu.Lock()
	defer o.obs.mu.Unlock()
	b := o.obs.back
	if b == nil {
		return
	}
	for _, g := range o.groups {
		var count int64
		for _, c := range o.obs.completedRuns[g.name] {
			if c.First.Seq <= b.through || c.Last.Seq > 2*b.through-b.to || o.obs.item(c.First.Seq) != c.First.Position.Offset {
				o.fail("%s was told items not handed again, seqs %d-%d at offsets %d-%d: want within the range read again, seqs %d-%d, at offsets %d-%d",
					g.name, c.First.Seq, c.Last.Seq, c.First.Position.Offset, c.Last.Position.Offset, b.through+1, 2*b.through-b.to, b.to+1, b.through)
			}
			count += c.Count()
		}
		want := (b.through - b.to) * int64(g.workers)
		if g == o.obs.sought {
			want = 0
			for v := b.to + 1; v <= b.through; v++ {
				if dh, dc := g.handled[v].Load()-b.handled[v], g.completed[v].Load()-b.completed[v]; dh != 1 || dc != 1 {
					o.fail("%s, moved back to %d, handled item %d %d more times and completed it %d more times, want once", g.name, b.to, v, dh, dc)
					break
				}
			}
		}
		if count != want {
			o.fail("%s's streams were told %d items not handed again, want %d (the %d items read again, for each of its %d streams; none for the group moved back)",
				g.name, count, want, b.through-b.to, g.workers)
		}
	}
}
