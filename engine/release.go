package engine

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/blackbox-audit/blackbox/engine/internal/ring"
	"github.com/blackbox-audit/blackbox/engine/internal/window"
)

// The refusals of Engine.Release, for errors.Is (besides ErrUnknown and
// ErrStopped).
var (
	// ErrGeneration: Engine.Release was given a generation that names no
	// queue of the group on the feed holding what it held when the
	// operator read it (SubscriberStatus.Generation): no queue of the
	// group has it, or that queue was released already (a release spends
	// its generation: of two operators acting on one reading, one
	// releases). Nothing was released.
	ErrGeneration = errors.New("engine: generation does not match")
	// ErrNotHeld: the queue Engine.Release named holds nothing to release:
	// it is live and its group healthy (it will process what it holds), or
	// nothing of the feed waits for it (it processed everything it was
	// given, or the feed has no source positions: nothing is ever held).
	// Nothing was released.
	ErrNotHeld = errors.New("engine: the queue holds nothing to release")
)

// ReleasedReason begins the Reason of the Drops an operator release
// reports (Observer.Dropped: DROPPED rows in the recording), followed by
// the operator's reason.
const ReleasedReason = "released by the operator (Engine.Release): "

// Released is what Engine.Release released: a plain value.
type Released struct {
	Feed  string
	Group string
	// Generation is the queue released; Replacement the queue that took
	// its place, for a live queue of a fenced or dead group (0 for a
	// removed one, which nothing replaces).
	Generation  int64
	Replacement int64
	// Unprocessed counts the items the queue was given and its group had
	// not completed (in the queue, or being handled): the group's streams
	// get DROPPED rows for them. Processed counts the items it completed
	// that still held the commit: not made durable by a processing
	// checkpoint (Engine.Hold), or, with several workers, completed beyond
	// an item not completed. Their rows are in the recording; the state
	// that applied them may not be saved.
	Unprocessed int64
	Processed   int64
	// FirstSeq and LastSeq are the feed sequences of the first and the
	// last item released.
	FirstSeq, LastSeq int64
	// Reason is the operator's reason, as recorded.
	Reason string
	// Before and After are the feed sequences through which the group
	// had completed the items of the queue released before and after the
	// release, as its record says (OperatorAction.Before and After: the
	// CONTROL row's): Before the queue's completed prefix, After where the
	// commit moves past what it released (at least Before).
	Before, After int64
}

// ReleaseOptions are Engine.ReleaseWith's options.
type ReleaseOptions struct {
	// Reason is the operator's reason: recorded with the released items,
	// and told to Observer.Acted (empty: NoReason).
	Reason string
	// Who is the operator, told to Observer.Acted (empty:
	// DefaultOperator); At when the action was taken (zero: the engine's
	// TimerClock at the release).
	Who string
	At  time.Time
}

// sealing is binding.sealed while a release reads the queue's dispatched
// count.
const sealing = -1

// Release drops the hold a queue of group keeps on feed's commit, the
// queue named by its generation (SubscriberStatus.Generation): a queue
// the group was unsubscribed from (Removed), or the live queue of a group
// fenced (Engine.Fence) or dead (an observer or a holder failed it:
// Engine.Err). What the queue holds is released as a loss of that group:
// the items it was given and had not completed (Released.Unprocessed),
// and those it completed that still held the commit (Processed: not made
// durable by its processing checkpoint, or completed by a worker beyond
// an item not completed). The commit then moves past them: the source
// commits them at its next poll once the feed's other queues processed
// them, and a restart does not deliver them again.
//
// The check and the release are one step under the engine's and the
// feed's locks, a compare-and-swap on the generation. Refused, releasing
// nothing: a generation that names no queue of the group on the feed, or
// a queue released already (ErrGeneration: a release spends its
// generation); a queue holding nothing (ErrNotHeld: live with a healthy
// group, which will process what it holds, or with nothing of the feed
// waiting for it, as on a feed without source positions); an unknown feed
// or group, or a group never subscribed to the feed (ErrUnknown); any
// release once Stop began (ErrStopped).
//
// A released item is never skipped silently: the group's streams are told
// (Observer.Dropped: DROPPED rows of the recorder) one Drop per run of
// consecutive sequences of unprocessed items, whose Reason is
// ReleasedReason followed by reason, and the drops and source losses
// marked in the queue that its group had not reported yet; at the group's
// next step, before the next item it takes, fenced or dead as well. The
// items count in the feed's status (FeedStatus.Released, and the queue's):
// the feed is no longer lossless. A completion of a released item after
// the release, by the group or by a worker that was handling it, is
// refused and counted (GroupStatus.StaleTokens): an item counts once, as
// released (the rows of an item being handled at the release may be
// written before its DROPPED row).
//
// A live queue released (its group fenced or dead) is replaced by a new,
// empty one of a new generation (Released.Replacement), as an Unsubscribe
// and a Subscribe would, so the group never handles the released items; a
// processing checkpoint holds the new queue at nothing durable. The
// release does not lift the fence: a positioned feed still pauses while
// the group is fenced or dead (Unfence it, or Unsubscribe a dead group).
// Safe for concurrent use.
//
// A release is told to Observer.Acted after every check passed and before
// it changes anything (the recorder writes its CONTROL row then, operator
// DefaultOperator: ReleaseWith names one): an error of the hook refuses
// it (ErrNotRecorded), releasing nothing.
func (e *Engine) Release(feed, group string, generation int64, reason string) (Released, error) {
	return e.ReleaseWith(feed, group, generation, ReleaseOptions{Reason: reason})
}

