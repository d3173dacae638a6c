// Package ring is the engine's queue: a bounded single-producer
// single-consumer ring of items, one per subscription of a group to a feed.
//
// Invariants (checked by the transcripts in testdata/):
//
//   - Capacity: a producer can always place Size items beyond what the
//     consumer has published as taken (Room counts them); the ring holds
//     every-1 slots more than asked for that.
//   - Order: the consumer takes items in the order they were placed, each
//     once; it never sees an item before the Flush (or Push) that shows it.
//   - Tags: a slot's tag is the item's sequence times four plus flags, and
//     sequences grow along a ring: the slot after the last one taken holds
//     the next item exactly when its tag's sequence is greater than the
//     last one taken.
//   - Positions: a positioned item is taken with the epoch and key it was
//     placed with; the side array is written only when they change.
//   - Resume: after PauseAt, Drained reports true once the consumer took
//     items down to half the ring.
//
// A Ring is not safe for concurrent use except as described: one producer
// (serialised by its feed's lock) and one consumer goroutine.
package ring

import (
	"sync/atomic"

	"github.com/blackbox-audit/blackbox/core"
)

// Item is one item in a ring. A positioned item carries its epoch and
// position; the group builds its Delivery, so the publisher allocates
// nothing per item. A plain value.
type Item struct {
	Value      any
	Seq        int64
	Epoch      int64
	Pos        core.Position
	Positioned bool
}

// Ring is a bounded single-producer single-consumer ring. The producer is
// serialised by its feed's lock; the consumer is its group's goroutine.
//
// A hand-off moves as few cache lines between the cores as it can: a slot
// is 32 bytes, two to a cache line, holding a tag, the item and its offset.
// The tag is the item's feed sequence times four, plus 1 for a positioned
// item, plus 2 when the item's epoch differs from the one before it in this
// queue or its position has a key; only then is the rest of its position
// written, in a side array. The tag is written last: sequences grow along a
// queue, so the slot after the last one taken is filled exactly when its
// tag's sequence is greater than the last one taken. The consumer never
// reads a counter of the producer's to find an item.
//
// A batch (items placed, then flushed together) costs one atomic store: the
// tags of all its items but the first are plain stores, and the first
// item's tag is stored atomically after them. The consumer reads the slots
// in order with atomic loads, so it reads the second item's tag only after
// its load of the first one's saw the batch: the plain stores happen before
// its loads. It never looks past the next slot to take. On amd64 an atomic
// store is a full fence: a fence per batch instead of per item is what lets
// a file source publish near the speed it reads (docs/PERFORMANCE.md).
//
// The producer's and the consumer's counters sit on separate cache lines,
// and the producer keeps a cached copy of the consumer's, which the consumer
// publishes every few items, so a hand-off touches no counter of the other
// side.
type Ring struct {
	slots []slot
	ext   []ext
	size  int64 // capacity
	_     [line - 56]byte

	// The producer's side, written under the feed's lock: tail is read
	// elsewhere only under that lock, never by the consumer.
	tail      int64   // items enqueued (the producer position)
	tailIdx   int     // tail's index in the ring
	headCache int64   // producer's last view of head
	epochIn   int64   // epoch of the last positioned item placed
	pending   []int64 // tags of the items placed and not yet flushed
	_         [line - 56]byte

	resume atomic.Int64 // the head at which a refused producer is signalled (pauseAt)
	_      [line - 8]byte

	head      atomic.Int64 // items taken by the consumer, as published to the producer
	headLocal int64        // items taken (consumer only); head lags it by less than every
	headIdx   int          // headLocal's index in the ring (consumer only)
	lastSeq   int64        // sequence of the last item taken (consumer only)
	epochOut  int64        // epoch of the last positioned item taken (consumer only)
	every     int64        // publish head every this many items
	_         [line - 48]byte
}

// slot is one place of the ring. tag is loaded atomically by the consumer
// and stored atomically or plainly by the producer (see queue); a slot's
// size is a multiple of 8 bytes, so tag is 64-bit aligned for the atomic
// operations on 32-bit platforms too.
type slot struct {
	tag    int64
	item   any
	offset int64
}

// ext is the rest of a positioned item's position, when it has any.
type ext struct {
	epoch int64
	key   string
}

const (
	tagPositioned = 1
	tagExt        = 2
	tagShift      = 2
)

// line is the distance that keeps two fields written by different cores
// from sharing a cache line, or the pair of lines some processors fetch
// together.
const line = 128

// New returns a ring that holds at least size items.
func New(size int) *Ring {
	// Publishing the head on every item makes the producer's look at it (on
	// a full queue) and the consumer's store fight over one cache line.
	// Publishing every few items (never more than an eighth of the queue)
	// only makes the producer see the room a little later.
	// The ring holds every-1 slots more than asked, so that the producer can
	// always queue size items beyond what the consumer has published as
	// taken: QueueSize is a guaranteed capacity, never less.
	every := max(1, min(32, int64(size)/8))
	n := int64(size) + every - 1
	return &Ring{slots: make([]slot, n), ext: make([]ext, n), size: n, every: every}
}

