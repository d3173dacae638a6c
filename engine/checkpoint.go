package engine

import (
	"fmt"

	"sync"
	"sync/atomic"

	"github.com/blackbox-audit/blackbox/core"
)

// holdState is a queue's part of a hold: how far the hold's marks made the
// queue durable. owner is the hold's Checkpoint (its part 0): only the
// handles of that hold move or end it, never those of a hold it replaced.
type holdState struct {
	owner   *Checkpoint
	durable atomic.Int64
}

// Checkpoint holds a feed's commits for one group until the group's state is
// durable: while held, the group's queue counts as processed only up to the
// last mark made durable. Marks belong to the queue (binding) they were taken
// on: after the group resubscribes, the new queue is held at nothing durable
// and marks of the old one are ignored. A Checkpoint is safe for concurrent
// use: Mark on the group's goroutine, DurableThrough from any goroutine.
//
// A checkpoint of HoldParts is one part of a hold shared by several
// holders (the instances of a group's workers, each saving a state of its
// own): the queue counts as processed only as far as every part made
// durable. It is the core.Checkpoint a core.CheckpointUser is given.
// Engine.Hold and Engine.HoldParts return it.
type Checkpoint struct {
	eng      *Engine
	feed     *Feed
	group    *group
	share    *share // the parts of a HoldParts hold; nil for a hold of one
	part     int    // this part's index in share
	released bool   // under eng.mu
}

// share is what the parts of one hold have in common: the last mark each
// part made durable, and which parts released the hold. Safe for
// concurrent use (mu).
type share struct {
	mu    sync.Mutex
	marks []mark
	gone  []bool
	left  int         // parts not released
	first *Checkpoint // part 0: the one the engine's registry of holds names
}

// low is how far every part not released made queue b durable: a part
// whose last mark is of another queue (made before a resubscribe) counts
// as nothing. mu held.
func (sh *share) low(b *binding) int64 {
	low := int64(-1)
	for i, m := range sh.marks {
		if sh.gone[i] {
			continue
		}
		n := int64(0)
		if m.b == b {
			n = m.n
		}
		if low < 0 || n < low {
			low = n
		}
	}
	return low
}

// mark is what a core.Mark made by Checkpoint.Mark holds: the queue and
// what it had dispatched. No other package can make one, so a hold is
// released only as far as the queue really dispatched.
type mark struct {
	b *binding
	n int64 // items the queue had dispatched
}

// markOf is the engine's mark a core.Mark holds; the zero mark for the
// zero Mark or one another implementation made.
func markOf(m core.Mark) mark {
	v, _ := m.Value().(mark)
	return v
}

// Hold holds the commits of feed for group. Take it before the feed
// delivers: items acknowledged before it stay acknowledged. A later Hold
// (or HoldParts) of the same feed and group replaces it, held at nothing
// durable: the replaced handles then move nothing (DurableThrough returns
// ErrHoldReplaced) and their Release ends nothing.
func (e *Engine) Hold(feed, group string) (*Checkpoint, error) {
	cps, err := e.HoldParts(feed, group, 1)
	if err != nil {
		return nil, err
	}
	return cps[0], nil
}

// HoldParts holds the commits of feed for group for n holders, each given
// a part: the queue counts as processed only as far as the least of the
// marks the parts made durable (the last mark each gave DurableThrough).
// A part that calls Release no longer counts; the hold ends when every
// part released it. For the instances of a group's workers, each saving
// a state of its own: an item counts as saved only once the worker that
// handled it saved it, and the queue's prefix spans every worker. Take it
// before the feed delivers, as Hold. n must be at least 1; Hold is
// HoldParts with n 1.
func (e *Engine) HoldParts(feed, group string, n int) ([]*Checkpoint, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.holdPartsLocked(feed, group, n)
}

// holdPartsLocked is HoldParts with e.mu held.
func (e *Engine) holdPartsLocked(feed, group string, n int) ([]*Checkpoint, error) {
	f, g := e.byName[feed], e.gByN[group]
	if f == nil || g == nil {
		return nil, fmt.Errorf("%w: feed %q group %q", ErrUnknown, feed, group)
	}
	if n < 1 {
		return nil, fmt.Errorf("engine: a hold of %d parts (feed %q group %q)", n, feed, group)
	}
	cps := make([]*Checkpoint, n)
	var sh *share
	if n > 1 {
		sh = &share{marks: make([]mark, n), gone: make([]bool, n), left: n}
	}
	for i := range cps {
		cps[i] = &Checkpoint{eng: e, feed: f, group: g, share: sh, part: i}
	}
	if sh != nil {
		sh.first = cps[0]
	}
	e.holds[[2]string{feed, group}] = cps[0] // the part that ends the hold
	if b := cps[0].current(); b != nil {
		b.hold.Store(&holdState{owner: cps[0]})
	}
	return cps, nil
}

// first is the part that names cp's hold (the hold's owner): cp itself for
// a hold of one.
func (cp *Checkpoint) first() *Checkpoint {
	if cp.share != nil {
		return cp.share.first
	}
	return cp
}

