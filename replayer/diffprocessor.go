package replayer

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/blackbox-audit/blackbox/store"
)

// processor compares processor l (its streams on sides a and b) input by
// input, in steps: index reads every input of both sides into one entry
// per distinct input; the inputs at the same place with the same payload
// are aligned by position, and leftovers collects, per lane, those left
// over, which alignByContent aligns; classes sorts each aligned input (or
// pair) into what Diff counts and lists; when an input is to be listed,
// details reads both sides again for the listed inputs' payloads and
// outputs, and a lister writes the lists, at most d.limit inputs each, in
// stream order. The counts are exact whatever the limit.
func (d *differ) processor(l *logical, a, b []store.Reader) (*ProcessorDiff, error) {
	sides := [2][]store.Reader{a, b}
	pd := newProcessorDiff(l)
	pd.OptionsA, pd.OptionsB = recordedOptions(a, l.streams[0]), recordedOptions(b, l.streams[1])
	idx, err := d.index(l, sides, pd)
	if err != nil {
		return nil, err
	}
	lanes := leftovers(idx)
	var cs classes
	for k, g := range idx {
		if byPosition(g) {
			cs.classify(aligned{a: sideKey{k, &g.a}, b: sideKey{k, &g.b}})
		}
	}
	for ln, ls := range lanes {
		alignByContent(ls[0], ls[1], cs.classify, func(na, nb int) {
			pd.Notes = append(pd.Notes, d.unalignedNote(ln, na, nb))
		})
	}
	slices.Sort(pd.Notes)
	pd.Common = cs.common
	lost := pd.Counts.Lost // counted by index
	pd.Counts = cs.counts()
	pd.Counts.Lost = lost
	if !cs.limit(d.limit) {
		return pd, nil
	}
	want, err := d.details(l, sides, &cs)
	if err != nil {
		return nil, err
	}
	lr := lister{d: d, p: l.name, want: want}
	lr.list(pd, &cs)
	return pd, nil
}

// recordedOptions are the options the first of a side's streams (streams[r]
// are run r's) was recorded with (store.Meta.AppOptions), nil when none was.
func recordedOptions(rs []store.Reader, streams [][]string) map[string]string {
	for r, rd := range rs {
		opts := rd.Meta().AppOptions
		for _, s := range streams[r] {
			if o, ok := opts[s]; ok {
				if o == nil {
					o = map[string]string{}
				}
				return o
			}
		}
	}
	return nil
}

// newProcessorDiff is the empty comparison of processor l: every list
// non-nil (JSON [] rather than null).
func newProcessorDiff(l *logical) *ProcessorDiff {
	return &ProcessorDiff{Processor: l.name, WorkersA: l.workers[0], WorkersB: l.workers[1], OnlyA: []InputRef{}, OnlyB: []InputRef{}, Different: []InputDiff{},
		Twice: []InputRef{}, DuplicateOutputs: []InputRef{}, Repeated: []InputRef{}, Cut: []InputRef{}, EpochChanges: []string{}, Notes: []string{},
		Lost: []string{}}
}

