package engine

import (
	"fmt"
	"sync/atomic"
)

type holdState struct {
	durable atomic.Int64
}

// Checkpoint holds a feed's commits for one group until the group's state is
// durable: while held, the group's queue counts as processed only up to the
// last mark made durable. Marks belong to the queue (binding) they were taken
// on: after the group resubscribes, the new queue is held at nothing durable
// and marks of the old one are ignored. A Checkpoint is safe for concurrent
// use: Mark on the group's goroutine, DurableThrough from any goroutine.
type Checkpoint struct {
	eng      *Engine
	feed     *Feed
	group    *group
	released bool // under eng.mu
}

// Mark is what a group's queue had dispatched when it was taken. It is
// opaque: only Checkpoint.Mark makes one, and it cannot be edited, so a
// hold is released only as far as the queue really dispatched. The zero Mark
// covers nothing. A Mark is a plain value, safe to copy and to pass between
// goroutines.
type Mark struct {
	b *binding
	n int64 // items the queue had dispatched
}

// Hold holds the commits of feed for group. Take it before the feed
// delivers: items acknowledged before it stay acknowledged.
func (e *Engine) Hold(feed, group string) (*Checkpoint, error) {
	f, g := e.byName[feed], e.gByN[group]
	if f == nil || g == nil {
		return nil, fmt.Errorf("%w: feed %q group %q", ErrUnknown, feed, group)
	}
	cp := &Checkpoint{eng: e, feed: f, group: g}
	e.mu.Lock()
	e.holds[[2]string{feed, group}] = cp
	e.mu.Unlock()
	if b := cp.current(); b != nil {
		b.hold.Store(&holdState{})
	}
	return cp, nil
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
func (cp *Checkpoint) Mark() Mark {
	b := cp.current()
	if b == nil {
		return Mark{}
	}
	return Mark{b: b, n: b.q.dispatched.Load()}
}

// DurableThrough says the state covering m is durable: the source may commit
// the items m counts. Marks only advance. A mark of another feed's or
// group's checkpoint, or the zero Mark, moves nothing (ErrForeignMark); a
// mark of an old queue of this checkpoint (made before the group was
// subscribed again) is stale: refused with ErrStaleToken and counted in the
// group's status.
func (cp *Checkpoint) DurableThrough(m Mark) error {
	if m.b == nil || m.b.feed != cp.feed || m.b.group != cp.group {
		return ErrForeignMark
	}
	if cur := cp.current(); cur != m.b || m.b.removed.Load() {
		cp.group.stale.Add(1)
		return fmt.Errorf("%w: a mark of queue %s made before it was subscribed again", ErrStaleToken, m.b.name)
	}
	h := m.b.hold.Load()
	if h == nil {
		return nil
	}
	for {
		v := h.durable.Load()
		if m.n <= v || h.durable.CompareAndSwap(v, m.n) {
			return nil
		}
	}
}

// Release ends the hold: the queue counts as processed when dispatched again.
func (cp *Checkpoint) Release() {
	cp.eng.mu.Lock()
	cp.released = true
	if cp.eng.holds[[2]string{cp.feed.name, cp.group.name}] == cp {
		delete(cp.eng.holds, [2]string{cp.feed.name, cp.group.name})
	}
	cp.eng.mu.Unlock()
	if b := cp.current(); b != nil {
		b.hold.Store(nil)
	}
}