// live is queue b's state of cp's hold; nil when b is not held, or held by
// another hold (one that replaced cp's).
func (cp *Checkpoint) live(b *binding) *holdState {
	if h := b.hold.Load(); h != nil && h.owner == cp.first() {
		return h
	}
	return nil
}

func (cp *Checkpoint) current() *binding {
	for _, b := range *cp.group.bindings.Load() {
		if b.feed == cp.feed {
			return b
		}
	}
	return nil
}

// Mark returns what the group's queue has dispatched so far. Inside a
// handler it does not count the item being handled.
func (cp *Checkpoint) Mark() core.Mark {
	b := cp.current()
	if b == nil {
		return core.Mark{}
	}
	return core.NewMark(mark{b: b, n: b.dispatched.Load()})
}

// DurableThrough says the state covering m is durable: the source may commit
// the items m counts. Marks only advance. A mark of another feed's or
// group's checkpoint, or the zero Mark, moves nothing (ErrForeignMark); a
// mark of an old queue of this checkpoint (made before the group was
// subscribed again) is stale: refused with ErrStaleToken and counted in the
// group's status. A part of HoldParts moves the hold only as far as every
// part's last durable mark; a part that released moves nothing. The handle
// of a hold that a later Hold of the same feed and group replaced moves
// nothing (ErrHoldReplaced): the live hold is its own handles' alone.
func (cp *Checkpoint) DurableThrough(cm core.Mark) error {
	defer cp.eng.watch.note() // a removed queue's stall may be over
	m := markOf(cm)
	if m.b == nil || m.b.feed != cp.feed || m.b.group != cp.group {
		return ErrForeignMark
	}
	if cur := cp.current(); cur != m.b || m.b.removed.Load() {
		cp.group.stale.Add(1)
		return fmt.Errorf("%w: a mark of queue %s made before it was subscribed again", ErrStaleToken, m.b.name)
	}
	h := cp.live(m.b)
	if h == nil {
		if m.b.hold.Load() != nil {
			return fmt.Errorf("%w: feed %q group %q", ErrHoldReplaced, cp.feed.name, cp.group.name)
		}
		return nil // released: nothing to move
	}
	sh := cp.share
	if sh == nil {
		advance(h, m.n)
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.gone[cp.part] {
		return nil
	}
	if p := sh.marks[cp.part]; p.b != m.b || p.n < m.n {
		sh.marks[cp.part] = m
	}
	advance(h, sh.low(m.b))
	return nil
}

// Fail says the holder cannot make its state durable: its saves keep
// failing (a full disk, a state file that cannot be replaced), so the
// items it handled since its last durable mark may never be committed.
// The group fails, as when the recorder cannot write: it takes no more
// items and fires no more timers, its streams get no END, its feeds report
// it stalled and not lossless and never settle, and Engine.Err (so
// WaitSettled and Stop) returns a *DurableError wrapping err, which should
// name the state. The hold stays: the feeds commit nothing past what the
// holders made durable (a later DurableThrough, CloseCheckpoint's last
// save, still moves it), and a restart delivers the rest again. A
// released checkpoint may still Fail: a holder that saves at each
// completion (and so releases the hold) calls Fail from the completion
// whose save keeps failing, before it returns its error; a completion
// that fails once its group failed does not count, so its item is not
// committed. The first failure of a group is kept; a nil err stands for
// ErrNotDurable. Safe from any goroutine.
func (cp *Checkpoint) Fail(err error) {
	if err == nil {
		err = ErrNotDurable
	}
	cp.group.failWith(&DurableError{Group: cp.group.name, Feed: cp.feed.name, Err: err}, err)
}

// advance moves a queue's durable count under hold h up to n (never down).
func advance(h *holdState, n int64) {
	for {
		v := h.durable.Load()
		if n <= v || h.durable.CompareAndSwap(v, n) {
			return
		}
	}
}

// Release ends the hold: the queue counts as processed when dispatched
// again. A part of HoldParts ends only its own part (the others hold on
// as far as they made durable); the last part to release ends the hold.
// Releasing again does nothing more. The handle of a hold that a later
// Hold of the same feed and group replaced ends nothing: the live hold
// stays.
func (cp *Checkpoint) Release() {
	defer cp.eng.watch.note()
	if sh := cp.share; sh != nil {
		sh.mu.Lock()
		if sh.gone[cp.part] {
			sh.mu.Unlock()
			return
		}
		sh.gone[cp.part] = true
		sh.left--
		if sh.left > 0 {
			if b := cp.current(); b != nil {
				if h := cp.live(b); h != nil {
					advance(h, sh.low(b))
				}
			}
			sh.mu.Unlock()
			return
		}
		sh.mu.Unlock()
	}
	first := cp.first()
	cp.eng.mu.Lock()
	first.released = true
	if cp.eng.holds[[2]string{cp.feed.name, cp.group.name}] == first {
		delete(cp.eng.holds, [2]string{cp.feed.name, cp.group.name})
	}
	cp.eng.mu.Unlock()
	if b := cp.current(); b != nil {
		if h := cp.live(b); h != nil {
			b.hold.CompareAndSwap(h, nil)
		}
	}
}

// A *Checkpoint is what a core.CheckpointUser is handed.
var _ core.Checkpoint = (*Checkpoint)(nil)
