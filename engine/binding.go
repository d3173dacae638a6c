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
