package outbox

import (
	"github.com/blackbox-audit/blackbox/store"
)

// effect is an OUTPUT row as the outbox knows it: where the recording
// holds it, what makes it deliverable (its class: its input's feed and
// key, or free), its input's place (seq, epoch, offset) and the output.
type effect struct {
	run       int    // the run's index among the marks' (recovery)
	recording string // its recording's name in a free effect's key (recordingName)
	stream    string
	row       int64
	class
	seq     int64
	epoch   int64
	offset  int64
	k       int64
	sink    string
	payload []byte
	timer   bool // a timer's output: keyed by its row (effect), not by a position
	// checked: payload is known to be one line of JSON (Run.CompactJSON:
	// the recorder's JSON codec wrote it in this run); never for an
	// output read back from a recording.
	checked bool
}

// item is an input or timer row and its OUTPUT rows, whole: as many as
// its n says.
type item struct {
	class
	seq, epoch, offset int64
	n                  int64
	effects            []effect
	// timer: a TIMER row's outputs. A timer fires in a cycle of its own,
	// after the cycle that set it; it takes the place of the stream's
	// last positioned input before it (its class, seq and position), so
	// that its outputs wait for that input's commit and are suppressed
	// with it: a restart that reads that input again sets the timer
	// again (an After(0) timer fires before the next input), and its
	// second firing delivers nothing. A timer before any positioned input
	// is free.
	timer bool
}

// free makes it an item whose outputs wait for no commit: its feed's
// source commits nothing.
func (it *item) free() {
	it.class = class{Free: true}
	for i := range it.effects {
		it.effects[i].class = it.class
	}
}

// key is the item's position as suppression knows it.
func (it *item) key() posKey { return posKey{Feed: it.Feed, Key: it.Key, Epoch: it.epoch} }

// cursor follows one stream's rows: the DELIVERY row just read and the
// item whose OUTPUT rows follow.
type cursor struct {
	d    delivery // the last DELIVERY row's, Kind "" once used
	it   *item    // nil between items
	last item     // the last positioned input's class, seq and position (Free: none yet)
}

// delivery is what the parser keeps of a DELIVERY row: the fields an
// item's place needs (copying the whole row, its pointers under the
// garbage collector's write barrier, took 40% of the parser's time).
type delivery struct {
	kind               store.Kind
	source, key        string
	seq, epoch, offset int64
}

// parser turns the rows of a recording, in storage order, into whole
// items. The recorder writes an item's rows together ([DELIVERY] INDEXED
// or INLINE, then its n OUTPUT rows; TIMER and its n OUTPUT rows), so an
// item is whole once its n OUTPUT rows are read; one a crash cut is never
// yielded. The live outbox and its recovery read rows through the same
// parser, so that both see the same effects in the same order. Not safe
// for concurrent use.
type parser struct {
	streams map[string]*cursor
	copy    bool // copy payloads (the rows' buffers are reused; Run.CompactJSON: they are not)
	// The items and their effects are cut from chunks (slabChunk of
	// each): two allocations for many items rather than two an item. A
	// chunk lives while one of its items does.
	items   []item
	effects []effect
}

// slabChunk is how many items, and effects, a chunk holds; slabMost the
// most effects an item's first slice takes from one (its n is a
// recording's: an item of more grows its own).
const (
	slabChunk = 256
	slabMost  = 64
)

// newItem is a new item, zero.
func (p *parser) newItem() *item {
	if len(p.items) == cap(p.items) {
		p.items = make([]item, 0, slabChunk)
	}
	p.items = p.items[:len(p.items)+1]
	return &p.items[len(p.items)-1]
}

// newEffects is an empty slice for n effects (at most slabMost), its
// capacity its own.
func (p *parser) newEffects(n int64) []effect {
	k := int(min(n, slabMost))
	if cap(p.effects)-len(p.effects) < k {
		p.effects = make([]effect, 0, slabChunk)
	}
	at := len(p.effects)
	p.effects = p.effects[:at+k]
	return p.effects[at : at : at+k]
}

func newParser(copyPayloads bool) *parser {
	return &parser{streams: map[string]*cursor{}, copy: copyPayloads}
}

// row reads e; it returns the item e completes, nil if none.
func (p *parser) row(e *store.Entry) *item {
	if e.Processor == "" {
		return nil
	}
	c := p.streams[e.Processor]
	if c == nil {
		c = &cursor{}
		p.streams[e.Processor] = c
	}
	switch e.Kind {
	case store.KindDelivery:
		c.d = delivery{kind: e.Kind, source: e.Source, key: e.Key, seq: e.Seq, epoch: e.Epoch, offset: e.Offset}
		c.it = nil
		return nil
	case store.KindIndexed, store.KindInline:
		it := p.newItem()
		*it = item{class: class{Free: true}, seq: e.Seq, n: e.N}
		if c.d.kind == store.KindDelivery && c.d.source == e.Source && c.d.seq == e.Seq {
			it.class = class{Feed: e.Source, Key: c.d.key}
			it.epoch, it.offset = c.d.epoch, c.d.offset
			c.last = item{class: it.class, seq: it.seq, epoch: it.epoch, offset: it.offset}
		}
		c.d.kind = ""
		return c.begin(it)
	case store.KindTimer:
		c.d.kind = ""
		it := p.newItem()
		*it = item{class: class{Free: true}, n: e.N, timer: true}
		if !c.last.Free && c.last.Feed != "" {
			it.class, it.seq, it.epoch, it.offset = c.last.class, c.last.seq, c.last.epoch, c.last.offset
		}
		return c.begin(it)
	case store.KindOutput:
		it := c.it
		if it == nil || int64(len(it.effects)) >= it.n {
			c.it = nil
			return nil // an orphan: verify reports it; nothing to deliver
		}
		payload := e.Payload
		if p.copy {
			payload = append([]byte(nil), payload...)
		}
		if it.effects == nil {
			it.effects = p.newEffects(it.n)
		}
		it.effects = append(it.effects, effect{stream: e.Processor, row: e.Index, class: it.class, seq: it.seq,
			epoch: it.epoch, offset: it.offset, k: e.Seq, sink: e.Source, payload: payload, timer: it.timer})
		if int64(len(it.effects)) == it.n {
			c.it = nil
			return it
		}
		return nil
	}
	c.it, c.d.kind = nil, ""
	return nil
}

// begin starts it; an item without outputs is whole at once.
func (c *cursor) begin(it *item) *item {
	if it.n <= 0 {
		c.it = nil
		return it
	}
	c.it = it
	return nil
}
