package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/internal/ring"
	"github.com/blackbox-audit/blackbox/engine/internal/window"
)

// Journal stores each item of a journalled feed once, under (feed, seq),
// before it is dispatched, so that recordings can index it instead of
// copying it. Append is called under the feed's publish lock. A Journal may
// publish into the same feed with Publish and the ctx it is given, or with
// Offer (either is deferred until the current one is done, then published
// as a nested publish, which never waits; Publish with another ctx would
// wait for the lock Append runs under). A TryPublish or
// TryPublishBatch made while Append runs never takes the lock: it takes
// nothing (false, 0), as for a full queue, so a Journal must not retry it
// in a loop. The items published before this one are visible to the groups
// by then: Append may wait for them to be processed.
type Journal interface {
	Append(ctx context.Context, feed string, seq int64, item any) error
}

// JournalBatch is a Journal that can also store a run of items at once.
// It is a hook for FeedConfig.Journal implementations (the recorder's
// journal is one).
// When a feed's Journal implements it, Intake.TryPublishBatch journals the
// items it takes with one AppendBatch (items[i] under sequence first+i)
// instead of one Append per item, still under the feed's publish lock and
// before any of them is queued; the rules of Append hold, except that
// AppendBatch must not wait for the batch's own items to be processed (none
// is queued yet). An error refuses none of the items: each is lost for
// every queue (a drop marked with the error), as when Append fails.
type JournalBatch interface {
	Journal
	AppendBatch(ctx context.Context, feed string, first int64, items []any) error
}

// Source feeds one Feed. The engine runs Run on a goroutine of its own from
// Start until Stop cancels ctx (or the source ends by itself, as a bounded
// source does). A source with positions publishes with TryPublish and calls
// PollAcks at the start of every duty cycle.
type Source interface {
	Run(ctx context.Context, in *Intake) error
}

// PolicySource is implemented by sources with a default overload policy
// (the file source pauses), used when the feed configures none.
type PolicySource interface {
	DefaultPolicy() Policy
}

// FeedState is where a feed's source stands.
type FeedState string

// The feed states, the values of FeedStatus.State.
const (
	// StateInitialising: a feed's state until its source reports one
	// (Intake.SetState).
	StateInitialising FeedState = "INITIALISING"
	StateBehind       FeedState = "BEHIND"
	StateCaughtUp     FeedState = "CAUGHT_UP"
	StateEndOfStream  FeedState = "END_OF_STREAM"
)

// DefaultWindowCap is FeedConfig.WindowCap when it is not set: it bounds
// the items of a positioned feed awaiting acknowledgement, and TryPublish
// pauses past it.
const DefaultWindowCap = 65536

type ctxKey int

const (
	// nestedKey marks the context a Journal's Append is given: a Publish
	// with it into the same feed is deferred until the current publish is
	// done (the goroutine holds the feed's lock), and never waits.
	nestedKey ctxKey = iota
	// servedKey marks the contexts the engine serves to the code it runs
	// on its group goroutines (core.Cycle.Context): a Publish with one
	// never waits.
	servedKey
)

// served reports whether ctx is (or derives from) a context the engine
// served to code it runs: a cycle's, or a Journal's.
func served(ctx context.Context) bool {
	return ctx.Value(servedKey) != nil || ctx.Value(nestedKey) != nil
}