// index reads every input of processor l on both sides (the first pass)
// into one entry per distinct input, keyed by its identity: what each side
// did with it (sideAgg: its deliveries, hashes of its payload and
// outputs). It counts each side's deliveries in pd.InputsA and pd.InputsB
// (a delivery's ordinal on its side is that count), lists each side's
// DROPPED and LOST rows of the processor in pd.Lost (at most d.limit) and
// its epoch changes in pd.EpochChanges.
func (d *differ) index(l *logical, sides [2][]store.Reader, pd *ProcessorDiff) (map[ikey]*agg, error) {
	idx := map[ikey]*agg{}
	epochs := func(s string) { pd.EpochChanges = append(pd.EpochChanges, s) }
	var xs []uint64
	for si, rs := range sides {
		n := &pd.InputsA
		if si == 1 {
			n = &pd.InputsB
		}
		sr := &sideRuns{killed: killedRuns(rs, l.streams[si]), commits: d.committed[si], concurrent: d.concurrent[si]}
		d.lost = func(run int, e *store.Entry) {
			pd.Counts.Lost++
			if d.limit < 0 || len(pd.Lost) < d.limit {
				pd.Lost = append(pd.Lost, lostText("AB"[si:si+1], run, e))
			}
		}
		err := d.walk("AB"[si:si+1], rs, l.name, l.streams[si], func(dl *delivery) {
			*n++
			g := idx[dl.key]
			if g == nil {
				g = &agg{}
				idx[dl.key] = g
			}
			xs = xs[:0]
			h := uint64(hashInit)
			for _, o := range dl.outs {
				x := d.hashOutput(o)
				xs = append(xs, x)
				h = mix(h, x)
			}
			g.side(si).add(dl, d.inputHash(rs[dl.run-1], dl), h, xs, *n, sr)
		}, epochs)
		d.lost = nil
		if err != nil {
			return nil, err
		}
	}
	return idx, nil
}

// killedRuns says, for each run of a side (rs), whether its stream of the
// processor, or of one of its workers (streams[r] are run r's), is
// unfinished: a killed run, whose inputs the next run may deliver again.
func killedRuns(rs []store.Reader, streams [][]string) []bool {
	killed := make([]bool, len(rs))
	for r, rd := range rs {
		for _, pb := range rd.Problems() {
			if pb.Kind == store.ProblemUnfinished && (pb.Processor == "" || slices.Contains(streams[r], pb.Processor)) {
				killed[r] = true
			}
		}
	}
	return killed
}

// unalignedNote is the Note of a chunk of lane ln that content did not
// align (more than maxAlignEdits edits): na inputs of A and nb of B.
func (d *differ) unalignedNote(ln ikey, na, nb int) string {
	what := fmt.Sprintf("feed %q", d.names[ln.feed])
	if ln.timer {
		what = "timers"
	}
	return fmt.Sprintf("%s: %d inputs of A and %d of B between the same inputs aligned by position need more than %d edits to align by content: they are listed only in A and only in B",
		what, na, nb, maxAlignEdits)
}

// item is an aligned input (or pair) in a class, with the ordinal it is
// listed by: its side A's delivery's when it has one, else side B's (side
// 1).
type item struct {
	al   aligned
	ord  int64
	side int // the side of ord
}

// classes sorts the aligned inputs of one processor into what Diff counts
// and lists: an input is in at most one of onlyA, onlyB, diff, cut (once
// per side whose outputs of it are not known) and twice; dup holds inputs
// of twice, repeated inputs of any class but twice. It is used by one
// goroutine.
type classes struct {
	onlyA, onlyB, diff, twice, dup, repeated, cut []item
	common                                        int64 // ProcessorDiff.Common
}

// classify sorts al into its classes: one side only; changed or with
// other outputs (diff); outputs a side does not know (cut); delivered
// more often than its runs explain (repeated: with any of these); and,
// when none of these, delivered more than once (twice) with the same
// outputs again (dup).
func (c *classes) classify(al aligned) {
	it := item{al: al}
	if al.a.g != nil {
		it.ord = al.a.g.ord
	} else {
		it.ord, it.side = al.b.g.ord, 1
	}
	rep := (al.a.g != nil && al.a.g.reprun != 0) || (al.b.g != nil && al.b.g.reprun != 0)
	if rep {
		c.repeated = append(c.repeated, it)
	}
	switch {
	case al.b.g == nil:
		c.onlyA = append(c.onlyA, it)
	case al.a.g == nil:
		c.onlyB = append(c.onlyB, it)
	case al.changed:
		c.diff = append(c.diff, it)
	default:
		ga, gb := al.a.g, al.b.g
		c.common++
		switch {
		case ga.unknown() || gb.unknown():
			if ga.unknown() {
				c.cut = append(c.cut, it)
			}
			if gb.unknown() {
				c.cut = append(c.cut, item{al: al, ord: gb.ord, side: 1})
			}
		case ga.effective() != gb.effective():
			c.diff = append(c.diff, it)
		case rep:
		default:
			if ga.n > 1 || gb.n > 1 {
				c.twice = append(c.twice, it)
			}
			if (ga.nonEmpty > 1 && !ga.mixed) || (gb.nonEmpty > 1 && !gb.mixed) {
				c.dup = append(c.dup, it)
			}
		}
	}
}

