package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// The loss state of a binding (a group's queue of a feed, named by the feed
// and the group: it outlives an Unsubscribe, a Subscribe again and a
// Release's replacement of the queue).
//
// A binding is UP until it loses an item: a drop (a full DROP queue, a push
// fallback from a full PAUSE or BLOCK queue, a fenced group's item of a push
// feed, an item the journal failed) or a refused BLOCK publish (deadline,
// cancelled; not one refused at shutdown, nor after a kill). A loss that
// latches (FeedConfig.Latch: by default a loss of a PAUSE or BLOCK binding,
// whose policy promised none) makes it LATCHED, and it stays LATCHED until
// an operator clears it (Engine.ClearOverload), whatever time passes; any
// other loss makes it DEGRADED, and it is UP again once the feed's quiet
// period (FeedConfig.QuietPeriod) passed with no further loss. That
// recovery is lazy but exact: it is applied when it is observed (a status
// read, the binding's next loss, the engine's overseer, the end of the
// run), and the change says it happened at the last loss plus the quiet
// period (LossStateChange.At), when it was observed (Observed). A loss
// applies its binding's pending recovery first, so two loss episodes are
// two changes to DEGRADED with a change to UP between them.
//
// Every change is told once to the Observer's LossState hook (the recorder
// writes a STATE row) and logged once (Warn, Info for a change to UP),
// never per item. Instants are read from Config.TimerClock: at each loss,
// and at an observation while a binding is DEGRADED.

// LossState is the loss state of a binding: the type of
// LossStatus.State and of a LossStateChange's From and To.
type LossState string

// The loss states.
const (
	// LossUp: no loss since the binding's last change (or ever).
	LossUp LossState = "UP"
	// LossDegraded: the binding lost items within the quiet period.
	LossDegraded LossState = "DEGRADED"
	// LossLatched: the binding lost an item where its policy promised
	// none (FeedConfig.Latch); only Engine.ClearOverload ends it.
	LossLatched LossState = "LATCHED"
)

// LatchRule says which losses latch a binding: the type of
// FeedConfig.Latch.
type LatchRule string

// The latch rules.
const (
	// LatchNeverDrop (the default, "" too): a loss of a binding whose
	// policy is PAUSE or BLOCK_WITH_DEADLINE (a never-drop binding:
	// refused, or dropped after a downgrade, a fence or a journal
	// failure) latches it; a DROP_AFTER_SPIN binding's losses degrade it.
	LatchNeverDrop LatchRule = "never-drop"
	// LatchEveryLoss: every loss latches, whatever the binding's policy.
	LatchEveryLoss LatchRule = "every-loss"
	// LatchNothing: no loss latches: every binding degrades and recovers
	// after the quiet period.
	LatchNothing LatchRule = "nothing"
)

// DefaultQuietPeriod is FeedConfig.QuietPeriod when it is 0, and
// MinQuietPeriod the least a feed may set.
const (
	DefaultQuietPeriod = time.Minute
	MinQuietPeriod     = time.Second
)

// ClearedReason begins the Reason of the change an operator's clear makes
// (Engine.ClearOverload), followed by the operator's reason.
const ClearedReason = "cleared by the operator (Engine.ClearOverload): "

// ErrNotLatched: Engine.ClearOverload named a binding that is not LATCHED
// (UP, or DEGRADED: it recovers by itself). Nothing was cleared. Callers
// match it with errors.Is.
var ErrNotLatched = errors.New("engine: not latched")

// LossStateChange is one change of a binding's loss state, as the
// Observer's LossState hook is told it. A plain value.
type LossStateChange struct {
	Feed, Group string
	From, To    LossState
	// Reason says why: the loss that degraded or latched the binding,
	// the quiet period that passed, or ClearedReason and the operator's.
	Reason string
	// At is when the change happened on the TimerClock: the loss, the
	// clear, or, for a recovery from DEGRADED, the last loss plus the
	// quiet period. Observed is when the engine applied it (the same but
	// for a recovery, applied when observed).
	At, Observed time.Time
}

// LossStatus is a binding's loss state in the status (the Loss of each
// SubscriberStatus of its feed and group). A plain value; its JSON is
// omitted while it is zero (IsZero: UP, never changed, nothing lost).
type LossStatus struct {
	State LossState `json:"state"`
	// Since is when the binding entered State (a recovery: its last loss
	// plus the quiet period); zero for UP since the run began.
	Since time.Time `json:"since,omitzero"`
	// LastLoss is when it last lost an item; zero when it never did.
	LastLoss time.Time `json:"lastLoss,omitzero"`
	// Reason is why it is in State (for LATCHED, the loss that latched
	// it); empty for UP since the run began.
	Reason string `json:"reason,omitempty"`
	// Cleared is when an operator last cleared it (Engine.ClearOverload):
	// its loss window, which FeedStatus.Lossless judges, begins there;
	// zero when never (the window is the run).
	Cleared time.Time `json:"cleared,omitzero"`
}