// ReleaseWith is Release with its options: the operator's reason, who
// the operator is and when the release was taken, as Observer.Acted is
// told them. Safe for concurrent use.
func (e *Engine) ReleaseWith(feed, group string, generation int64, opts ReleaseOptions) (Released, error) {
	reason := opts.Reason
	f, g := e.byName[feed], e.gByN[group]
	if f == nil || g == nil {
		return Released{}, fmt.Errorf("%w: feed %q group %q", ErrUnknown, feed, group)
	}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return Released{}, fmt.Errorf("%w: release of feed %q group %q", ErrStopped, feed, group)
	}
	f.mu.Lock()
	rel, err := e.releaseLocked(f, g, generation, opts)
	f.mu.Unlock()
	e.mu.Unlock()
	if err != nil {
		return Released{}, err
	}
	e.warnf("feed %q: the operator released %d unprocessed and %d processed items (seqs %d-%d) of queue %s/%s generation %d: %s",
		f.name, rel.Unprocessed, rel.Processed, rel.FirstSeq, rel.LastSeq, g.name, f.name, generation, reason)
	f.signalReady() // the window shrank: a paused source may publish
	e.watch.note()
	return rel, nil
}

// releaseLocked is Release with e.mu and f.mu held.
func (e *Engine) releaseLocked(f *Feed, g *group, generation int64, opts ReleaseOptions) (Released, error) {
	var b *binding
	var gens []int64
	for _, x := range f.all {
		if x.group == g {
			gens = append(gens, x.gen)
			if x.gen == generation {
				b = x
			}
		}
	}
	switch {
	case gens == nil:
		return Released{}, fmt.Errorf("%w: group %q never subscribed to feed %q", ErrUnknown, g.name, f.name)
	case b == nil:
		return Released{}, fmt.Errorf("%w: group %q has no queue of feed %q of generation %d (its queues: %v)", ErrGeneration, g.name, f.name, generation, gens)
	case b.sealed.Load() != 0:
		return Released{}, fmt.Errorf("%w: queue %s generation %d was released already", ErrGeneration, b.name, b.gen)
	}
	live := !b.removed.Load() // Unsubscribe removes a queue under f.mu
	switch {
	case live && !b.fenced():
		return Released{}, fmt.Errorf("%w: queue %s generation %d is live and its group healthy", ErrNotHeld, b.name, b.gen)
	case f.committer == nil || !f.win.WaitsFor(b):
		return Released{}, fmt.Errorf("%w: nothing of feed %q waits for queue %s generation %d", ErrNotHeld, f.name, b.name, b.gen)
	}
	// The record, before the effect: the completed prefix of the queue
	// released, and the last item it releases, as releaseQueue will
	// release them.
	p := planRelease(f, b)
	before := p.doneThrough
	after := before
	if p.lastSeq != 0 {
		after = max(after, p.lastSeq)
	}
	a := OperatorAction{Action: ActionRelease, Feed: f.name, Group: g.name, Who: cmp.Or(opts.Who, DefaultOperator),
		Reason: cmp.Or(opts.Reason, NoReason), At: opts.At, Before: before, After: after,
		Unprocessed: p.unprocessed, Processed: p.processed}
	if err := e.tellActed(a); err != nil {
		return Released{}, err
	}
	rel := e.releaseQueue(f, b, live, ReleasedReason, opts.Reason, p)
	rel.Before, rel.After = before, after
	return rel, nil
}

