package engine

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/internal/ring"
)

// line is the distance that keeps two fields written by different cores
// from sharing a cache line, or the pair of lines some processors fetch
// together.
const line = 128

// binding is one subscription of a group to a feed: its queue, its policy,
// its loss counters and drop marks, and its processing-checkpoint hold.
type binding struct {
	feed   *Feed
	group  *group
	name   string // group/feed
	policy Policy
	q      *ring.Ring
	// dispatched counts the items of q whose delivery completed: only
	// items up to it may be acknowledged to the source. The group writes
	// it on every item, publishers read the fields around it: apart.
	_          [line]byte
	dispatched atomic.Int64
	_          [line - 8]byte

	removed atomic.Bool // unsubscribed: its backlog is never processed in this run
	// sealed is 0 until an operator released the queue (Engine.Release):
	// then its dispatched count at the release plus 1 (sealing while the
	// release reads it); items counted past it are refused (refuseLate).
	sealed   atomic.Int64
	released atomic.Int64 // items an operator released (Engine.Release)
	// completed counts the items not handed to the queue because its
	// group completed them in an earlier run (Intake.SkipCompleted).
	completed atomic.Int64
	gen       int64     // the queue's generation (token.Generation)
	gap       *gapState // a group of several workers: the completions beyond the prefix

	dropped    atomic.Int64
	refused    atomic.Int64
	downgraded atomic.Int64
	// The drops and refusals counted when an operator last cleared the
	// group's loss state on the feed (Engine.ClearOverload): its loss
	// window begins there (feed's lock).
	clearedDrops, clearedRefusals int64

	// Under the feed's lock, written when a state begins or ends: the
	// BLOCK publishes' waits for room here (Feed.publish), and the feed's
	// pauses this queue caused (full, or its group fenced, when the pause
	// began; Feed.pausedBy), the current one's included while pausing.
	blocked     int64
	blockedTime time.Duration
	blockedMax  time.Duration
	pausing     bool
	pauses      int64
	pausedTime  time.Duration

	marksMu  sync.Mutex
	marks    []dropMark
	overflow dropMark    // drops past maxMarks, reported as approximate
	losses   []lossMark  // source losses not yet reported (Intake.AddLoss)
	done     []doneMark  // items completed in an earlier run, not handed again
	hasMarks atomic.Bool // marks or losses pending: the group reports them even idle
	hasDone  atomic.Bool // done marks pending: reported once an item follows, or at the end

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

// mark records a drop of item seq (at its position, nil for an item without a
// source position) at the queue's current producer position (feed lock
// held).
func (b *binding) mark(seq int64, at *core.Position, reason string) {
	var offset int64
	if at != nil {
		offset = at.Offset
	}
	if b.dropped.Add(1) == 1 {
		b.feed.noteItem(slog.LevelWarn, itemAttrs(b.feed.name, b.group.name, seq, at),
			"queue %s: first drop, feed %q seq %d: %s; later drops of this queue are counted in its status, not warned",
			b.name, b.feed.name, seq, reason)
	}
	b.feed.lose(b, reason)
	pos := b.q.Tail()
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
	pos := b.q.Tail()
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

// doneMark is a run of items the queue's group completed in an earlier run
// (Intake.SkipCompleted), not placed in the queue, at a queue producer
// position: consecutive sequences of one position space.
type doneMark struct {
	pos         int64
	first, last Commit
}

// markDone records that the item seq at (epoch, pos) is not placed in the
// queue, its group having completed it in an earlier run (feed lock held).
// It extends the last mark when the item follows it at the same queue
// position in the same position space; else it opens a mark, unless
// maxMarks are pending: it then returns false and the item is handed again
// (a re-delivery, never a skip the recording could not name).
func (b *binding) markDone(seq, epoch int64, pos core.Position) bool {
	at := b.q.Tail()
	c := Commit{Seq: seq, Epoch: epoch, Position: pos}
	b.marksMu.Lock()
	defer b.marksMu.Unlock()
	if n := len(b.done); n > 0 {
		m := &b.done[n-1]
		if m.pos == at && m.last.Seq+1 == seq && m.last.Epoch == epoch && m.last.Position.Key == pos.Key {
			m.last = c
			return true
		}
		if n >= maxMarks {
			return false
		}
	}
	// The group is not woken for it: it reports the mark once an item
	// follows it (its next item) or at its end, so that a run of such
	// items is one mark.
	b.done = append(b.done, doneMark{pos: at, first: c, last: c})
	b.hasDone.Store(true)
	return true
}

// lossesFolded ends the Detail of a loss later ones were folded into.
const lossesFolded = " (and later losses of the feed: the loss marks were full)"

// marks is what a queue's marks tell its group's streams: drops, source
// losses and items completed in an earlier run, each in order.
type marks struct {
	drops []Drop
	lost  []SourceLoss
	done  []Completed
}

func (m *marks) empty() bool { return len(m.drops) == 0 && len(m.lost) == 0 && len(m.done) == 0 }

// reset empties m, keeping its arrays.
func (m *marks) reset() { m.drops, m.lost, m.done = m.drops[:0], m.lost[:0], m.done[:0] }

// clone is a copy of m that shares no array with it.
func (m *marks) clone() *marks {
	return &marks{drops: append([]Drop(nil), m.drops...), lost: append([]SourceLoss(nil), m.lost...),
		done: append([]Completed(nil), m.done...)}
}

// add appends o's marks to m's.
func (m *marks) add(o marks) {
	m.drops = append(m.drops, o.drops...)
	m.lost = append(m.lost, o.lost...)
	m.done = append(m.done, o.done...)
}

// takeMarks appends to out the drop marks and the source losses marked at
// or before queue position pos and, with done, the items completed in an
// earlier run marked there too (consumer only). Overflowed drops are
// folded into the first mark returned, or returned on their own, flagged
// approximate.
func (b *binding) takeMarks(pos int64, out *marks, done bool) {
	if !b.hasMarks.Load() && (!done || !b.hasDone.Load()) {
		return
	}
	b.marksMu.Lock()
	defer b.marksMu.Unlock()
	i := 0
	for ; i < len(b.marks) && b.marks[i].pos <= pos; i++ {
		m := b.marks[i]
		out.drops = append(out.drops, Drop{Feed: b.feed.name, Group: b.group.name, Count: m.count, FirstSeq: m.firstSeq, LastSeq: m.lastSeq, Offset: m.offset, Reason: m.reason})
	}
	b.marks = append(b.marks[:0], b.marks[i:]...)
	// Drops past the pending marks are folded into the first entry reported
	// after them, or, when no mark is pending at all, reported on their own.
	if o := b.overflow; o.count > 0 && (i > 0 || len(b.marks) == 0) {
		b.overflow = dropMark{}
		if i > 0 {
			d := &out.drops[len(out.drops)-i]
			d.Count += o.count
			d.LastSeq = max(d.LastSeq, o.lastSeq)
			d.Reason += " (plus drops while the drop marks were full)"
			d.Approximate = true
		} else {
			out.drops = append(out.drops, Drop{Feed: b.feed.name, Group: b.group.name, Count: o.count, FirstSeq: o.firstSeq, LastSeq: o.lastSeq, Offset: o.offset, Reason: o.reason + " (position approximate)", Approximate: true})
		}
	}
	j := 0
	for ; j < len(b.losses) && b.losses[j].pos <= pos; j++ {
		m := b.losses[j]
		out.lost = append(out.lost, SourceLoss{Feed: b.feed.name, Group: b.group.name, Seq: m.seq, Loss: m.loss})
	}
	b.losses = append(b.losses[:0], b.losses[j:]...)
	k := 0
	for ; done && k < len(b.done) && b.done[k].pos <= pos; k++ {
		m := b.done[k]
		out.done = append(out.done, Completed{Feed: b.feed.name, Group: b.group.name, First: m.first, Last: m.last})
	}
	b.done = append(b.done[:0], b.done[k:]...)
	b.hasMarks.Store(len(b.marks) > 0 || len(b.losses) > 0)
	b.hasDone.Store(len(b.done) > 0)
}

// AckPoint is how far the source may consider this queue's items processed:
// its dispatched count, or less while a processing checkpoint holds it.
func (b *binding) AckPoint() int64 {
	d := b.dispatched.Load()
	if h := b.hold.Load(); h != nil {
		if v := h.durable.Load(); v < d {
			return v
		}
	}
	return d
}

func (b *binding) fenced() bool { return b.group.fenced.Load() || b.group.dead.Load() }
