package engine

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/blackbox-audit/blackbox/core"
)

// envelope is one item in a queue. A positioned item carries its epoch and
// position; the group builds its Delivery, so the publisher allocates
// nothing per item.
type envelope struct {
	item       any
	seq        int64
	epoch      int64
	pos        core.Position
	positioned bool
}

// queue is a bounded single-producer single-consumer ring. The producer is
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
type queue struct {
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

	// dispatched counts items whose delivery completed: only items up to it
	// may be acknowledged to the source.
	dispatched atomic.Int64
	_          [line - 8]byte
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

func newQueue(size int) *queue {
	// Publishing the head on every item makes the producer's look at it (on
	// a full queue) and the consumer's store fight over one cache line.
	// Publishing every few items (never more than an eighth of the queue)
	// only makes the producer see the room a little later.
	// The ring holds every-1 slots more than asked, so that the producer can
	// always queue size items beyond what the consumer has published as
	// taken: QueueSize is a guaranteed capacity, never less.
	every := max(1, min(32, int64(size)/8))
	n := int64(size) + every - 1
	return &queue{slots: make([]slot, n), ext: make([]ext, n), size: n, every: every}
}

// room is the free capacity, seen by the producer (feed lock held).
func (q *queue) room() int64 {
	r := q.size - (q.tail - q.headCache)
	if r <= 0 {
		q.headCache = q.head.Load()
		r = q.size - (q.tail - q.headCache)
	}
	return r
}

// place writes e into the next slot without showing it to the consumer
// yet (feed lock held; the caller checked room); flush shows it. Placing a
// batch before showing any of it lets the cache lines of its slots move to
// the producer's core together, instead of one transfer after another.
func (q *queue) place(e envelope) int64 {
	if e.positioned {
		return q.placePositioned(e.item, e.seq, e.epoch, &e.pos)
	}
	return q.placeTag(e.item, e.seq<<tagShift)
}

// placePositioned places a positioned item (see place).
func (q *queue) placePositioned(item any, seq, epoch int64, pos *core.Position) int64 {
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
func (q *queue) placeTag(item any, tag int64) int64 {
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

// push places a push item and shows it to the consumer at once (feed lock
// held; the caller checked room; nothing placed is pending).
func (q *queue) push(item any, seq int64) {
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

// flush shows the consumer every placed item, in order (feed lock held):
// the tags after the first placed one with plain stores, then the first
// one's with an atomic store (see queue). It reports whether there were any.
func (q *queue) flush() bool {
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

// nonEmpty reports whether the next slot holds an item not yet taken
// (consumer only): its tag's sequence is past the last one taken, since any
// older item in it was taken before.
func (q *queue) nonEmpty() bool {
	return atomic.LoadInt64(&q.slots[q.headIdx].tag)>>tagShift > q.lastSeq
}

// pauseAt records, when the producer is refused an item, the head at which
// the queue will be half empty (feed lock held); the consumer signals the
// waiting producer when it gets there (see drained).
func (q *queue) pauseAt() {
	q.resume.Store(q.tail - q.size/2)
}

// drained reports whether the consumer took items up to the head recorded
// by the last pauseAt (consumer only).
func (q *queue) drained() bool { return q.headLocal >= q.resume.Load() }

// take dequeues one item, if any (consumer only).
func (q *queue) take() (envelope, bool) {
	i := q.headIdx
	s := &q.slots[i]
	tag := atomic.LoadInt64(&s.tag)
	if tag>>tagShift <= q.lastSeq {
		q.publishHead()
		return envelope{}, false
	}
	// The slot is not cleared: writing it would take its cache line from
	// the producer. It keeps its item reachable until the producer
	// overwrites it, so a queue holds at most its capacity of items taken.
	e := envelope{item: s.item, seq: tag >> tagShift}
	if tag&tagPositioned != 0 {
		if tag&tagExt != 0 {
			x := &q.ext[i]
			q.epochOut = x.epoch
			e.pos.Key = x.key
		}
		e.epoch, e.pos.Offset, e.positioned = q.epochOut, s.offset, true
	}
	if i++; i == len(q.slots) {
		i = 0
	}
	q.headIdx = i
	q.lastSeq = e.seq
	q.headLocal++
	if q.headLocal%q.every == 0 {
		q.head.Store(q.headLocal)
	}
	return e, true
}

// publishHead makes every taken item's slot visible to the producer
// (consumer only).
func (q *queue) publishHead() {
	if q.head.Load() != q.headLocal {
		q.head.Store(q.headLocal)
	}
}

// binding is one subscription of a group to a feed: its queue, its policy,
// its loss counters and drop marks, and its processing-checkpoint hold.
type binding struct {
	feed   *Feed
	group  *group
	name   string // group/feed
	policy Policy
	q      *queue

	removed atomic.Bool // unsubscribed: its backlog is never processed in this run
	gen     int64       // the queue's generation (Token.Generation)
	gap     *gapState   // a group of several workers: the completions beyond the prefix

	dropped    atomic.Int64
	refused    atomic.Int64
	downgraded atomic.Int64

	marksMu  sync.Mutex
	marks    []dropMark
	overflow dropMark   // drops past maxMarks, reported as approximate
	losses   []lossMark // source losses not yet reported (Intake.AddLoss)
	hasMarks atomic.Bool

	hold atomic.Pointer[holdState]
}

// maxMarks bounds the pending drop marks of a queue (a variable for tests).
var maxMarks = 1024

type dropMark struct {
	pos      int64 // queue producer position where the items were lost
	count    int64
	firstSeq int64
	lastSeq  int64
	offset   int64
	reason   string
}

// mark records a drop at the queue's current producer position (feed lock held).
func (b *binding) mark(seq, offset int64, reason string) {
	b.dropped.Add(1)
	pos := b.q.tail
	b.marksMu.Lock()
	defer b.marksMu.Unlock()
	if n := len(b.marks); n > 0 && b.marks[n-1].pos == pos && b.marks[n-1].reason == reason {
		m := &b.marks[n-1]
		m.count++
		m.lastSeq, m.offset = seq, offset
	} else if len(b.marks) < maxMarks {
		b.marks = append(b.marks, dropMark{pos: pos, count: 1, firstSeq: seq, lastSeq: seq, offset: offset, reason: reason})
	} else {
		o := &b.overflow
		if o.count == 0 {
			o.firstSeq, o.reason = seq, reason
		}
		o.count++
		o.lastSeq, o.offset = seq, offset
	}
	b.hasMarks.Store(true)
	b.group.notify() // an idle group reports it
}

// lossMark is a source loss at a queue producer position, after the item
// of feed sequence seq.
type lossMark struct {
	pos  int64
	seq  int64
	loss Loss
}

// markLoss records a source loss at the queue's current producer position
// (feed lock held). Past maxMarks pending losses, a loss is folded into the
// last one: its items added (unknown when either is), its range widened.
func (b *binding) markLoss(seq int64, l Loss) {
	pos := b.q.tail
	b.marksMu.Lock()
	defer b.marksMu.Unlock()
	if n := len(b.losses); n >= maxMarks {
		m := &b.losses[n-1].loss
		if m.Items == 0 || l.Items == 0 {
			m.Items = 0
		} else {
			m.Items += l.Items
		}
		if m.To == 0 || l.To == 0 {
			m.To = 0
		} else {
			m.To = max(m.To, l.To)
		}
		m.From = min(m.From, l.From)
		if !strings.HasSuffix(m.Detail, lossesFolded) {
			m.Detail += lossesFolded
		}
	} else {
		b.losses = append(b.losses, lossMark{pos: pos, seq: seq, loss: l})
	}
	b.hasMarks.Store(true)
	b.group.notify() // an idle group reports it
}

// lossesFolded ends the Detail of a loss later ones were folded into.
const lossesFolded = " (and later losses of the feed: the loss marks were full)"

// takeMarks returns the drop marks and the source losses at or before queue
// position pos (consumer only). Overflowed drops are folded into the first
// mark returned, or returned on their own, flagged approximate.
func (b *binding) takeMarks(pos int64, out []Drop, lost []SourceLoss) ([]Drop, []SourceLoss) {
	if !b.hasMarks.Load() {
		return out, lost
	}
	b.marksMu.Lock()
	defer b.marksMu.Unlock()
	i := 0
	for ; i < len(b.marks) && b.marks[i].pos <= pos; i++ {
		m := b.marks[i]
		out = append(out, Drop{Feed: b.feed.name, Group: b.group.name, Count: m.count, FirstSeq: m.firstSeq, LastSeq: m.lastSeq, Offset: m.offset, Reason: m.reason})
	}
	b.marks = append(b.marks[:0], b.marks[i:]...)
	// Drops past the pending marks are folded into the first entry reported
	// after them, or, when no mark is pending at all, reported on their own.
	if o := b.overflow; o.count > 0 && (i > 0 || len(b.marks) == 0) {
		b.overflow = dropMark{}
		if i > 0 {
			d := &out[len(out)-i]
			d.Count += o.count
			d.LastSeq = max(d.LastSeq, o.lastSeq)
			d.Reason += " (plus drops while the drop marks were full)"
			d.Approximate = true
		} else {
			out = append(out, Drop{Feed: b.feed.name, Group: b.group.name, Count: o.count, FirstSeq: o.firstSeq, LastSeq: o.lastSeq, Offset: o.offset, Reason: o.reason + " (position approximate)", Approximate: true})
		}
	}
	j := 0
	for ; j < len(b.losses) && b.losses[j].pos <= pos; j++ {
		m := b.losses[j]
		lost = append(lost, SourceLoss{Feed: b.feed.name, Group: b.group.name, Seq: m.seq, Loss: m.loss})
	}
	b.losses = append(b.losses[:0], b.losses[j:]...)
	b.hasMarks.Store(len(b.marks) > 0 || len(b.losses) > 0)
	return out, lost
}

// ackPoint is how far the source may consider this queue's items processed:
// its dispatched count, or less while a processing checkpoint holds it.
func (b *binding) ackPoint() int64 {
	d := b.q.dispatched.Load()
	if h := b.hold.Load(); h != nil {
		if v := h.durable.Load(); v < d {
			return v
		}
	}
	return d
}

func (b *binding) fenced() bool { return b.group.fenced.Load() || b.group.dead.Load() }