// Room is the free capacity, seen by the producer (feed lock held).
func (q *Ring) Room() int64 {
	r := q.size - (q.tail - q.headCache)
	if r <= 0 {
		q.headCache = q.head.Load()
		r = q.size - (q.tail - q.headCache)
	}
	return r
}

// Place writes e into the next slot without showing it to the consumer
// yet (feed lock held; the caller checked room); flush shows it. Placing a
// batch before showing any of it lets the cache lines of its slots move to
// the producer's core together, instead of one transfer after another.
func (q *Ring) Place(e Item) int64 {
	if e.Positioned {
		return q.PlacePositioned(e.Value, e.Seq, e.Epoch, &e.Pos)
	}
	return q.placeTag(e.Value, e.Seq<<tagShift)
}

// PlacePositioned places a positioned item (see place).
func (q *Ring) PlacePositioned(item any, seq, epoch int64, pos *core.Position) int64 {
	i := q.tailIdx
	tag := seq<<tagShift | tagPositioned
	q.slots[i].offset = pos.Offset
	if epoch != q.epochIn || pos.Key != "" {
		q.ext[i] = ext{epoch: epoch, key: pos.Key}
		q.epochIn = epoch
		tag |= tagExt
	}
	return q.placeTag(item, tag)
}

// placeTag writes the item into the next slot and keeps its tag for flush.
func (q *Ring) placeTag(item any, tag int64) int64 {
	i := q.tailIdx
	q.slots[i].item = item
	q.pending = append(q.pending, tag)
	if i++; i == len(q.slots) {
		i = 0
	}
	q.tailIdx = i
	q.tail++
	return q.tail
}

// Push places a push item and shows it to the consumer at once (feed lock
// held; the caller checked room; nothing placed is pending).
func (q *Ring) Push(item any, seq int64) {
	i := q.tailIdx
	s := &q.slots[i]
	s.item = item
	atomic.StoreInt64(&s.tag, seq<<tagShift)
	if i++; i == len(q.slots) {
		i = 0
	}
	q.tailIdx = i
	q.tail++
}

// Flush shows the consumer every placed item, in order (feed lock held):
// the tags after the first placed one with plain stores, then the first
// one's with an atomic store (see queue). It reports whether there were any.
func (q *Ring) Flush() bool {
	if len(q.pending) == 0 {
		return false
	}
	first := q.tailIdx - len(q.pending)
	if first < 0 {
		first += len(q.slots)
	}
	i := first
	for _, tag := range q.pending[1:] {
		if i++; i == len(q.slots) {
			i = 0
		}
		q.slots[i].tag = tag
	}
	atomic.StoreInt64(&q.slots[first].tag, q.pending[0])
	q.pending = q.pending[:0]
	return true
}

// NonEmpty reports whether the next slot holds an item not yet taken
// (consumer only): its tag's sequence is past the last one taken, since any
// older item in it was taken before.
func (q *Ring) NonEmpty() bool {
	return atomic.LoadInt64(&q.slots[q.headIdx].tag)>>tagShift > q.lastSeq
}

// PauseAt records, when the producer is refused an item, the head at which
// the queue will be half empty (feed lock held); the consumer signals the
// waiting producer when it gets there (see drained).
func (q *Ring) PauseAt() {
	q.resume.Store(q.tail - q.size/2)
}

// Drained reports whether the consumer took items up to the head recorded
// by the last pauseAt (consumer only).
func (q *Ring) Drained() bool { return q.headLocal >= q.resume.Load() }

// Take dequeues one item, if any (consumer only).
func (q *Ring) Take() (Item, bool) {
	i := q.headIdx
	s := &q.slots[i]
	tag := atomic.LoadInt64(&s.tag)
	if tag>>tagShift <= q.lastSeq {
		q.PublishHead()
		return Item{}, false
	}
	// The slot is not cleared: writing it would take its cache line from
	// the producer. It keeps its item reachable until the producer
	// overwrites it, so a queue holds at most its capacity of items taken.
	e := Item{Value: s.item, Seq: tag >> tagShift}
	if tag&tagPositioned != 0 {
		if tag&tagExt != 0 {
			x := &q.ext[i]
			q.epochOut = x.epoch
			e.Pos.Key = x.key
		}
		e.Epoch, e.Pos.Offset, e.Positioned = q.epochOut, s.offset, true
	}
	if i++; i == len(q.slots) {
		i = 0
	}
	q.headIdx = i
	q.lastSeq = e.Seq
	q.headLocal++
	if q.headLocal%q.every == 0 {
		q.head.Store(q.headLocal)
	}
	return e, true
}

// PublishHead makes every taken item's slot visible to the producer
// (consumer only).
func (q *Ring) PublishHead() {
	if q.head.Load() != q.headLocal {
		q.head.Store(q.headLocal)
	}
}

// Tail is how many items were placed (the producer position; producer
// only, or under the producer's lock).
func (q *Ring) Tail() int64 { return q.tail }

// Taken is how many items the consumer took (consumer only).
func (q *Ring) Taken() int64 { return q.headLocal }
