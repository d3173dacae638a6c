package engine

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/blackbox-audit/blackbox/engine/internal/window"
)

// The refusals of Engine.Seek and Engine.Resume, for errors.Is (besides
// ErrGeneration, ErrUnknown and ErrStopped).
var (
	// ErrNotFenced: Engine.Seek was asked to move the position of a group
	// that is not fenced (Engine.Fence): a group that consumes may take
	// the items the seek would skip while it is planned. Nothing changed.
	ErrNotFenced = errors.New("engine: the group is not fenced")
	// ErrSeekUnsupported: the seek asked for a move the engine cannot make
	// soundly. Backwards (re-delivering items the group processed): a
	// source that cannot read again (not a Rewinder: the file source, the
	// Kafka source, a push feed), a feed of other groups whose own
	// progress the source does not keep (a GroupCommitter and
	// FeedConfig.SkipCompleted), a queue holding items its group has not
	// completed, a target whose position the feed no longer knows or of an
	// earlier epoch, a move back not yet applied by the source, one the
	// source refuses beforehand (RewindChecker). A target
	// within what the queue holds (skip some of its items, keep the rest)
	// would move items between queues of different generations; a feed
	// without source positions has no position to move. Nothing changed.
	ErrSeekUnsupported = errors.New("engine: seek not supported")
)

// SkippedReason begins the Reason of the Drops a forward seek reports
// (Observer.Dropped: DROPPED rows in the recording), followed by the
// operator's reason.
const SkippedReason = "skipped by the operator (Engine.Seek): "

// SeekTarget is where Engine.Seek moves a group's position on a feed: the
// feed sequence through which the group is done (it next takes items
// published after it). Latest is past everything its queue holds.
type SeekTarget struct {
	Seq    int64
	Latest bool
}

// SeekOptions are Engine.Seek's options.
type SeekOptions struct {
	// DryRun returns the plan and changes nothing.
	DryRun bool
	// Reason is the operator's reason: recorded with the skipped items,
	// and told to Observer.Acted (empty: NoReason).
	Reason string
	// Who is the operator, told to Observer.Acted (empty:
	// DefaultOperator); At when the action was taken (zero: the engine's
	// TimerClock at the seek).
	Who string
	At  time.Time
}

// SeekPlan is what Engine.Seek does (or, for a dry run, would do): a plain
// value.
type SeekPlan struct {
	Feed  string
	Group string
	// Generation is the queue the seek names; Replacement the queue of a
	// new generation that takes its place (0 for a dry run).
	Generation  int64
	Replacement int64
	// Before is the feed sequence through which the group was done (its
	// first held item's minus 1; with nothing held, the feed's last
	// sequence); After the one through which it is done after the seek.
	Before, After int64
	// Done is the feed sequence through which the group had completed
	// the feed's items at the seek: its completed prefix, as its queue's
	// dispatched count says (items it completed that still hold the
	// commit count, unlike Before), read with the plan's other counts: it
	// is below every item the seek skips as unprocessed. The seek's record says it was done
	// through Done before and Recorded after (OperatorAction.Before and
	// After: the CONTROL row's).
	Done int64
	// Loss says the seek skips items (a forward seek): Unprocessed of them
	// the group had not completed (DROPPED rows with SkippedReason and the
	// operator's reason), Processed it completed that still held the
	// commit (as Released.Processed), feed sequences FirstSeq to LastSeq.
	//
	// Redelivery says the seek moves the group back (a backwards seek):
	// the source reads again the items of feed sequences FirstSeq (After
	// plus 1) to LastSeq (the feed's last sequence at the seek),
	// Redelivered of them, and the feed hands them to the group only,
	// under new sequences after LastSeq; Processed counts those the group
	// completed that still held the commit (Unprocessed is 0: a queue
	// holding items not completed is refused).
	Loss, Redelivery       bool
	Unprocessed, Processed int64
	FirstSeq, LastSeq      int64
	Redelivered            int64
	Reason                 string
	DryRun                 bool
}