// Feed is one source of items: it numbers them, journals them if asked, and
// fans each out to one bounded queue per subscribing group under its
// overload policy. Feed is safe for concurrent use.
type Feed struct {
	name      string
	eng       *Engine
	policy    Policy
	overrides map[string]Policy
	queueSize int
	journal   Journal
	windowCap int
	source    Source
	warnAfter time.Duration // FeedConfig.PauseWarnAfter resolved: 0 never

	// The publisher writes the fields from mu to pauses on every item;
	// groups read the ones above on every item: keep them apart.
	_         [line]byte
	mu        sync.Mutex
	seq       int64
	targets   []*binding // live bindings; replaced, never mutated
	all       []*binding // every binding of the run, removed ones included
	epoch     int64
	committer Committer
	commits   atomic.Bool // committer != nil, for Commits, which takes no lock
	win       window.Window[*binding]
	deferred  []any
	closing   bool // the engine is stopping: blocking publishes that would wait are refused
	stopped   bool
	paused    bool
	pauses    int64
	// killed: the engine was killed, every publish is refused (ErrKilled).
	// Read with or without mu: Kill sets it without mu, which a Journal
	// that kills the engine holds.
	killed atomic.Bool
	// The current pause: when it began (zero once Stop timed it out),
	// whether it was warned of (the overseer), and what paused the feed
	// then; and the time of the pauses over.
	pausedAt    time.Time
	pauseWarned bool
	pauseCause  string
	pausedTime  time.Duration
	// notes are log records made under mu, logged once mu is let go
	// (unlock): the Logger never runs under the feed's lock.
	notes []note
	// The loss state of each group's binding (lossstate.go): quiet and
	// latch are FeedConfig's, resolved; changes are those made under mu,
	// told once it is let go (deliverChanges), delivering while a
	// goroutine tells them.
	quiet      time.Duration
	latch      LatchRule
	lossStates map[string]*lossState
	changes    []LossStateChange
	delivering bool
	// journalling is set while the journal's Append runs under mu (written
	// under mu and offerMu, read without them): a TryPublish made then, by
	// the journal itself on the goroutine holding mu, must not wait for mu,
	// and an Offer made then is kept in offered instead.
	journalling atomic.Bool
	// offered holds the items Offer (or a publish that may not wait) was
	// given while the journal ran (offerMu): the journal's own, which
	// cannot take mu, and any made meanwhile. The journal's caller moves
	// them to deferred once its call returned.
	offerMu sync.Mutex
	offered []any
	_       [line]byte

	state        FeedState
	detail       string
	bounded      bool
	unterminated int64

	downgradedPub      atomic.Int64
	completionFailures atomic.Int64
	failures           atomic.Int64
	retries            atomic.Int64
	acknowledged       atomic.Int64

	lossMu sync.Mutex
	losses map[string]int64 // Intake.AddLoss, by reason (lossMu)

	pollMu    sync.Mutex
	acks      []window.Ack
	lastAcked int64 // sequence of the last item told to the committer (pollMu)
	gacks     []groupAck
	// committing holds, per key, the last item told to the committer since
	// its last successful Commit, for Observer.Committed (pollMu).
	committing []Commit
	// uncommitted counts the items told to the committer since its last
	// successful Commit (mu): they stay pending acknowledgements, so that a
	// feed is never settled before its position is committed.
	uncommitted int
	// uncommittedAt is when the oldest of those was taken (mu; zero:
	// not timed).
	uncommittedAt time.Time

	// waiting is set when TryPublish refused an item; a group that frees
	// room in its queue then signals ready, so a paused source need not poll.
	waiting atomic.Bool
	ready   chan struct{}

	// behind mirrors state == StateBehind: the source has more to publish
	// (read by groups whose queues ran dry; see maxSpin).
	behind atomic.Bool

	closedCh chan struct{}

	// completed are the prefixes the source said the groups completed in
	// an earlier run (Intake.SkipCompleted): their items are not handed to
	// those groups again (mu). progress is what a GroupCommitter was told
	// of each group's completed prefix (pollMu, then mu).
	completed       []completedPrefix
	progress        []*groupProgress
	honourCompleted bool // FeedConfig.SkipCompleted

	// A backwards seek (rewind.go): rewind is one the source has not
	// applied yet (mu; the feed takes nothing meanwhile), rewoundAt the
	// last sequence published before the last one applied (pollMu: the
	// acknowledgements up to it are not told to the committer), history
	// the positions of the last acknowledged items, for a Rewinder (mu;
	// a ring, hnext its oldest once full).
	rewind    *rewindReq
	rewinding atomic.Bool // rewind != nil, read by each poll without mu
	rewoundAt int64
	history   []Commit
	hnext     int
}

// Name is the feed's name.
func (f *Feed) Name() string { return f.name }

