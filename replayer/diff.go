package replayer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// DefaultDiffLimit is how many inputs a ProcessorDiff lists at most in each
// of its lists when DiffOptions.Limit is 0. The counts are always exact.
const DefaultDiffLimit = 1000

// DiffOptions configure Diff. Diff only reads them.
type DiffOptions struct {
	// Codec decodes the OUTPUT payloads of both sides. Default recorder.JSON.
	Codec recorder.Codec
	// Ignore lists JSON object keys left out when outputs are compared, at
	// any depth of the decoded value: for example "at", the clock reading
	// the built-in apps put in their outputs, which two independent runs
	// reading a system clock never share. Want and Got still show the
	// outputs whole.
	Ignore []string
	// Limit bounds each list of a ProcessorDiff (OnlyA, OnlyB, Different,
	// Twice, DuplicateOutputs); 0 means DefaultDiffLimit, negative no limit.
	Limit int
}

// DiffReport is the result of Diff. Same: every input present on both
// sides has the same outputs, and no input is missing from either side.
// Inputs processed twice, and re-deliveries that emitted the same outputs
// again (DuplicateOutputs), do not make the sides differ. A DiffReport is a
// plain value, safe to read from several goroutines once returned.
type DiffReport struct {
	Same       bool            `json:"same"`
	Processors []ProcessorDiff `json:"processors"`
	// Problems are the integrity problems of the recordings of both sides
	// (each names its file): a killed run's missing END is expected here.
	Problems []store.Problem `json:"problems"`
}

// ProcessorDiff is the comparison of one processor's inputs on both sides.
// The lists hold at most DiffOptions.Limit inputs each, in stream order;
// Counts are exact (Twice and DuplicateOutputs list one ref per side that
// had the input more than once). A plain value, safe to read concurrently.
type ProcessorDiff struct {
	Processor string `json:"processor"`
	InputsA   int64  `json:"inputsA"` // inputs (deliveries) read on side A
	InputsB   int64  `json:"inputsB"`
	Common    int64  `json:"common"` // distinct inputs present on both sides
	// OnlyA and OnlyB are inputs present on one side only.
	OnlyA []InputRef `json:"onlyA"`
	OnlyB []InputRef `json:"onlyB"`
	// Different are inputs on both sides whose outputs differ.
	Different []InputDiff `json:"different"`
	// Twice are inputs delivered more than once on one side (a crashed run
	// and its restart: "processed twice, once per run") whose outputs, all
	// deliveries together, equal the other side's. The ref is the second
	// delivery's; Side names the side.
	Twice []InputRef `json:"twice"`
	// DuplicateOutputs are the inputs of Twice whose re-delivery emitted
	// the same outputs again (a processor that does not skip re-deliveries):
	// a sink that does not de-duplicate received them twice.
	DuplicateOutputs []InputRef `json:"duplicateOutputs"`
	// EpochChanges are the places where a side's epoch of a feed changed
	// part-way (the input was replaced or reset): inputs after it are
	// aligned as the next epoch segment.
	EpochChanges []string   `json:"epochChanges"`
	Counts       DiffCounts `json:"counts"`
}

// DiffCounts are the exact sizes of a ProcessorDiff's lists (inputs, not
// refs). A plain value.
type DiffCounts struct {
	OnlyA            int64 `json:"onlyA"`
	OnlyB            int64 `json:"onlyB"`
	Different        int64 `json:"different"`
	Twice            int64 `json:"twice"`
	DuplicateOutputs int64 `json:"duplicateOutputs"`
}

// InputRef names an input of a side. Feed, Key and Offset are its source
// identity when it was delivered with a position; an input without one is
// named by Feed and Seq (Offset 0); a timer by Key "timer", Offset its
// ordinal among the side's timers and Seq its number. Run is the 1-based
// position, in its side's list, of the recording that holds it; Seq is that
// run's sequence. A plain value.
type InputRef struct {
	Side   string `json:"side,omitempty"` // "A" or "B", in Twice and DuplicateOutputs
	Feed   string `json:"feed"`
	Key    string `json:"key"`
	Offset int64  `json:"offset"`
	Epoch  int64  `json:"epoch"`
	Seq    int64  `json:"seq"`
	Run    int    `json:"run"`
	Input  string `json:"input"` // the input's payload text
}