// Seek moves the position of a fenced group (Engine.Fence) on a positioned
// feed, a compare-and-swap on the generation of the group's live queue of
// the feed (SubscriberStatus.Generation), under the engine's and the
// feed's locks.
//
// Forwards: a seek moves over everything the queue holds, to a target at
// or past the last item it holds and not past the feed's last sequence
// (Latest: the last item it holds). The items skipped are a recorded loss
// of the group, as an operator release (Engine.Release) records it: one
// Drop per run of consecutive unprocessed sequences (Reason SkippedReason
// and opts.Reason), counted as released (the feed is not lossless), and
// the commit moves past them. A queue that holds nothing skips nothing:
// its position is the feed's last sequence.
//
// Backwards (a target before the group's position, SeekPlan.Before: a
// re-delivery, SeekPlan.Redelivery): the feed's source reads again from
// the item after the target (Rewinder), once the seek returned and before
// the feed takes anything more; the items read again up to the feed's
// last sequence at the seek are handed to the group only, under new
// sequences after it (every other group has them: they are counted and
// told as not handed again, Observer.AlreadyCompleted), and the source
// lowers its commit to the target keeping every other group's progress,
// so a restart hands the group the same items and the others nothing they
// completed. The commit then moves on through the items read again, as
// the group completes them. Nothing is lost: the group's items after the
// target that it completed keep their rows, and a queue holding items it
// has not completed is refused (release them first: a recorded loss).
//
// Refused with ErrSeekUnsupported, changing nothing: a target within what
// the queue holds, one past the feed's last sequence, a feed without
// source positions; backwards, a source that is no Rewinder, a feed of
// other groups whose progress the source does not keep, a queue holding
// items not completed, a target the feed cannot locate (seq 0, or older
// than the last 4096 acknowledged items and the window) or of an
// earlier epoch, a move back the source has not applied yet, one the
// source says beforehand it could not apply (RewindChecker).
//
// A seek that is not a dry run is told to Observer.Acted after every
// check passed and before it changes anything (the recorder writes its
// CONTROL row then): an error of the hook refuses it (ErrNotRecorded),
// changing nothing. A backwards seek returns before its source applied
// the move back (at the source's next poll): the group's live queue says
// so until then (SubscriberStatus.MoveBack, MoveBackPending; a failed
// Rewind: MoveBackFailed), and the feed is not settled.
//
// The seek, dry or not, requires the group fenced (ErrNotFenced) and the
// generation of its live queue (ErrGeneration: a stale reading, a removed
// queue). A real seek replaces the queue by an empty one of a new
// generation (SeekPlan.Replacement): every token of the old queue is
// refused (a completion after it counts in GroupStatus.StaleTokens), as is
// every later seek, release or resume naming the old generation. The
// group stays fenced: it takes nothing until Engine.Resume (or Unfence).
// A dry run (opts.DryRun) returns the same plan and changes nothing.
// Safe for concurrent use.
func (e *Engine) Seek(feed, group string, generation int64, to SeekTarget, opts SeekOptions) (SeekPlan, error) {
	f, g := e.byName[feed], e.gByN[group]
	if f == nil || g == nil {
		return SeekPlan{}, fmt.Errorf("%w: feed %q group %q", ErrUnknown, feed, group)
	}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return SeekPlan{}, fmt.Errorf("%w: seek of feed %q group %q", ErrStopped, feed, group)
	}
	f.mu.Lock()
	p, err := e.seekLocked(f, g, generation, to, opts)
	f.mu.Unlock()
	e.mu.Unlock()
	if err != nil || opts.DryRun {
		return p, err
	}
	if p.Redelivery {
		e.warnf("feed %q: the operator moved group %q back from seq %d to %d: the source reads seqs %d-%d again for it (%d items, under new seqs); queue generation %d replaced by %d: %s",
			f.name, g.name, p.Before, p.After, p.FirstSeq, p.LastSeq, p.Redelivered, p.Generation, p.Replacement, p.Reason)
	} else {
		e.warnf("feed %q: the operator moved group %q from seq %d to %d, skipping %d unprocessed and %d processed items; queue generation %d replaced by %d: %s",
			f.name, g.name, p.Before, p.After, p.Unprocessed, p.Processed, p.Generation, p.Replacement, p.Reason)
	}
	f.signalReady()
	e.watch.note()
	return p, nil
}

// liveQueue returns the live queue of g on f named by generation, or why
// not. f.mu held.
func liveQueue(f *Feed, g *group, generation int64) (*binding, error) {
	var gens []int64
	for _, x := range f.all {
		if x.group != g {
			continue
		}
		gens = append(gens, x.gen)
		if x.gen == generation && !x.removed.Load() && x.sealed.Load() == 0 {
			return x, nil
		}
	}
	if gens == nil {
		return nil, fmt.Errorf("%w: group %q never subscribed to feed %q", ErrUnknown, g.name, f.name)
	}
	return nil, fmt.Errorf("%w: generation %d names no live queue of group %q on feed %q (its queues: %v)", ErrGeneration, generation, g.name, f.name, gens)
}