// Publish publishes a push item (no source position). Under DROP_AFTER_SPIN
// and PAUSE it never waits past the spin; under BLOCK_WITH_DEADLINE it waits
// outside the lock until every blocking queue has room, then delivers to all
// of them, or refuses with a *RefusedError (deadline, shutdown, cancelled) and
// delivers to none. Once the engine is killed (Engine.Kill) every Publish is
// refused with an error wrapping ErrKilled: nothing is numbered, journalled
// or queued. A nil ctx is refused (ErrNilContext).
//
// Code the engine runs must not wait for room in a queue only its own group
// can empty, and it cannot: a Publish given a context the engine served, or
// one derived from it, never waits, as Offer. The engine serves one to every
// cycle (core.Cycle.Context: a processor, a timer, and the completions a
// cycle registers, which capture it) and to a Journal (Append's ctx). Code
// that holds none (an observer hook, a Sink) publishes with Offer. No
// Publish waits for ever whatever its context: the wait ends at the
// policy's deadline (always positive) or at Stop, which refuses it; a
// Publish a processor makes with a context of its own making is one from
// outside, and holds its group at most that long.
func (f *Feed) Publish(ctx context.Context, item any) error {
	if ctx == nil {
		return fmt.Errorf("%w: Feed.Publish to feed %q", ErrNilContext, f.name)
	}
	return f.publish(ctx, item, !served(ctx))
}

// Offer publishes a push item without ever waiting for room: a full
// BLOCK_WITH_DEADLINE or PAUSE queue is a counted drop after the queue's
// spin (counted as downgraded). It is the publish for code running inside
// the engine (a processor's cycle, a completion, a timer, an observer hook,
// a Journal), a processor being the only one that could empty its own
// group's queue. Once the engine is killed it refuses the item with an
// error wrapping ErrKilled, as Publish does. Made while the feed's Journal runs (a Journal offering
// into its own feed, under the feed's lock, or any goroutine meanwhile), it
// does not wait for the lock: the item is published once the item being
// journalled is placed, as a nested publish. It returns ErrStopped once
// the feed is stopped.
func (f *Feed) Offer(item any) error { return f.publish(context.Background(), item, false) }

// publish is Publish; mayWait says whether a full BLOCK queue may be waited
// for (not with a context the engine served: see Publish).
func (f *Feed) publish(ctx context.Context, item any, mayWait bool) error {
	if nf, _ := ctx.Value(nestedKey).(*Feed); nf == f {
		// Nested in this feed's own commit, on the goroutine that holds
		// the lock: run after the commit's offers.
		f.deferred = append(f.deferred, item)
		return nil
	}
	if !mayWait && f.offerWhileJournalling(item) {
		return nil
	}
	var deadline time.Time
	var w wait // the queue the publish waits for, if any, and since when
	for {
		f.mu.Lock()
		if f.killed.Load() {
			f.mu.Unlock()
			return f.eng.killedErr(fmt.Sprintf("publish to feed %q", f.name))
		}
		if f.handOff(item) {
			w.end(f)
			f.mu.Unlock()
			return nil
		}
		if f.stopped {
			w.end(f)
			f.mu.Unlock()
			return fmt.Errorf("%w: publish to feed %q", ErrStopped, f.name)
		}
		if short := f.blockingShort(); short != nil && mayWait {
			reason := RefuseReason("")
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(short.policy.Deadline)
			}
			switch {
			case f.closing:
				reason = RefusedShutdown
			case ctx.Err() != nil:
				reason = RefusedCancelled
			case !now.Before(deadline):
				reason = RefusedDeadline
			}
			if reason != "" {
				w.end(f)
				if short.refused.Add(1) == 1 {
					f.notef(slog.LevelWarn, "queue %s: first refused publish (%s); later refusals of this queue are counted in its status, not warned",
						short.name, reason)
				}
				if reason != RefusedShutdown {
					f.lose(short, fmt.Sprintf("queue %s: a publish was refused (%s)", short.name, reason))
				}
				f.unlock()
				return &RefusedError{Feed: f.name, Queue: short.name, Reason: reason}
			}
			w.on(f, short)
			f.mu.Unlock()
			f.waitRoom(ctx, deadline)
			continue
		}
		f.commit(ctx, item, nil, true, time.Time{})
		w.end(f)
		f.flush()
		f.unlock()
		return nil
	}
}