// releasePlan is what a release (or a forward seek) of a queue takes,
// read under e.mu and f.mu before the action is recorded (planRelease),
// so that the effect (releaseQueue, under the same locks) is what the
// record says: the ack point past which it takes the entries that wait
// for the queue, and which of them were processed, oldest first. The
// window changes only under f.mu; the counts it was read from (the
// queue's dispatched count, its hold's durable count, the completions of
// several workers) may move on meanwhile, but the release takes what the
// plan says.
type releasePlan struct {
	ack                    int64
	dispatched             int64   // the queue's dispatched count read
	done                   []bool  // per entry taken, oldest first: processed
	after                  []int64 // per entry taken: its position in the queue
	unprocessed, processed int64
	firstSeq, lastSeq      int64
	// doneThrough is the feed sequence through which the group completed
	// the feed's items, as the dispatched count read says: the last entry
	// taken that it dispatched, else the one before the first taken, else
	// (none taken) the feed's last sequence. Read from the same counts as
	// the rest of the plan: an item the plan takes as unprocessed is never
	// also said done (torture seed 1796302536346970954: a seek's CONTROL
	// row said seq 10 done, its DROPPED row that it was skipped).
	doneThrough int64
}

// planRelease reads what releasing queue b would take now. e.mu and f.mu
// held.
func planRelease(f *Feed, b *binding) releasePlan {
	d := b.dispatched.Load()
	p := releasePlan{ack: d, dispatched: d}
	if h := b.hold.Load(); h != nil {
		p.ack = min(p.ack, h.durable.Load())
	}
	held(&f.win, b, p.ack, func(en *window.Entry[*binding], after int64) {
		if p.firstSeq == 0 {
			p.firstSeq = en.ItemSeq
		}
		p.lastSeq = en.ItemSeq
		done := after <= d || b.gap != nil && b.gap.completed(after)
		p.done = append(p.done, done)
		p.after = append(p.after, after)
		if done {
			p.processed++
		} else {
			p.unprocessed++
		}
		if after <= d {
			p.doneThrough = en.ItemSeq
		}
	})
	switch {
	case p.doneThrough != 0:
	case p.firstSeq != 0:
		p.doneThrough = p.firstSeq - 1
	default:
		p.doneThrough = f.seq
	}
	return p
}

// releaseQueue releases what queue b holds, as planned (planRelease, with
// the same locks held since), as a loss whose Drops have the reason given
// (Engine.Release, Engine.Seek): b live is replaced by a new, empty queue.
// The Drops' Reason is prefix followed by the operator's reason. An item
// the plan counted unprocessed whose group completed it since is released
// as unprocessed all the same (a DROPPED row after its rows, as for an
// item completed after the release): what the record said is what is
// released: such an item counts once, as released, its completion
// refused as a late one is (refuseLate: not dispatched, a stale token;
// one the plan counted processed is not dispatched either). e.mu and f.mu
// held.
func (e *Engine) releaseQueue(f *Feed, b *binding, live bool, prefix, reason string, p releasePlan) Released {
	g := b.group
	if d := b.seal(live); d > p.dispatched {
		for i, after := range p.after {
			if after > p.dispatched && after <= d {
				b.dispatched.Add(-1)
				if !p.done[i] {
					g.stale.Add(1)
				}
			}
		}
	}
	rel := Released{Feed: f.name, Group: g.name, Generation: b.gen, Reason: reason}
	var items []releasedItem
	i := 0
	f.win.Forget(b, p.ack, func(en *window.Entry[*binding], _ int64) {
		if rel.FirstSeq == 0 {
			rel.FirstSeq = en.ItemSeq
		}
		rel.LastSeq = en.ItemSeq
		done := i < len(p.done) && p.done[i]
		i++
		if done {
			rel.Processed++
			return
		}
		rel.Unprocessed++
		items = append(items, releasedItem{seq: en.ItemSeq, offset: en.ItemOffset})
	})
	b.released.Add(rel.Unprocessed + rel.Processed)
	var m marks
	b.takeMarks(b.q.Tail(), &m, true)
	m.drops = releaseDrops(f, g, m.drops, items, prefix+reason)
	g.queueReleased(m)
	if live {
		rel.Replacement = e.replaceLocked(f, b)
	}
	return rel
}

// releasedItem is an unprocessed item of a released queue: its feed
// sequence and source offset.
type releasedItem struct{ seq, offset int64 }

// releaseDrops is what the group's streams are told of a release: one Drop
// per run of consecutive sequences of the unprocessed items, and the
// queue's drop marks not yet reported, in sequence order.
func releaseDrops(f *Feed, g *group, marks []Drop, items []releasedItem, reason string) []Drop {
	out := make([]Drop, 0, len(marks)+1)
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].seq == items[j-1].seq+1 {
			j++
		}
		out = append(out, Drop{Feed: f.name, Group: g.name, Count: int64(j - i), FirstSeq: items[i].seq,
			LastSeq: items[j-1].seq, Offset: items[j-1].offset, Reason: reason})
		i = j
	}
	// Each mark goes before the first run of items published after it.
	for _, m := range marks {
		at := slices.IndexFunc(out, func(d Drop) bool { return d.Reason == reason && d.FirstSeq > m.LastSeq })
		if at < 0 {
			at = len(out)
		}
		out = slices.Insert(out, at, m)
	}
	return out
}