// InputDiff is an input whose outputs differ: Want are side A's, Got side
// B's ("sink: payload", all its deliveries together), Diff a readable diff
// (-want +got) of the decoded outputs. A plain value.
type InputDiff struct {
	InputRef
	Want []string `json:"want"`
	Got  []string `json:"got"`
	Diff string   `json:"diff"`
}

// Diff compares two runs, a and b, processor by processor. Each side is one
// recording or several recordings of consecutive runs stitched in order (a
// crashed run and its restarts; a killed run's missing END is expected).
//
// Inputs are aligned by source identity, (feed, key, offset), where a
// DELIVERY row gives one, otherwise by (feed, seq), the seqs of a later run
// of a side counted on from the last seq of the run before. Epochs differ
// between independent runs, so they take no part in the match; a side
// whose epoch of a feed changes part-way is aligned per epoch segment (the
// k-th epoch of a feed on one side with the k-th on the other) and the
// change is listed in EpochChanges. TIMER inputs are aligned by their
// ordinal among the side's timers. FAILED and DROPPED rows take no part.
//
// An input delivered more than once on one side is compared by the outputs
// of all its deliveries together: a re-delivery the processor skipped (no
// outputs) agrees, and one that emitted the same outputs again agrees and is
// listed in DuplicateOutputs; either way the input is listed in Twice.
// Outputs are compared after decoding with the codec, leaving out the keys
// of DiffOptions.Ignore.
//
// Memory: Diff reads each side as a stream, processor by processor, and
// holds for the processor being compared one index entry per distinct
// input of both sides (its identity, its deliveries and a 64-bit hash of
// their outputs: about 200 bytes, up to 300 while the map grows; so about
// 300 MB for a processor of a million inputs), plus the inputs it lists (at
// most Limit per list, with their outputs). It does not grow with the
// number of processors or with the size of outputs. It reads each side
// twice when it lists inputs (once to index, once to fetch the listed
// inputs' payloads and outputs).
//
// The error is for I/O problems and a cancelled ctx.
func Diff(ctx context.Context, a, b []store.Reader, opts DiffOptions) (*DiffReport, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("%w: diff needs at least one recording on each side", ErrUsage)
	}
	d := &differ{ctx: ctx, codec: opts.Codec, limit: opts.Limit, seed: maphash.MakeSeed()}
	if d.codec == nil {
		d.codec = recorder.JSON
	}
	if d.limit == 0 {
		d.limit = DefaultDiffLimit
	}
	if len(opts.Ignore) > 0 {
		d.ignore = map[string]bool{}
		for _, k := range opts.Ignore {
			d.ignore[k] = true
		}
	}
	rep := &DiffReport{Same: true, Processors: []ProcessorDiff{}, Problems: []store.Problem{}}
	var procs []string
	seen := map[string]bool{}
	for _, side := range [][]store.Reader{a, b} {
		for _, r := range side {
			if r == nil {
				return nil, fmt.Errorf("%w: nil reader", ErrUsage)
			}
			rep.Problems = append(rep.Problems, r.Problems()...)
			for _, p := range r.Processors() {
				if !seen[p] {
					seen[p] = true
					procs = append(procs, p)
				}
			}
		}
	}
	for _, p := range procs {
		pd, err := d.processor(p, a, b)
		if err != nil {
			return nil, err
		}
		if pd.Counts.OnlyA+pd.Counts.OnlyB+pd.Counts.Different > 0 {
			rep.Same = false
		}
		rep.Processors = append(rep.Processors, *pd)
	}
	return rep, nil
}

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

// sideAgg is what one side did with an input: its deliveries and a hash of
// their outputs.
type sideAgg struct {
	n, nonEmpty int32
	run, rerun  int32  // runs of the first and second delivery
	first       uint64 // hash of the first delivery with outputs
	concat      uint64 // hash of every delivery's outputs, in order
	ord         int64  // the side's ordinal of the input's first delivery
	seq, epoch  int64  // the first delivery's
	reseq       int64  // the second delivery's
	mixed       bool   // deliveries with outputs differ
}