// wait is a BLOCK publish's wait for room in one queue (b, since when;
// b nil when it waits for none), timed on the TimerClock when it begins and
// ends: counted in the queue's blocked, blockedNs and blockedMaxNs.
type wait struct {
	b     *binding
	since time.Time
}

// on notes that the publish waits for b from now on (lock held): a wait
// for another queue ends.
func (w *wait) on(f *Feed, b *binding) {
	if w.b == b {
		return
	}
	now := f.eng.cfg.TimerClock.Now()
	w.endAt(now)
	w.b, w.since = b, now
}

// end ends the wait, if any (lock held): the publish was delivered or
// refused.
func (w *wait) end(f *Feed) {
	if w.b != nil {
		w.endAt(f.eng.cfg.TimerClock.Now())
	}
}

func (w *wait) endAt(now time.Time) {
	b := w.b
	if b == nil {
		return
	}
	d := max(0, now.Sub(w.since))
	b.blocked++
	b.blockedTime += d
	b.blockedMax = max(b.blockedMax, d)
	w.b = nil
}

// note is a log record made under the feed's lock (notef), logged once the
// lock is let go (unlock).
type note struct {
	level slog.Level
	msg   string
	attrs []slog.Attr // an item's (itemAttrs), if about one
}

// notef notes a log record, logged once the lock is let go (lock held).
func (f *Feed) notef(level slog.Level, format string, args ...any) {
	f.notes = append(f.notes, note{level, fmt.Sprintf(format, args...), nil})
}

// noteItem notes a log record about an item, with its attributes
// (itemAttrs), logged once the lock is let go (lock held).
func (f *Feed) noteItem(level slog.Level, item []slog.Attr, format string, args ...any) {
	f.notes = append(f.notes, note{level, fmt.Sprintf(format, args...), item})
}

// unlock lets go of the lock, then logs what was noted under it: a Logger
// that looks at the engine (its Status) never waits for the lock.
func (f *Feed) unlock() {
	if len(f.notes) == 0 && len(f.changes) == 0 {
		f.mu.Unlock()
		return
	}
	notes := f.notes
	f.notes = nil
	changed := len(f.changes) > 0
	f.mu.Unlock()
	for _, n := range notes {
		f.eng.cfg.Logger.LogAttrs(context.Background(), n.level, "blackbox engine: "+n.msg, n.attrs...)
	}
	if changed {
		f.deliverChanges()
	}
}

// handOff publishes a push item the short way when all there is to do is
// one queue hand-off: a single subscribing queue, live and with room, no
// journal, nothing deferred (lock held). It does what commit does then,
// without building an item or a batch. It reports whether it did.
func (f *Feed) handOff(item any) bool {
	b := f.soleTarget()
	if b == nil || b.q.Room() <= 0 {
		return false
	}
	f.seq++
	b.q.Push(item, f.seq)
	b.group.notify()
	return true
}

// soleTarget is the feed's only subscribing queue when an item for it
// needs nothing but the hand-off: it is live, there is no journal, nothing
// is deferred and the feed is not stopped (lock held); nil otherwise.
func (f *Feed) soleTarget() *binding {
	if len(f.targets) != 1 || f.journal != nil || f.stopped || len(f.deferred) > 0 || len(f.completed) > 0 {
		return nil
	}
	if b := f.targets[0]; !b.fenced() {
		return b
	}
	return nil
}

// blockingShort returns the first live BLOCK binding without room (lock
// held). A fenced or dead group's binding is never waited for: it takes
// nothing, so place drops (and counts) the item for it instead.
func (f *Feed) blockingShort() *binding {
	for _, b := range f.targets {
		if b.policy.Kind == BlockKind && !b.fenced() && b.q.Room() <= 0 {
			return b
		}
	}
	return nil
}

