package replayer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"iter"

	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// differ is one Diff call. It is used by one goroutine.
type differ struct {
	ctx    context.Context
	codec  recorder.Codec
	ignore map[string]bool
	limit  int
	seed   maphash.Seed
	canon  bytes.Buffer
	names  []string // interned feed and key names
	ids    map[string]uint32
	// unreadable numbers the inputs whose payload could not be read.
	unreadable int64
	rows       int64 // rows read, for the checks of ctx
	// lost, when set, is told of each DROPPED and LOST row deliveries
	// reads (the first walk of a processor's side), in run lostRun.
	lost    func(run int, e *store.Entry)
	lostRun int
	// committed are the COMMIT rows of each side's runs (commits), and
	// concurrent DiffOptions.Concurrent.
	committed  [2][]committed
	concurrent [2]bool
}

// ikey is an input's identity on its side: 24 bytes, names interned.
type ikey struct {
	feed   uint32 // differ.names index
	key    uint32 // differ.names index
	seg    int32  // epoch segment of the feed on its side (0, 1, ...)
	pos    bool   // positioned: offset is a source offset; else a seq
	timer  bool
	offset int64
}

// intern returns the index of name in d.names.
func (d *differ) intern(name string) uint32 {
	if i, ok := d.ids[name]; ok {
		return i
	}
	if d.ids == nil {
		d.ids = map[string]uint32{}
	}
	i := uint32(len(d.names))
	d.names = append(d.names, name)
	d.ids[name] = i
	return i
}

// delivery is one input read from a side's stream, with its outputs.
type delivery struct {
	key     ikey
	run     int
	stream  string // the stream that holds it
	seq     int64
	epoch   int64
	kind    store.Kind
	src     string
	n       int64  // the OUTPUT rows its input row says it has
	cut     bool   // fewer OUTPUT rows than n: its outputs are not known
	payload []byte // an INLINE input's payload
	tord    int64  // a timer's ordinal among its side's timers of the processor (1, 2, ...)
	outs    []output
	del     store.Entry // the DELIVERY row before the input, when hasDel
	hasDel  bool
}

// deliveries reads stream s of r in order and yields each input with its
// outputs, or the error that ends the reading. The delivery yielded is
// reused: it is valid until the next is asked for.
func (d *differ) deliveries(r store.Reader, s string) iter.Seq2[*delivery, error] {
	return func(yield func(*delivery, error) bool) {
		var cur delivery
		open := false
		var del store.Entry
		hasDel := false
		flush := func() bool {
			if !open {
				return true
			}
			open = false
			cur.cut = int64(len(cur.outs)) < cur.n
			return yield(&cur, nil)
		}
		for e, err := range r.Stream(s) {
			if d.rows++; d.rows%ctxEvery == 0 {
				if err := d.ctx.Err(); err != nil {
					yield(nil, err)
					return
				}
			}
			if err != nil {
				var pb *store.Problem
				if errors.As(err, &pb) {
					if !flush() {
						return
					}
					hasDel = false
					continue // an unreadable row: listed in Problems
				}
				yield(nil, err)
				return
			}
			if e.Kind == store.KindOutput {
				if open {
					cur.outs = appendOutput(cur.outs, e.Source, e.Payload)
				}
				continue
			}
			if !flush() {
				return
			}
			if (e.Kind == store.KindDropped || e.Kind == store.KindLost) && d.lost != nil {
				d.lost(d.lostRun, &e)
			}
			switch e.Kind {
			case store.KindDelivery:
				del, hasDel = e, true
				continue
			case store.KindIndexed, store.KindInline, store.KindTimer:
				cur = delivery{seq: e.Seq, kind: e.Kind, src: e.Source, n: e.N, outs: cur.outs[:0], payload: append(cur.payload[:0], e.Payload...)}
				if e.Kind != store.KindTimer && hasDel && del.Source == e.Source && del.Seq == e.Seq {
					cur.del, cur.hasDel = del, true
				}
				open = true
			}
			hasDel = false
		}
		flush()
	}
}