const hashInit = 14695981039346656037

func mix(h, x uint64) uint64 { return (h ^ x) * 1099511628211 }

func (s *sideAgg) effective() uint64 {
	switch {
	case s.nonEmpty == 0:
		return 0
	case s.mixed:
		return s.concat
	}
	return s.first
}

type agg struct{ a, b sideAgg }

// delivery is one input read from a side's stream.
type delivery struct {
	key     ikey
	run     int
	seq     int64
	epoch   int64
	index   int64
	kind    store.Kind
	src     string
	payload []byte // an INLINE input's payload
	outs    []output
}

// walk reads a side's streams of processor p in order and calls f for each
// input with its outputs. epochs receives each epoch change.
func (d *differ) walk(side string, rs []store.Reader, p string, f func(*delivery), epochs func(string)) error {
	type feedState struct {
		epoch   int64
		seg     int32
		seen    bool
		base    int64 // seq base of unpositioned inputs in this run
		maxSeq  int64
		nextRun int64
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
	var timers int64
	var cur delivery
	open := false
	var rows int64
	for run, r := range rs {
		for _, s := range feeds {
			s.base += s.maxSeq
			s.maxSeq = 0
		}
		var del store.Entry
		hasDel := false
		flush := func() {
			if open {
				f(&cur)
				open = false
			}
		}
		for e, err := range r.Stream(p) {
			if rows++; rows%ctxEvery == 0 {
				if err := d.ctx.Err(); err != nil {
					return fmt.Errorf("replayer: diff: %w", err)
				}
			}
			if err != nil {
				var pb *store.Problem
				if errors.As(err, &pb) {
					flush()
					hasDel = false
					continue // an unreadable row: listed in Problems
				}
				return fmt.Errorf("replayer: diff: reading processor %q of side %s run %d: %w", p, side, run+1, err)
			}
			if e.Kind == store.KindOutput {
				if open {
					cur.outs = appendOutput(cur.outs, e.Source, e.Payload)
				}
				continue
			}
			flush()
			switch e.Kind {
			case store.KindDelivery:
				del, hasDel = e, true
				continue
			case store.KindIndexed, store.KindInline:
				cur = delivery{run: run + 1, seq: e.Seq, index: e.Index, kind: e.Kind, src: e.Source, outs: cur.outs[:0],
					payload: append(cur.payload[:0], e.Payload...)}
				st := fs(e.Source)
				if hasDel && del.Source == e.Source && del.Seq == e.Seq {
					if st.seen && st.epoch != del.Epoch {
						st.seg++
						epochs(fmt.Sprintf("side %s run %d: feed %q epoch %d -> %d at seq %d (offset %d): later inputs are epoch segment %d",
							side, run+1, e.Source, st.epoch, del.Epoch, e.Seq, del.Offset, st.seg+1))
					}
					st.seen, st.epoch = true, del.Epoch
					cur.epoch = del.Epoch
					cur.key = ikey{feed: d.intern(e.Source), key: d.intern(del.Key), seg: st.seg, pos: true, offset: del.Offset}
				} else {
					st.maxSeq = max(st.maxSeq, e.Seq)
					cur.key = ikey{feed: d.intern(e.Source), key: d.intern(""), offset: st.base + e.Seq}
				}
				open = true
			case store.KindTimer:
				timers++
				cur = delivery{run: run + 1, seq: e.Seq, index: e.Index, kind: e.Kind, outs: cur.outs[:0], payload: cur.payload[:0],
					key: ikey{feed: d.intern(""), key: d.intern("timer"), timer: true, offset: timers}}
				open = true
			}
			hasDel = false
		}
		flush()
	}
	return nil
}

// hashOutputs hashes a delivery's outputs after decoding and canonical
// re-encoding.
func (d *differ) hashOutputs(outs []output) uint64 {
	h := uint64(hashInit)
	for _, o := range outs {
		h = mix(h, d.hashOutput(o))
	}
	return h
}

func (d *differ) hashOutput(o output) uint64 {
	var mh maphash.Hash
	mh.SetSeed(d.seed)
	mh.WriteString(o.sink)
	mh.WriteByte(0)
	v, err := d.codec.Decode(o.payload)
	if err != nil {
		mh.WriteByte(1)
		mh.Write(o.payload)
		return mh.Sum64()
	}
	d.canon.Reset()
	enc := json.NewEncoder(&d.canon)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(strip(v, d.ignore)); err != nil {
		mh.WriteByte(2)
		fmt.Fprintf(&mh, "%#v", v)
		return mh.Sum64()
	}
	mh.Write(d.canon.Bytes())
	return mh.Sum64()
}

// add counts a delivery whose outputs hash to h (xs: each output's hash).
func (s *sideAgg) add(dl *delivery, h uint64, xs []uint64, ord int64) {
	s.n++
	switch s.n {
	case 1:
		s.ord, s.run, s.seq, s.epoch = ord, int32(dl.run), dl.seq, dl.epoch
		s.concat = hashInit
	case 2:
		s.rerun, s.reseq = int32(dl.run), dl.seq
	}
	if len(xs) == 0 {
		return
	}
	s.nonEmpty++
	if s.nonEmpty == 1 {
		s.first = h
	} else if h != s.first {
		s.mixed = true
	}
	for _, x := range xs {
		s.concat = mix(s.concat, x)
	}
}

func (d *differ) processor(p string, a, b []store.Reader) (*ProcessorDiff, error) {
	pd := &ProcessorDiff{Processor: p, OnlyA: []InputRef{}, OnlyB: []InputRef{}, Different: []InputDiff{},
		Twice: []InputRef{}, DuplicateOutputs: []InputRef{}, EpochChanges: []string{}}
	idx := map[ikey]agg{}
	epochs := func(s string) { pd.EpochChanges = append(pd.EpochChanges, s) }
	var xs []uint64
	for _, side := range []struct {
		name string
		rs   []store.Reader
		n    *int64
		pick func(*agg) *sideAgg
	}{
		{"A", a, &pd.InputsA, func(g *agg) *sideAgg { return &g.a }},
		{"B", b, &pd.InputsB, func(g *agg) *sideAgg { return &g.b }},
	} {
		err := d.walk(side.name, side.rs, p, func(dl *delivery) {
			*side.n++
			g := idx[dl.key]
			xs = xs[:0]
			h := uint64(hashInit)
			for _, o := range dl.outs {
				x := d.hashOutput(o)
				xs = append(xs, x)
				h = mix(h, x)
			}
			side.pick(&g).add(dl, h, xs, *side.n)
			idx[dl.key] = g
		}, epochs)
		if err != nil {
			return nil, err
		}
	}

	// Classify, in stream order.
	type item struct {
		k   ikey
		g   *agg // set once the list is cut to its limit
		ord int64
	}
	var onlyA, onlyB, diff, twice, dup []item
	for k, g := range idx {
		switch {
		case g.b.n == 0:
			onlyA = append(onlyA, item{k, nil, g.a.ord})
		case g.a.n == 0:
			onlyB = append(onlyB, item{k, nil, g.b.ord})
		default:
			pd.Common++
			if g.a.effective() != g.b.effective() {
				diff = append(diff, item{k, nil, g.a.ord})
				continue
			}
			if g.a.n > 1 || g.b.n > 1 {
				twice = append(twice, item{k, nil, g.a.ord})
			}
			if (g.a.nonEmpty > 1 && !g.a.mixed) || (g.b.nonEmpty > 1 && !g.b.mixed) {
				dup = append(dup, item{k, nil, g.a.ord})
			}
		}
	}
	pd.Counts = DiffCounts{OnlyA: int64(len(onlyA)), OnlyB: int64(len(onlyB)), Different: int64(len(diff)),
		Twice: int64(len(twice)), DuplicateOutputs: int64(len(dup))}
	limit := func(items []item) []item {
		slices.SortFunc(items, func(x, y item) int { return cmp.Compare(x.ord, y.ord) })
		if d.limit > 0 && len(items) > d.limit {
			items = items[:d.limit]
		}
		for i := range items {
			g := idx[items[i].k]
			items[i].g = &g
		}
		return items
	}
	onlyA, onlyB, diff, twice, dup = limit(onlyA), limit(onlyB), limit(diff), limit(twice), limit(dup)
	if len(onlyA)+len(onlyB)+len(diff)+len(twice)+len(dup) == 0 {
		return pd, nil
	}

	// Second pass: the listed inputs' payloads and outputs.
	type detail struct {
		input      [2]string
		inputSet   [2]bool
		outs       [2][][]output // per side, each delivery's outputs
		runs, seqs [2][]int64
	}
	want := map[ikey]*detail{}
	for _, list := range [][]item{onlyA, onlyB, diff, twice, dup} {
		for _, it := range list {
			want[it.k] = &detail{}
		}
	}
	for si, rs := range [][]store.Reader{a, b} {
		err := d.walk("AB"[si:si+1], rs, p, func(dl *delivery) {
			dt := want[dl.key]
			if dt == nil {
				return
			}
			if !dt.inputSet[si] {
				dt.inputSet[si] = true
				dt.input[si] = d.inputText(rs[dl.run-1], dl)
			}
			outs := make([]output, len(dl.outs))
			for i, o := range dl.outs {
				outs[i] = output{sink: o.sink, payload: bytes.Clone(o.payload)}
			}
			dt.outs[si] = append(dt.outs[si], outs)
		}, func(string) {})
		if err != nil {
			return nil, err
		}
	}
	ref := func(it item, side int) InputRef {
		s := &it.g.a
		if side == 1 {
			s = &it.g.b
		}
		r := InputRef{Feed: d.names[it.k.feed], Key: d.names[it.k.key], Offset: it.k.offset, Epoch: s.epoch, Seq: s.seq, Run: int(s.run)}
		if !it.k.pos && !it.k.timer {
			r.Offset = 0
		}
		if dt := want[it.k]; dt != nil {
			r.Input = dt.input[side]
		}
		return r
	}
	// redelivered is the ref of the second delivery on the side that had
	// more than one.
	redelivered := func(it item, dupOnly bool) []InputRef {
		var out []InputRef
		for side, s := range []*sideAgg{&it.g.a, &it.g.b} {
			if s.n < 2 || (dupOnly && (s.nonEmpty < 2 || s.mixed)) {
				continue
			}
			r := ref(it, side)
			r.Side, r.Run, r.Seq = "AB"[side:side+1], int(s.rerun), s.reseq
			out = append(out, r)
		}
		return out
	}
	for _, it := range onlyA {
		pd.OnlyA = append(pd.OnlyA, ref(it, 0))
	}
	for _, it := range onlyB {
		pd.OnlyB = append(pd.OnlyB, ref(it, 1))
	}
	for _, it := range twice {
		pd.Twice = append(pd.Twice, redelivered(it, false)...)
	}
	for _, it := range dup {
		pd.DuplicateOutputs = append(pd.DuplicateOutputs, redelivered(it, true)...)
	}
	for _, it := range diff {
		dt := want[it.k]
		w, g := effectiveOutputs(dt.outs[0], it.g.a.mixed), effectiveOutputs(dt.outs[1], it.g.b.mixed)
		id := InputDiff{InputRef: ref(it, 0), Want: texts(w), Got: texts(g)}
		id.Diff = diffOutputs(decodeAll(d.codec, w, d.ignore), decodeAll(d.codec, g, d.ignore))
		if id.Diff == "" {
			id.Diff = "equal once decoded (the outputs hash differently: a codec that does not decode to comparable values?)"
		}
		pd.Different = append(pd.Different, id)
	}
	return pd, nil
}

// effectiveOutputs are a side's outputs of an input: those of its first
// delivery with outputs, or of every delivery in order when they differ.
func effectiveOutputs(ds [][]output, mixed bool) []output {
	var out []output
	for _, o := range ds {
		if len(o) == 0 {
			continue
		}
		if !mixed {
			return o
		}
		out = append(out, o...)
	}
	return out
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