// waitRoom waits outside the lock for a while: until ctx is done, the engine
// stops, the deadline passes, or 100µs, whichever is first.
func (f *Feed) waitRoom(ctx context.Context, deadline time.Time) {
	d := min(time.Until(deadline), 100*time.Microsecond)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-f.closedCh:
	case <-t.C:
	}
}

// tryPublish is Intake.TryPublish.
func (f *Feed) tryPublish(item any, pos core.Position) bool {
	if f.inJournal() {
		return false
	}
	f.mu.Lock()
	if f.shut() || !f.admits() {
		f.refuse()
		f.mu.Unlock()
		return false
	}
	f.unpause()
	f.commit(context.Background(), item, &pos, false, f.takenAt(true))
	f.flush()
	f.unlock()
	return true
}

// inJournal reports whether the journal's Append is running under the
// lock. A TryPublish then is refused without the lock: made by the journal
// itself, it would wait for the lock its own goroutine holds. A source
// refused this way is signalled on Ready like any refused source.
func (f *Feed) inJournal() bool {
	if !f.journalling.Load() {
		return false
	}
	f.waiting.Store(true)
	return true
}

// shut reports whether the feed takes nothing more: the engine stops, was
// killed, or stopped (lock held).
func (f *Feed) shut() bool { return f.closing || f.stopped || f.killed.Load() }

// refuse counts a pause (the first refusal since an item was taken) and
// has the feed's groups signal Ready when their queues are half empty (lock
// held). A closing or stopped feed refuses without pausing: nothing will
// take the item, and its status must not say it is held back.
func (f *Feed) refuse() {
	if f.shut() {
		return
	}
	if !f.paused {
		f.paused = true
		f.pauses++
		f.pausedAt, f.pauseWarned = f.eng.cfg.TimerClock.Now(), false
		f.pauseCause = f.pausedBy()
		if f.warnAfter > 0 {
			f.eng.ov.wake() // to warn if it lasts
		}
	}
	for _, b := range f.targets {
		b.q.PauseAt()
	}
	f.waiting.Store(true)
}

// pausedBy says what makes the feed refuse items as a pause begins (lock
// held), as admits finds it, and marks the queues it names (full, or of a
// fenced or dead group, for a positioned feed) as pausing it: a pause the
// window's cap or the lack of a live consumer began is the feed's alone.
func (f *Feed) pausedBy() string {
	var why []string
	if f.committer != nil {
		if len(f.targets) == 0 {
			why = append(why, "no live consumer")
		}
		if f.win.Len() >= f.windowCap {
			why = append(why, fmt.Sprintf("the acknowledgement window at its cap (%d items awaiting acknowledgement)", f.windowCap))
		}
	}
	for _, b := range f.targets {
		switch {
		case b.fenced():
			if f.committer == nil {
				continue
			}
			why = append(why, fmt.Sprintf("consumer %s fenced or dead", b.name))
		case b.policy.Kind != DropAfterSpinKind && b.q.Room() <= 0:
			why = append(why, fmt.Sprintf("queue %s full", b.name))
		default:
			continue
		}
		b.pausing = true
		b.pauses++
	}
	if len(why) == 0 {
		return "no item taken"
	}
	return strings.Join(why, ", ")
}

// pauseOver times the current pause until now, if it is timed (lock
// held): its time joins the feed's, and each queue's that paused it. ended
// says the pause is over (its queues no longer pause the feed); else
// (Stop) it is only no longer timed.
func (f *Feed) pauseOver(now time.Time, ended bool) {
	if !f.paused {
		return
	}
	var d time.Duration
	if !f.pausedAt.IsZero() {
		d = max(0, now.Sub(f.pausedAt))
	}
	f.pausedTime += d
	for _, b := range f.all {
		if b.pausing {
			b.pausedTime += d
			b.pausing = !ended
		}
	}
	f.pausedAt = time.Time{}
}