// seekLocked is Seek with e.mu and f.mu held.
func (e *Engine) seekLocked(f *Feed, g *group, generation int64, to SeekTarget, opts SeekOptions) (SeekPlan, error) {
	b, err := liveQueue(f, g, generation)
	if err != nil {
		return SeekPlan{}, err
	}
	if !g.fenced.Load() {
		return SeekPlan{}, fmt.Errorf("%w: seek of group %q on feed %q: Fence it first", ErrNotFenced, g.name, f.name)
	}
	if f.committer == nil {
		return SeekPlan{}, fmt.Errorf("%w: feed %q has no source positions", ErrSeekUnsupported, f.name)
	}
	p := SeekPlan{Feed: f.name, Group: g.name, Generation: b.gen, Reason: opts.Reason, DryRun: opts.DryRun}
	// The plan: what the queue holds, read as Release would release it.
	rp := planRelease(f, b)
	p.FirstSeq, p.LastSeq, p.Unprocessed, p.Processed = rp.firstSeq, rp.lastSeq, rp.unprocessed, rp.processed
	p.Before = f.seq
	if p.FirstSeq != 0 {
		p.Before = p.FirstSeq - 1
	}
	p.Done = rp.doneThrough
	target := to.Seq
	if to.Latest {
		target = max(p.Before, p.LastSeq)
	}
	switch {
	case target < p.Before:
		return e.seekBackLocked(f, g, b, p, target, opts)
	case target > f.seq:
		return SeekPlan{}, fmt.Errorf("%w: seq %d is past feed %q's last published seq %d", ErrSeekUnsupported, target, f.name, f.seq)
	case p.FirstSeq != 0 && target < p.LastSeq:
		return SeekPlan{}, fmt.Errorf("%w: seq %d is within what queue %s holds (seqs %d-%d): a seek skips all of it, to %d or later", ErrSeekUnsupported, target, b.name, p.FirstSeq, p.LastSeq, p.LastSeq)
	}
	p.After = target
	p.Loss = p.Unprocessed+p.Processed > 0
	if opts.DryRun {
		return p, nil
	}
	if err := e.acted(f, b, p, opts); err != nil {
		return SeekPlan{}, err
	}
	if p.Loss {
		rel := e.releaseQueue(f, b, true, SkippedReason, opts.Reason, rp)
		p.Replacement = rel.Replacement
		p.Unprocessed, p.Processed, p.FirstSeq, p.LastSeq = rel.Unprocessed, rel.Processed, rel.FirstSeq, rel.LastSeq
		return p, nil
	}
	// The queue holds nothing: it is still replaced, so that every token
	// of the old generation is refused.
	b.seal(true)
	var m marks
	b.takeMarks(b.q.Tail(), &m, true)
	g.queueReleased(m)
	p.Replacement = e.replaceLocked(f, b)
	return p, nil
}

// acted tells Observer.Acted of the seek planned in p of queue b, before
// it changes anything (e.mu and f.mu held): an error refuses it
// (ErrNotRecorded).
func (e *Engine) acted(f *Feed, b *binding, p SeekPlan, opts SeekOptions) error {
	a := OperatorAction{Action: ActionSeek, Feed: f.name, Group: b.group.name, Who: cmp.Or(opts.Who, DefaultOperator),
		Reason: cmp.Or(opts.Reason, NoReason), At: opts.At, Before: p.Done, After: p.Recorded(), Seek: p}
	if p.Loss { // forwards: it skips what the queue holds; backwards nothing is taken
		a.Unprocessed, a.Processed = p.Unprocessed, p.Processed
	}
	return e.tellActed(a)
}

// tellActed tells Observer.Acted of a (its At the TimerClock's now when
// zero), e.mu and f.mu held: an error is ErrNotRecorded wrapping the
// hook's.
func (e *Engine) tellActed(a OperatorAction) error {
	hook := e.cfg.Observer.Acted
	if hook == nil {
		return nil
	}
	if a.At.IsZero() {
		a.At = e.cfg.TimerClock.Now()
	}
	if err := hook(a); err != nil {
		return fmt.Errorf("%w: the %s of group %q on feed %q (%d to %d): %w", ErrNotRecorded, a.Action, a.Group, a.Feed, a.Before, a.After, err)
	}
	return nil
}

// Recorded is the feed sequence through which the group has completed the
// feed's items after the seek, as its record says (OperatorAction.After):
// for a forward seek After, or Done when higher (items it completed that
// still held the commit); for a backwards seek After, below Done (the
// group was moved back).
func (p SeekPlan) Recorded() int64 {
	if p.Redelivery {
		return p.After
	}
	return max(p.Done, p.After)
}

// held calls each, oldest first, with every entry of w that waits for b
// (offered to it at a queue position past ack) and that position, as
// Forget would, changing nothing.
func held(w *window.Window[*binding], b *binding, ack int64, each func(en *window.Entry[*binding], after int64)) {
	for i := 0; i < w.Len(); i++ {
		en := w.At(i)
		for j, x := range en.Targets {
			if x == b && en.After[j] > ack {
				each(en, en.After[j])
			}
		}
	}
}

// Resume lets a group that a seek (or Engine.Fence) fenced consume again,
// a compare-and-swap on the generation of its live queue of feed
// (SubscriberStatus.Generation; SeekPlan.Replacement after a seek):
// refused (ErrGeneration) for a generation naming no live queue of the
// group on the feed, the one a seek replaced included. It unfences the
// group on all its feeds, as Unfence does. Safe for concurrent use.
func (e *Engine) Resume(feed, group string, generation int64) error {
	f, g := e.byName[feed], e.gByN[group]
	if f == nil || g == nil {
		return fmt.Errorf("%w: feed %q group %q", ErrUnknown, feed, group)
	}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return fmt.Errorf("%w: resume of feed %q group %q", ErrStopped, feed, group)
	}
	f.mu.Lock()
	_, err := liveQueue(f, g, generation)
	if err == nil {
		g.fenced.Store(false) // under the locks a seek takes: no seek between the check and this
	}
	f.mu.Unlock()
	e.mu.Unlock()
	if err != nil {
		return err
	}
	return e.Unfence(group) // wakes the group and its feeds
}