// IsZero reports whether nothing ever happened to the binding: UP since
// the run began, no loss, never cleared.
func (l LossStatus) IsZero() bool {
	return (l.State == "" || l.State == LossUp) && l.Since.IsZero() && l.LastLoss.IsZero() && l.Reason == "" && l.Cleared.IsZero()
}

// lossState is the loss state of one group's binding to a feed (under the
// feed's lock).
type lossState struct {
	state    LossState
	since    time.Time
	lastLoss time.Time
	reason   string
	cleared  time.Time
}

// lossOf is the group's loss state on the feed, made UP (f.mu held).
func (f *Feed) lossOf(group string) *lossState {
	ls := f.lossStates[group]
	if ls == nil {
		if f.lossStates == nil {
			f.lossStates = map[string]*lossState{}
		}
		ls = &lossState{state: LossUp}
		f.lossStates[group] = ls
	}
	return ls
}

// change moves the group's state to `to` (f.mu held): the change is kept
// for the hook and the log (deliverChanges, once the lock is let go).
func (f *Feed) change(group string, ls *lossState, to LossState, reason string, at, observed time.Time) {
	f.changes = append(f.changes, LossStateChange{Feed: f.name, Group: group, From: ls.state, To: to,
		Reason: reason, At: at, Observed: observed})
	ls.state, ls.since, ls.reason = to, at, reason
	if to == LossDegraded {
		f.eng.ov.wake() // to apply the recovery once the quiet period passed
	}
}

// recover applies the group's pending recovery at now, if the quiet period
// passed since its last loss (f.mu held).
func (f *Feed) recover(group string, ls *lossState, now time.Time) {
	if ls.state != LossDegraded {
		return
	}
	if due := ls.lastLoss.Add(f.quiet); !now.Before(due) {
		f.change(group, ls, LossUp, fmt.Sprintf("no loss for the quiet period (%s)", f.quiet), due, now)
	}
}

// observeLosses applies every pending recovery at now (f.mu held). It
// reads the TimerClock only when some binding is DEGRADED.
func (f *Feed) observeLosses() {
	var now time.Time
	for g, ls := range f.lossStates {
		if ls.state != LossDegraded {
			continue
		}
		if now.IsZero() {
			now = f.eng.cfg.TimerClock.Now()
		}
		f.recover(g, ls, now)
	}
}

// latches reports whether a loss of b latches it (FeedConfig.Latch).
func (f *Feed) latches(b *binding) bool {
	switch f.latch {
	case LatchEveryLoss:
		return true
	case LatchNothing:
		return false
	}
	return b.policy.Kind != DropAfterSpinKind
}

// lose notes a loss of b (f.mu held): a drop or a refusal, for reason.
func (f *Feed) lose(b *binding, reason string) {
	now := f.eng.cfg.TimerClock.Now()
	g := b.group.name
	ls := f.lossOf(g)
	f.recover(g, ls, now)
	ls.lastLoss = now
	switch {
	case ls.state == LossLatched:
	case f.latches(b):
		why := "every loss latches (FeedConfig.Latch " + string(LatchEveryLoss) + "): "
		if f.latch != LatchEveryLoss {
			why = fmt.Sprintf("a %s queue promises no loss: ", b.policy.Kind)
		}
		f.change(g, ls, LossLatched, why+reason, now, now)
	case ls.state == LossUp:
		f.change(g, ls, LossDegraded, reason, now, now)
	}
}

// deliverChanges tells the changes made under the lock to the log and the
// LossState hook, in order, once each: the goroutine that finds changes
// and nobody telling them tells them (and those made meanwhile), so that
// the hook is never called concurrently for one feed, nor under its lock
// (a hook may read the status, or clear). f.mu not held.
func (f *Feed) deliverChanges() {
	f.mu.Lock()
	if f.delivering || len(f.changes) == 0 {
		f.mu.Unlock()
		return
	}
	f.delivering = true
	for len(f.changes) > 0 {
		cs := f.changes
		f.changes = nil
		f.mu.Unlock()
		for _, c := range cs {
			f.eng.tellLossState(c)
		}
		f.mu.Lock()
	}
	f.delivering = false
	f.mu.Unlock()
}

// tellLossState logs one change (Warn; Info back to UP) and tells the
// Observer.
func (e *Engine) tellLossState(c LossStateChange) {
	level := slog.LevelWarn
	if c.To == LossUp {
		level = slog.LevelInfo
	}
	when := ""
	if !c.Observed.Equal(c.At) {
		when = fmt.Sprintf(" (observed %s)", c.Observed.Format(time.RFC3339Nano))
	}
	e.cfg.Logger.Log(context.Background(), level, fmt.Sprintf("blackbox engine: loss state of queue %s/%s: %s -> %s at %s%s: %s",
		c.Group, c.Feed, c.From, c.To, c.At.Format(time.RFC3339Nano), when, c.Reason))
	if h := e.cfg.Observer.LossState; h != nil {
		h(c.Group, c)
	}
}