// signalReady wakes a source waiting on Ready.
func (f *Feed) signalReady() {
	if f.waiting.Load() && f.waiting.CompareAndSwap(true, false) {
		select {
		case f.ready <- struct{}{}:
		default:
		}
	}
}

// tryPublishBatch is Intake.TryPublishBatch.
func (f *Feed) tryPublishBatch(items []any, pos []core.Position) int {
	if f.inJournal() {
		return 0
	}
	f.mu.Lock()
	defer f.unlock()
	defer f.flush()
	n := f.handOffBatch(items, pos)
	if jb, ok := f.journal.(JournalBatch); ok && n < len(items) {
		return n + f.commitJournalledBatch(jb, items[n:], pos[n:])
	}
	at := f.takenAt(n < len(items)) // once for the batch: a clock read costs as much as a hand-off
	for ; n < len(items); n++ {
		if f.shut() || !f.admits() {
			f.refuse()
			return n
		}
		f.unpause()
		f.commit(context.Background(), items[n], &pos[n], false, at)
	}
	return n
}

// handOffBatch places the first items of a batch the short way when all
// there is to do for each is one queue hand-off: a single subscribing
// queue, live, no journal, nothing deferred, the feed open (lock held). It
// places as many as the queue has room for and the ack window takes, doing
// what commit does for them without building an item each, and
// reports how many; TryPublishBatch offers the rest the general way.
func (f *Feed) handOffBatch(items []any, pos []core.Position) int {
	b := f.soleTarget()
	if b == nil || f.closing || f.killed.Load() {
		return 0
	}
	n := min(len(items), int(b.q.Room()))
	if f.committer != nil {
		n = min(n, f.windowCap-f.win.Len())
	}
	at := f.takenAt(n > 0)
	for i := range n {
		f.seq++
		after := b.q.PlacePositioned(items[i], f.seq, f.epoch, &pos[i])
		if f.committer != nil {
			e := f.win.Push(f.seq, f.epoch, pos[i], f.targets)
			e.After[0], e.At = after, at
		}
	}
	if n > 0 {
		f.unpause()
	}
	return max(n, 0)
}

// admits reports whether a positioned item can be taken now (lock held).
func (f *Feed) admits() bool {
	if f.committer != nil {
		if len(f.targets) == 0 || f.win.Len() >= f.windowCap || f.rewind != nil {
			return false
		}
	}
	for _, b := range f.targets {
		if b.fenced() {
			if f.committer != nil {
				return false
			}
			continue
		}
		if b.policy.Kind != DropAfterSpinKind && b.q.Room() <= 0 {
			return false
		}
	}
	return true
}

// flush shows the groups every item placed in their queues (lock held).
func (f *Feed) flush() {
	for _, b := range f.targets {
		if b.q.Flush() {
			b.group.notify()
		}
	}
}

// commit numbers, journals and places one item in its queues (lock held);
// the caller flushes them before it lets go of the lock. push says the
// item came from Publish, whose full PAUSE or non-waiting BLOCK queues fall
// back to a drop after spin; at is when a positioned item was taken
// (takenAt).
func (f *Feed) commit(ctx context.Context, item any, pos *core.Position, push bool, at time.Time) {
	f.seq++
	var jerr error
	if f.journal != nil {
		jerr = f.journalled(ctx, func(jctx context.Context) error { return f.journal.Append(jctx, f.name, f.seq, item) })
	}
	f.place(f.seq, item, pos, push, jerr, at)
	f.runDeferred(ctx)
}

// takenAt is when positioned items are taken now, for the age of the
// oldest uncommitted one (FeedStatus.OldestUncommitted): the TimerClock's
// time when timed is true and the feed commits (lock held), zero otherwise
// (no clock read).
func (f *Feed) takenAt(timed bool) time.Time {
	if !timed || f.committer == nil {
		return time.Time{}
	}
	return f.eng.cfg.TimerClock.Now()
}