// merged reads the streams ss of one run and calls f for each input, with
// the index in ss of its stream. One stream is read in its order. Several
// (a processor's own stream and its workers') are merged into the order
// of the feed: each stream's inputs stay in their order, and of the inputs
// at the heads of the streams a timer goes first, then the lowest seq (the
// feed's sequence, which a processor's inputs follow on every worker),
// then the first stream's.
func (d *differ) merged(r store.Reader, ss []string, f func(dl *delivery, stream int)) error {
	if len(ss) == 1 {
		for dl, err := range d.deliveries(r, ss[0]) {
			if err != nil {
				return fmt.Errorf("stream %q: %w", ss[0], err)
			}
			f(dl, 0)
		}
		return nil
	}
	type head struct {
		next func() (*delivery, error, bool)
		dl   *delivery // nil: the stream is read to its end
	}
	hs := make([]head, len(ss))
	advance := func(i int) error {
		dl, err, ok := hs[i].next()
		if err != nil {
			return fmt.Errorf("stream %q: %w", ss[i], err)
		}
		hs[i].dl = nil
		if ok {
			hs[i].dl = dl
		}
		return nil
	}
	for i, s := range ss {
		next, stop := iter.Pull2(d.deliveries(r, s))
		defer stop()
		hs[i].next = next
		if err := advance(i); err != nil {
			return err
		}
	}
	for {
		best := -1
		for i := range hs {
			dl := hs[i].dl
			if dl == nil {
				continue
			}
			if dl.kind == store.KindTimer {
				best = i
				break
			}
			if best < 0 || dl.seq < hs[best].dl.seq {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		f(hs[best].dl, best)
		if err := advance(best); err != nil {
			return err
		}
	}
}

// walk reads a side's streams of processor p in order (streams[r] are run
// r's, merged: see merged) and calls f for each input with its outputs.
// epochs receives each epoch change.
func (d *differ) walk(side string, rs []store.Reader, p string, streams [][]string, f func(*delivery), epochs func(string)) error {
	type feedState struct {
		epoch  int64
		seg    int32
		seen   bool
		base   int64 // seq base of unpositioned inputs in this run
		maxSeq int64
	}
	feeds := map[string]*feedState{}
	fs := func(name string) *feedState {
		s := feeds[name]
		if s == nil {
			s = &feedState{}
			feeds[name] = s
		}
		return s
	}
	// A timer is identified by its outputs, not by its stream nor its
	// number: the k-th timer of a side whose outputs hash to h (with
	// DiffOptions.Ignore left out), over every run and every worker's
	// stream. Timers are numbered per processor instance and fire when
	// their clock says, so neither a number nor a place in the merged
	// order matches across worker counts; what a timer emitted does. The
	// timers whose outputs no timer of the other side matches align, in
	// order, by content (alignByContent: timers all hash alike).
	timers := map[uint64]int64{}
	var ntimers int64
	for run, r := range rs {
		for _, s := range feeds {
			s.base += s.maxSeq
			s.maxSeq = 0
		}
		if len(streams[run]) == 0 {
			continue
		}
		d.lostRun = run + 1
		err := d.merged(r, streams[run], func(dl *delivery, si int) {
			dl.run, dl.stream = run+1, streams[run][si]
			switch {
			case dl.kind == store.KindTimer:
				h := uint64(hashInit)
				for _, o := range dl.outs {
					h = mix(h, d.hashOutput(o))
				}
				timers[h]++
				ntimers++
				dl.tord = ntimers
				dl.key = ikey{feed: d.intern(""), key: d.intern("timer"), timer: true, offset: int64(mix(h, uint64(timers[h])))}
			case dl.hasDel:
				// A position space is an epoch of a feed's key: a file's
				// epoch changes with a new file or a reset, a Kafka
				// partition's (key "topic/partition") with a topic
				// created again. Segments are counted per key: the
				// partitions of a topic interleave.
				st := fs(dl.src + "\x00" + dl.del.Key)
				if st.seen && st.epoch != dl.del.Epoch {
					st.seg++
					what := fmt.Sprintf("feed %q", dl.src)
					if dl.del.Key != "" {
						what += fmt.Sprintf(" key %q", dl.del.Key)
					}
					epochs(fmt.Sprintf("side %s run %d: %s epoch %d -> %d at seq %d (offset %d): later inputs are epoch segment %d",
						side, run+1, what, st.epoch, dl.del.Epoch, dl.seq, dl.del.Offset, st.seg+1))
				}
				st.seen, st.epoch = true, dl.del.Epoch
				dl.epoch = dl.del.Epoch
				dl.key = ikey{feed: d.intern(dl.src), key: d.intern(dl.del.Key), seg: st.seg, pos: true, offset: dl.del.Offset}
			default:
				st := fs(dl.src)
				st.maxSeq = max(st.maxSeq, dl.seq)
				dl.key = ikey{feed: d.intern(dl.src), key: d.intern(""), offset: st.base + dl.seq}
			}
			f(dl)
		})
		if err != nil {
			if cerr := d.ctx.Err(); cerr != nil && errors.Is(err, cerr) {
				return fmt.Errorf("replayer: diff: %w", cerr)
			}
			return fmt.Errorf("replayer: diff: reading processor %q of side %s run %d: %w", p, side, run+1, err)
		}
	}
	return nil
}

// inputText is the payload text of an input: the row's, or its journal
// row's for an INDEXED input; "timer N" for a timer.
func (d *differ) inputText(r store.Reader, dl *delivery) string {
	switch dl.kind {
	case store.KindTimer:
		return fmt.Sprintf("timer %d", dl.seq)
	case store.KindIndexed:
		j, err := r.Journal(dl.src, dl.seq)
		if err != nil {
			return fmt.Sprintf("(journal row of feed %q seq %d: %v)", dl.src, dl.seq, err)
		}
		return string(j.Payload)
	}
	return string(dl.payload)
}

// lostText is a DROPPED or LOST row of a side's run for a person: "side A
// run 1 ledger:5 LOST oversized: 1 item of feed ...".
func lostText(side string, run int, e *store.Entry) string {
	at := fmt.Sprintf("side %s run %d %s:%d %s", side, run, e.Processor, e.Index, e.Kind)
	if e.Kind == store.KindLost {
		return at + " " + store.LostOf(*e).String()
	}
	return fmt.Sprintf("%s: %s of feed %q from seq %d: %s", at, plural(e.N, "item"), e.Source, e.Seq, e.Detail)
}