// seal fixes the count of items the queue dispatched, from which a
// release counts what it releases, and returns it: a later completion of
// an item of the queue is refused (refuseLate; with several workers,
// complete refuses a removed queue's tokens, and the completions beyond
// the prefix stay as they are: gapState.completed). A live queue (of a
// fenced or dead group) is removed by it. f.mu held.
func (b *binding) seal(live bool) int64 {
	if b.gap != nil {
		// Several workers: completions are counted under the gap's lock.
		b.gap.mu.Lock()
		defer b.gap.mu.Unlock()
		if live {
			b.removed.Store(true)
		}
		d := b.dispatched.Load()
		b.sealed.Store(d + 1)
		return d
	}
	// One worker counts with no lock (worker.count): it adds, then looks
	// at sealed; the release says it is sealing, then reads the count. An
	// item counted before that read is not released; one counted after it
	// sees sealing (or the count) and is refused.
	b.sealed.Store(sealing)
	if live {
		b.removed.Store(true)
	}
	d := b.dispatched.Load()
	b.sealed.Store(d + 1)
	return d
}

// refuseLate refuses the count of the n-th item of a queue a release
// sealed (s: binding.sealed) when the release counted it as released:
// the count is undone, and the group's stale tokens count it. One worker's
// goroutine only, right after it counted the item.
func (b *binding) refuseLate(n, s int64) {
	for s == sealing {
		runtime.Gosched() // the release is reading the count: a few instructions
		s = b.sealed.Load()
	}
	if n > s-1 {
		b.dispatched.Add(-1)
		b.group.stale.Add(1)
	}
}

// replaceLocked replaces the live queue b of a fenced or dead group, which
// seal removed, by a new, empty queue of a new generation, as Unsubscribe
// then Subscribe would (a processing checkpoint holds it at nothing
// durable, as bind does), and returns its generation. e.mu and f.mu held.
func (e *Engine) replaceLocked(f *Feed, b *binding) int64 {
	g := b.group
	nb := &binding{feed: f, group: g, name: b.name, policy: b.policy, q: ring.New(f.queueSize), gen: generations.Add(1)}
	if len(g.workers) > 1 {
		nb.gap = newGapState(g.maxGap)
	}
	if cp := e.holds[[2]string{f.name, g.name}]; cp != nil && !cp.released {
		nb.hold.Store(&holdState{owner: cp})
	}
	targets := make([]*binding, 0, len(f.targets))
	for _, x := range f.targets {
		if x == b {
			x = nb
		}
		targets = append(targets, x)
	}
	f.targets = targets
	f.all = append(f.all, nb)
	g.replaceBinding(b, nb)
	return nb.gen
}

// releases is what operator releases left a group to report in its
// streams: drops, source losses and items completed in an earlier run,
// reported at its next step (even fenced or dead) or at its clean stop;
// group.hasReleases says whether it holds any. Safe for concurrent use.
type releases struct {
	mu sync.Mutex
	m  marks
}

// queueReleased keeps what a release tells the group's streams, and wakes
// the group to report it.
func (g *group) queueReleased(m marks) {
	if m.empty() {
		return
	}
	g.rel.mu.Lock()
	g.rel.m.add(m)
	g.hasReleases.Store(true)
	g.rel.mu.Unlock()
	g.notify()
}

// reportReleased tells the group's streams what releases left it to report:
// the single worker's at once (its next flush writes them), or every
// worker's, through its tasks, after the tasks handed to it before. It
// reports whether there was anything. The group's goroutine only.
func (g *group) reportReleased() bool {
	if !g.hasReleases.Load() {
		return false
	}
	g.rel.mu.Lock()
	m := g.rel.m
	g.rel.m = marks{}
	g.hasReleases.Store(false)
	g.rel.mu.Unlock()
	if len(g.workers) == 1 {
		g.workers[0].reportDrops(&m)
		return true
	}
	for _, w := range g.workers {
		w.inflight.Add(1)
		w.tasks <- task{marks: m.clone()}
	}
	return true
}

// completed reports whether the item claimed at queue position pos was
// completed beyond the queue's prefix. Only for a queue whose completions
// a release sealed (no completion moves it any more), and a pos past its
// prefix.
func (gs *gapState) completed(pos int64) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return pos <= gs.claimed.Load() && gs.done[pos%int64(len(gs.done))]
}
