// Package window is the engine's acknowledgement window: the items of a
// positioned feed published and not yet acknowledged to its source, in
// publish order, each with the queue position just after it in every queue
// it was offered to.
//
// Invariants (checked by the transcripts in testdata/):
//
//   - Order: entries leave in publish order. PopDue pops the longest due
//     prefix: an entry is never acknowledged before one published before
//     it, however far its own queues went.
//   - Due: an entry is due when every queue it was offered to (After[i] not
//     0) has an acknowledgement point (Target.AckPoint) at or past
//     After[i]: a queue it was not offered to (dropped there) never holds
//     it.
//   - Coalescing: an entry offered to no queue (dropped everywhere) is due
//     as soon as the one before it; Coalesce folds it into that one (its
//     sequence and position become the earlier entry's) when both are of
//     the same epoch, so that a run of drops costs no slot.
//   - Reuse: slots, and their After slices, are reused; Push zeroes them.
//   - Forget: an entry a queue no longer holds (Forget) waits for it no
//     more, as if it had not been offered to it; its own item's sequence
//     and offset (ItemSeq, ItemOffset) survive a Coalesce.
//   - Age: an entry's At (when its item was taken) passes to its Ack; a
//     Coalesce keeps the earlier entry's, the older.
//
// A Window is not safe for concurrent use: its feed's lock guards it.
package window

import (
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// Target is a queue an entry can be offered to: how far its items may be
// acknowledged (its dispatched count, held back by a checkpoint).
type Target interface {
	comparable
	AckPoint() int64
}

// Entry is one item of the window: its position and, per queue it was
// offered to (Targets), the queue position just after it (After; 0: not
// offered).
type Entry[T Target] struct {
	Seq, Epoch int64
	Pos        core.Position
	// ItemSeq and ItemOffset are the entry's own item's sequence and
	// offset: Seq and Pos.Offset, unless Coalesce folded later items into
	// the entry (Seq and Pos are then the last folded item's). The queues
	// the entry was offered to hold this item.
	ItemSeq, ItemOffset int64
	// At is when the feed took the entry's item (the caller sets it;
	// zero: not timed). Coalesce keeps the earlier entry's: an entry is
	// as old as its oldest item.
	At      time.Time
	Targets []T
	After   []int64
}

// Due reports whether every queue the entry was offered to processed it.
func (e *Entry[T]) Due() bool {
	for i, t := range e.Targets {
		if a := e.After[i]; a != 0 && t.AckPoint() < a {
			return false
		}
	}
	return true
}

// Ack is an entry leaving the window: what the source is told.
type Ack struct {
	Seq, Epoch int64
	Pos        core.Position
	At         time.Time // the entry's At
}

// Window is a growable ring of entries.
type Window[T Target] struct {
	buf     []Entry[T]
	head, n int
}

// Len is the number of entries in the window.
func (w *Window[T]) Len() int { return w.n }

// At is the i-th oldest entry.
func (w *Window[T]) At(i int) *Entry[T] { return &w.buf[(w.head+i)%len(w.buf)] }

// Push opens the entry of item seq, offered to targets; the caller sets
// where it sits in each (After[i]) and, to time it, when it was taken
// (At).
func (w *Window[T]) Push(seq, epoch int64, pos core.Position, targets []T) *Entry[T] {
	if w.n == len(w.buf) {
		nb := make([]Entry[T], max(16, 2*len(w.buf)))
		for i := 0; i < w.n; i++ {
			nb[i] = *w.At(i)
		}
		w.buf, w.head = nb, 0
	}
	e := w.At(w.n)
	w.n++
	after := e.After[:0]
	for range targets {
		after = append(after, 0)
	}
	*e = Entry[T]{Seq: seq, Epoch: epoch, Pos: pos, ItemSeq: seq, ItemOffset: pos.Offset, Targets: targets, After: after}
	return e
}

// PopDue pops the due prefix of the window, appending each entry to out.
func (w *Window[T]) PopDue(out []Ack) []Ack {
	for w.n > 0 {
		e := w.At(0)
		if !e.Due() {
			break
		}
		out = append(out, Ack{Seq: e.Seq, Epoch: e.Epoch, Pos: e.Pos, At: e.At})
		e.Targets = nil
		w.head = (w.head + 1) % len(w.buf)
		w.n--
	}
	return out
}

// Coalesce folds e, the newest entry, into the one before it when it
// waits for nothing (offered to no queue) and both are of one epoch: it is
// due as soon as that one is.
func (w *Window[T]) Coalesce(e *Entry[T]) {
	if e == nil || w.n < 2 || e != w.At(w.n-1) {
		return
	}
	for _, a := range e.After {
		if a != 0 {
			return
		}
	}
	prev := w.At(w.n - 2)
	if prev.Epoch != e.Epoch {
		return
	}
	prev.Seq, prev.Pos = e.Seq, e.Pos
	e.Targets = nil
	w.n--
}

// WaitsFor reports whether an entry waits for t: offered to it and not
// yet processed there.
func (w *Window[T]) WaitsFor(t T) bool {
	for i := 0; i < w.n; i++ {
		e := w.At(i)
		for j, x := range e.Targets {
			if x == t && e.After[j] != 0 && t.AckPoint() < e.After[j] {
				return true
			}
		}
	}
	return false
}

// Forget makes every entry offered to t at a queue position past from
// wait for t no more (its After for t becomes 0: not offered), calling
// each, if not nil, with the entry and that position first, oldest entry
// first. A queue whose items will never be processed (an operator
// released them) holds nothing after it.
func (w *Window[T]) Forget(t T, from int64, each func(e *Entry[T], after int64)) {
	for i := 0; i < w.n; i++ {
		e := w.At(i)
		for j, x := range e.Targets {
			if x == t && e.After[j] > from {
				if each != nil {
					each(e, e.After[j])
				}
				e.After[j] = 0
			}
		}
	}
}