// journalled runs a journal call under the lock (lock held): the items
// before it are shown to the groups first, since the journal may take its
// time, or wait for them to be processed. What was offered meanwhile
// (offerWhileJournalling) is deferred: the caller publishes it after the
// item (runDeferred).
func (f *Feed) journalled(ctx context.Context, call func(context.Context) error) error {
	f.flush()
	f.journalling.Store(true)
	defer func() {
		f.offerMu.Lock()
		f.journalling.Store(false)
		f.deferred = append(f.deferred, f.offered...)
		clear(f.offered)
		f.offered = f.offered[:0]
		f.offerMu.Unlock()
	}()
	return call(context.WithValue(ctx, nestedKey, f))
}

// offerWhileJournalling keeps item, given to a publish that must not wait
// (Offer), while the journal runs under the lock, and reports whether it
// did: the journal's own goroutine holds the lock (it would wait for
// itself), and another's would wait for the journal. The journal's caller
// publishes it after the item being journalled, as a nested publish. The
// flag is read again under offerMu, which journalled takes to clear it:
// an item kept is always moved to deferred.
func (f *Feed) offerWhileJournalling(item any) bool {
	if !f.journalling.Load() {
		return false
	}
	f.offerMu.Lock()
	defer f.offerMu.Unlock()
	if !f.journalling.Load() {
		return false
	}
	f.offered = append(f.offered, item)
	return true
}

// commitJournalledBatch is TryPublishBatch for a feed whose Journal
// implements JournalBatch (lock held): it takes as many of the items as
// the feed admits one after another, journals them with one AppendBatch,
// then places them. It returns how many it took.
func (f *Feed) commitJournalledBatch(jb JournalBatch, items []any, pos []core.Position) int {
	if f.shut() || !f.admits() {
		f.refuse()
		return 0
	}
	n := f.admissible(len(items))
	f.unpause()
	first := f.seq + 1
	f.seq += int64(n)
	ctx := context.Background()
	jerr := f.journalled(ctx, func(jctx context.Context) error { return jb.AppendBatch(jctx, f.name, first, items[:n]) })
	at := f.takenAt(true)
	for i := range n {
		f.place(first+int64(i), items[i], &pos[i], false, jerr, at)
	}
	f.runDeferred(ctx)
	return n
}

// admissible is how many of n positioned items admits would take one after
// another (lock held, admits true): no more than the ack window and every
// PAUSE or BLOCK queue has room for. Items only free room meanwhile.
func (f *Feed) admissible(n int) int {
	if f.committer != nil {
		n = min(n, f.windowCap-f.win.Len())
	}
	for _, b := range f.targets {
		if !b.fenced() && b.policy.Kind != DropAfterSpinKind {
			n = min(n, int(b.q.Room()))
		}
	}
	return max(n, 1)
}

// place places item seq (numbered, journalled: jerr is the journal's
// error, if any; taken at: takenAt) in the feed's queues (lock held). An
// item the journal failed is lost for every queue.
func (f *Feed) place(seq int64, item any, pos *core.Position, push bool, jerr error, at time.Time) {
	env := ring.Item{Value: item, Seq: seq}
	if pos != nil {
		env.Epoch, env.Pos, env.Positioned = f.epoch, *pos, true
	}
	targets := f.targets
	var entry *window.Entry[*binding]
	if pos != nil && f.committer != nil {
		entry = f.win.Push(seq, f.epoch, *pos, targets)
		entry.At = at
	}
	if jerr != nil {
		for _, b := range targets {
			b.mark(seq, pos, "journal: "+jerr.Error())
		}
		f.win.Coalesce(entry)
		return
	}
	downgraded := false
	for i, b := range targets {
		if pos != nil && len(f.completed) > 0 && f.completedBy(b, env.Epoch, *pos) && b.markDone(seq, env.Epoch, *pos) {
			f.notHanded(b, seq, *pos)
			continue
		}
		if b.fenced() && f.committer == nil {
			b.mark(seq, pos, "group "+b.group.name+" fenced")
			continue
		}
		if b.q.Room() <= 0 {
			// The consumer cannot make room past items it cannot see.
			if b.q.Flush() {
				b.group.notify()
			}
			fallback := push && b.policy.Kind != DropAfterSpinKind
			if fallback {
				if b.downgraded.Add(1) == 1 {
					f.noteItem(slog.LevelWarn, itemAttrs(f.name, b.group.name, seq, pos), "queue %s: first downgraded publish, feed %q seq %d: the %s queue was full and the publish may neither wait nor pause, so it falls back to a drop after the spin; later downgrades of this queue are counted in its status, not warned",
						b.name, f.name, seq, b.policy.Kind)
				}
				downgraded = true
			}
			if !f.spin(b, b.policy.Spin) {
				reason := fmt.Sprintf("queue %s full after %s spin", b.name, b.policy.Spin)
				if fallback {
					reason += "; " + string(b.policy.Kind) + " not waited"
				}
				b.mark(seq, pos, reason)
				continue
			}
		}
		after := b.q.Place(env)
		if entry != nil {
			entry.After[i] = after
		}
	}
	if downgraded {
		f.downgradedPub.Add(1)
	}
	f.win.Coalesce(entry)
}