// lossStatus is the group's loss state for the status (f.mu held, the
// pending recoveries applied).
func (f *Feed) lossStatus(group string) LossStatus {
	ls := f.lossStates[group]
	if ls == nil {
		return LossStatus{State: LossUp}
	}
	return LossStatus{State: ls.state, Since: ls.since, LastLoss: ls.lastLoss, Reason: ls.reason, Cleared: ls.cleared}
}

// lostInWindow reports whether b lost an item since its loss window began
// (the run's start, or the operator's last clear of its group) (f.mu held).
func (b *binding) lostInWindow() bool {
	return b.dropped.Load() > b.clearedDrops || b.refused.Load() > b.clearedRefusals
}

// lookOverLosses applies the recoveries due at now; it reports whether a
// binding is still DEGRADED, and how long until its recovery is due.
func (f *Feed) lookOverLosses(now time.Time) (time.Duration, bool) {
	f.mu.Lock()
	wait, degraded := time.Duration(math.MaxInt64), false
	for g, ls := range f.lossStates {
		if ls.state != LossDegraded {
			continue
		}
		f.recover(g, ls, now)
		if ls.state == LossDegraded {
			wait, degraded = min(wait, ls.lastLoss.Add(f.quiet).Sub(now)), true
		}
	}
	f.mu.Unlock()
	f.deliverChanges()
	return wait, degraded
}

// ClearOverload ends the latch of group's binding to feed (LATCHED: it
// lost an item its policy promised not to lose, FeedConfig.Latch): the
// binding is UP again, the change is told to the Observer (the recorder's
// STATE row) with ClearedReason followed by reason ("" becomes "no reason
// given"), and the binding's loss window begins now: FeedStatus.Lossless
// no longer counts its drops and refusals before the clear (its counters
// are not reset). The change is told before ClearOverload returns, unless
// another goroutine is telling the feed's changes (then by it, in order).
//
// Refused, clearing nothing: an unknown feed or group, or a group never
// subscribed to the feed (ErrUnknown); a binding that is not LATCHED
// (ErrNotLatched: UP, or DEGRADED, which recovers by itself); any clear
// once Stop began (ErrStopped). Safe for concurrent use.
func (e *Engine) ClearOverload(feed, group, reason string) error {
	f, g := e.byName[feed], e.gByN[group]
	if f == nil || g == nil {
		return fmt.Errorf("%w: feed %q group %q", ErrUnknown, feed, group)
	}
	if reason == "" {
		reason = noReason
	}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return fmt.Errorf("%w: clear of feed %q group %q", ErrStopped, feed, group)
	}
	f.mu.Lock()
	err := f.clearLocked(g, reason)
	f.mu.Unlock()
	e.mu.Unlock()
	f.deliverChanges() // the clear, or a recovery the refusal observed
	if err != nil {
		return err
	}
	e.watch.note() // the feed may be lossless again
	return nil
}

// clearLocked is ClearOverload with f.mu held.
func (f *Feed) clearLocked(g *group, reason string) error {
	subscribed := false
	for _, b := range f.all {
		subscribed = subscribed || b.group == g
	}
	if !subscribed {
		return fmt.Errorf("%w: group %q never subscribed to feed %q", ErrUnknown, g.name, f.name)
	}
	ls := f.lossStates[g.name]
	if ls == nil || ls.state != LossLatched {
		state := LossUp
		if ls != nil {
			f.recover(g.name, ls, f.eng.cfg.TimerClock.Now())
			state = ls.state
		}
		return fmt.Errorf("%w: queue %s/%s is %s", ErrNotLatched, g.name, f.name, state)
	}
	now := f.eng.cfg.TimerClock.Now()
	f.change(g.name, ls, LossUp, ClearedReason+reason, now, now)
	ls.cleared = now
	for _, b := range f.all {
		if b.group == g {
			b.clearedDrops, b.clearedRefusals = b.dropped.Load(), b.refused.Load()
		}
	}
	return nil
}

// validateLoss checks a feed's loss-state configuration (New).
func validateLoss(fc FeedConfig) (key string, err error) {
	switch fc.Latch {
	case "", LatchNeverDrop, LatchEveryLoss, LatchNothing:
	default:
		return "latch", fmt.Errorf("%w: unknown latch rule %q (want %s, %s or %s)", ErrConfig, fc.Latch, LatchNeverDrop, LatchEveryLoss, LatchNothing)
	}
	if fc.QuietPeriod != 0 && fc.QuietPeriod < MinQuietPeriod {
		return "quietPeriod", fmt.Errorf("%w: quiet period %s below the minimum %s", ErrConfig, fc.QuietPeriod, MinQuietPeriod)
	}
	return "", nil
}