// counts are the sizes of the classes (Lost, which index counts, is 0).
func (c *classes) counts() DiffCounts {
	var changed int64
	for _, it := range c.diff {
		if it.al.changed {
			changed++
		}
	}
	return DiffCounts{OnlyA: int64(len(c.onlyA)), OnlyB: int64(len(c.onlyB)), Different: int64(len(c.diff)), Changed: changed,
		Twice: int64(len(c.twice)), DuplicateOutputs: int64(len(c.dup)), Repeated: int64(len(c.repeated)), Cut: int64(len(c.cut))}
}

// lists are the classes, in the order Diff lists them.
func (c *classes) lists() [7]*[]item {
	return [7]*[]item{&c.onlyA, &c.onlyB, &c.diff, &c.twice, &c.dup, &c.repeated, &c.cut}
}

// limit sorts each class in stream order (by ordinal, side A's first) and
// keeps its first n inputs (n <= 0: all of them). It reports whether an
// input is left to list.
func (c *classes) limit(n int) bool {
	left := false
	for _, l := range c.lists() {
		slices.SortFunc(*l, func(x, y item) int { return cmp.Or(cmp.Compare(x.ord, y.ord), cmp.Compare(x.side, y.side)) })
		if n > 0 && len(*l) > n {
			*l = (*l)[:n]
		}
		left = left || len(*l) > 0
	}
	return left
}

// detail is what the second pass reads of a listed input on one side.
type detail struct {
	input    string
	inputSet bool
	outs     [][]output // each delivery's outputs
	streams  []string   // each delivery's stream
}

// details reads both sides of processor l again (the second pass) for
// each input the classes list: its payload's text, and each delivery's
// outputs (copied) and stream.
func (d *differ) details(l *logical, sides [2][]store.Reader, cs *classes) ([2]map[ikey]*detail, error) {
	want := [2]map[ikey]*detail{{}, {}}
	for _, list := range cs.lists() {
		for _, it := range *list {
			for si, sk := range [2]sideKey{it.al.a, it.al.b} {
				if sk.g != nil {
					want[si][sk.k] = &detail{}
				}
			}
		}
	}
	for si, rs := range sides {
		err := d.walk("AB"[si:si+1], rs, l.name, l.streams[si], func(dl *delivery) {
			dt := want[si][dl.key]
			if dt == nil {
				return
			}
			if !dt.inputSet {
				dt.inputSet = true
				dt.input = d.inputText(rs[dl.run-1], dl)
			}
			outs := make([]output, len(dl.outs))
			for i, o := range dl.outs {
				outs[i] = output{sink: o.sink, payload: bytes.Clone(o.payload)}
			}
			dt.outs = append(dt.outs, outs)
			dt.streams = append(dt.streams, dl.stream)
		}, func(string) {})
		if err != nil {
			return want, err
		}
	}
	return want, nil
}

// lister writes the listed inputs of processor p as InputRefs and
// InputDiffs, from the index and what the second pass read (want).
type lister struct {
	d    *differ
	p    string
	want [2]map[ikey]*detail
}