// spin waits, holding the lock, up to d for room in b's queue.
func (f *Feed) spin(b *binding, d time.Duration) bool {
	if b.q.Room() > 0 {
		return true // no clock read: most items find room
	}
	if d <= 0 {
		return false
	}
	until := time.Now().Add(d)
	for b.q.Room() <= 0 {
		if b.removed.Load() || !time.Now().Before(until) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// runDeferred publishes what code run under the commit published into this
// feed, as nested publishes (lock held).
func (f *Feed) runDeferred(ctx context.Context) {
	if len(f.deferred) == 0 || ctx.Value(nestedKey) == f {
		return
	}
	nctx := context.WithValue(ctx, nestedKey, f)
	for len(f.deferred) > 0 {
		item := f.deferred[0]
		f.deferred = f.deferred[1:]
		f.commit(nctx, item, nil, true, time.Time{})
	}
	f.deferred = nil
}

// setCommitter is Intake.SetCommitter.
func (f *Feed) setCommitter(c Committer) {
	f.mu.Lock()
	f.committer = c
	f.commits.Store(c != nil)
	f.mu.Unlock()
}

// Commits reports whether the feed's source commits what is processed
// (it set a Committer: Intake.SetCommitter), so that Observer.Committed
// will report its items. A source sets it before it publishes a positioned
// item. Safe for concurrent use, and it takes no lock: an observer hook
// may ask it under a lock of its own that a journal of the feed, called
// under the feed's lock, waits for (an outbox asks it under the
// recorder's lock).
func (f *Feed) Commits() bool { return f.commits.Load() }

// setEpoch is Intake.SetEpoch.
func (f *Feed) setEpoch(epoch int64) {
	f.mu.Lock()
	f.epoch = epoch
	f.mu.Unlock()
}

// lastSeq is Intake.Seq.
func (f *Feed) lastSeq() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// setState is Intake.SetState.
func (f *Feed) setState(s FeedState, detail string) {
	f.mu.Lock()
	f.state, f.detail = s, detail
	f.behind.Store(s == StateBehind)
	f.mu.Unlock()
	f.eng.watch.note()
}

// setBounded is Intake.SetBounded.
func (f *Feed) setBounded(b bool) {
	f.mu.Lock()
	f.bounded = b
	f.mu.Unlock()
}

// setUnterminated is Intake.SetUnterminated.
func (f *Feed) setUnterminated(n int64) {
	f.mu.Lock()
	f.unterminated = n
	f.mu.Unlock()
}

// unpause notes that the feed took an item (lock held): a pause, if any,
// is over.
func (f *Feed) unpause() {
	if f.paused {
		f.resume()
	}
}

// resume ends a pause (lock held): it is timed, and the end of one that
// was warned of is logged.
func (f *Feed) resume() {
	began := f.pausedAt
	now := f.eng.cfg.TimerClock.Now()
	f.pauseOver(now, true)
	f.paused = false
	if f.pauseWarned && !began.IsZero() {
		f.notef(slog.LevelInfo, "feed %q resumed after a pause of %s", f.name, now.Sub(began))
	}
	f.eng.watch.note()
}
