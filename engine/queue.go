package engine

import (
	"sync"
	"sync/atomic"
)

// envelope is one item in a queue. A positioned item carries its epoch and
// position; the group builds its Delivery, so the publisher allocates
// nothing per item.
type envelope struct {
	item       any
	seq        int64
	epoch      int64
	pos        Position
	positioned bool
}

// queue is a bounded single-producer single-consumer ring. The producer is
// serialised by its feed's lock; the consumer is its group's goroutine. The
// producer's and the consumer's counters sit on separate cache lines, and
// each side keeps a cached copy of the other's counter, so an uncontended
// hand-off touches the other side's line only when the cache says full or
// empty.
type queue struct {
	buf       []slot
	mask      int64
	size      int64
	_         [40]byte
	tail      atomic.Int64 // items enqueued (the producer position)
	headCache int64        // producer's last view of head (feed lock held)
	_         [48]byte
	head      atomic.Int64 // items taken by the consumer, as published to the producer
	headLocal int64        // items taken (consumer only); head lags it by less than every
	every     int64        // publish head every this many items
	_         [48]byte
	// dispatched counts items whose delivery completed: only items up to it
	// may be acknowledged to the source.
	dispatched atomic.Int64
	_          [56]byte
}

func newQueue(size int) *queue {
	// Publishing the head on every item makes the producer's look at it (on
	// a full queue) and the consumer's store fight over one cache line.
	// Publishing every few items (never more than an eighth of the queue)
	// only makes the producer see the room a little later.
	// The ring holds every-1 slots more than asked, so that the producer can
	// always queue size items beyond what the consumer has published as
	// taken: QueueSize is a guaranteed capacity, never less.
	every := max(1, min(32, int64(size)/8))
	capacity := int64(size) + every - 1
	n := int64(1)
	for n < capacity {
		n <<= 1
	}
	return &queue{buf: make([]slot, n), mask: n - 1, size: capacity, every: every}
}

// room is the free capacity, seen by the producer (feed lock held).
func (q *queue) room() int64 {
	r := q.size - (q.tail.Load() - q.headCache)
	if r <= 0 {
		q.headCache = q.head.Load()
		r = q.size - (q.tail.Load() - q.headCache)
	}
	return r
}

// slot is one place of the ring. ready is the queue position after the
// item once the producer wrote it: the consumer looks at the slot it takes
// next, never at the producer's tail, so a hand-off moves one cache line
// between the cores, not two.
type slot struct {
	ready atomic.Int64
	env   envelope
}

// offer enqueues e; the caller (the feed, under its lock) checked room.
func (q *queue) offer(e envelope) int64 {
	t := q.tail.Load()
	s := &q.buf[t&q.mask]
	s.env = e
	s.ready.Store(t + 1)
	q.tail.Store(t + 1)
	return t + 1
}

// take dequeues one item, if any (consumer only).
func (q *queue) take() (envelope, bool) {
	h := q.headLocal
	s := &q.buf[h&q.mask]
	if s.ready.Load() != h+1 {
		q.publishHead()
		return envelope{}, false
	}
	// The slot is not cleared: writing it would take its cache line from
	// the producer on every item. It keeps its item reachable until the
	// producer overwrites it, so a queue holds at most its capacity of
	// items taken.
	e := s.env
	q.headLocal = h + 1
	if (h+1)%q.every == 0 {
		q.head.Store(h + 1)
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

	dropped    atomic.Int64
	refused    atomic.Int64
	downgraded atomic.Int64

	marksMu  sync.Mutex
	marks    []dropMark
	overflow dropMark // drops past maxMarks, reported as approximate
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
	pos := b.q.tail.Load()
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
}

// takeMarks returns the drop marks at or before queue position pos
// (consumer only). Overflowed drops are folded into the first mark returned,
// or returned on their own, flagged approximate.
func (b *binding) takeMarks(pos int64, out []Drop) []Drop {
	if !b.hasMarks.Load() {
		return out
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
	b.hasMarks.Store(len(b.marks) > 0)
	return out
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