// list fills pd's lists from the classes, each in its order.
func (lr *lister) list(pd *ProcessorDiff, cs *classes) {
	second := func(s *sideAgg) (int32, int64, int32) { return s.rerun, s.reseq, 1 }
	for _, it := range cs.onlyA {
		pd.OnlyA = append(pd.OnlyA, lr.ref(0, it.al.a, 0))
	}
	for _, it := range cs.onlyB {
		pd.OnlyB = append(pd.OnlyB, lr.ref(1, it.al.b, 0))
	}
	for _, it := range cs.cut {
		sk := [2]sideKey{it.al.a, it.al.b}[it.side]
		r := lr.ref(it.side, sk, 0)
		r.Side = "AB"[it.side : it.side+1]
		pd.Cut = append(pd.Cut, r)
	}
	for _, it := range cs.twice {
		lr.again(it, &pd.Twice, func(s *sideAgg) bool { return s.n > 1 }, second)
	}
	for _, it := range cs.dup {
		lr.again(it, &pd.DuplicateOutputs, func(s *sideAgg) bool { return s.nonEmpty > 1 && !s.mixed }, second)
	}
	for _, it := range cs.repeated {
		lr.again(it, &pd.Repeated, func(s *sideAgg) bool { return s.reprun != 0 },
			func(s *sideAgg) (int32, int64, int32) { return s.reprun, s.repseq, s.repnth })
	}
	for _, it := range cs.diff {
		pd.Different = append(pd.Different, lr.inputDiff(it))
	}
}

// ref names the input sk of side si by its delivery number nth (0: the
// first).
func (lr *lister) ref(si int, sk sideKey, nth int) InputRef {
	d, s := lr.d, sk.g
	r := InputRef{Feed: d.names[sk.k.feed], Key: d.names[sk.k.key], Offset: sk.k.offset, Epoch: s.epoch, Seq: s.seq, Run: int(s.run)}
	if !sk.k.pos && !sk.k.timer {
		r.Offset = 0
	}
	if sk.k.timer {
		r.Feed, r.Offset = "", s.tord
	}
	if dt := lr.want[si][sk.k]; dt != nil {
		r.Input = dt.input
		if nth < len(dt.streams) && dt.streams[nth] != lr.p {
			r.Stream = dt.streams[nth]
		}
	}
	return r
}

// again appends to list the ref of the delivery that came again on each
// side of it that had one (ok): the second (Twice, DuplicateOutputs) or
// the first repeated without a kill to explain it (Repeated); run gives
// that delivery's run, seq and number.
func (lr *lister) again(it item, list *[]InputRef, ok func(*sideAgg) bool, run func(*sideAgg) (int32, int64, int32)) {
	for si, sk := range [2]sideKey{it.al.a, it.al.b} {
		if sk.g == nil || !ok(sk.g) {
			continue
		}
		rr, rs, nth := run(sk.g)
		r := lr.ref(si, sk, int(nth))
		r.Side, r.Run, r.Seq = "AB"[si:si+1], int(rr), rs
		*list = append(*list, r)
	}
}

// inputDiff is the listed difference of it, an input of both sides: each
// side's effective outputs and their diff once decoded.
func (lr *lister) inputDiff(it item) InputDiff {
	d, ga, gb := lr.d, it.al.a, it.al.b
	w, g := effectiveOutputs(lr.want[0][ga.k].outs, ga.g.mixed), effectiveOutputs(lr.want[1][gb.k].outs, gb.g.mixed)
	id := InputDiff{InputRef: lr.ref(0, ga, 0), Changed: it.al.changed, Want: texts(w), Got: texts(g)}
	rb := lr.ref(1, gb, 0)
	other := ga.k != gb.k
	if ga.k.timer { // timers are keyed by their outputs: another timer is another place
		other = rb.Offset != id.Offset || rb.Seq != id.Seq || rb.Run != id.Run
	}
	if it.al.changed || other || rb.Stream != "" {
		id.B = &rb // another input, or the worker that had it
	}
	id.Diff = diffOutputs(decodeAll(d.codec, w, d.ignore), decodeAll(d.codec, g, d.ignore))
	if id.Diff == "" && !id.Changed {
		id.Diff = "equal once decoded (the outputs hash differently: a codec that does not decode to comparable values?)"
	}
	return id
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
