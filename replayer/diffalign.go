package replayer

import (
	"cmp"
	"math"
	"slices"
)

// sideKey is an input of one side: its identity and what the side did with
// it (g nil: no input).
type sideKey struct {
	k ikey
	g *sideAgg
}

// aligned is an input of A aligned with one of B; a.g or b.g is nil for an
// input only on the other side. changed: a changed input, the payloads
// differ.
type aligned struct {
	a, b    sideKey
	changed bool
}

// leftover is an input not aligned by position, in its side's stream order.
type leftover struct {
	sideKey
	chunk int32 // how many inputs of its lane before it were aligned by position
}

// lane is k without its place: inputs of one lane may align by content.
func lane(k ikey) ikey {
	k.offset = 0
	return k
}

// alignByContent aligns the inputs of one lane that positions did not
// align, la of A and lb of B in stream order, chunk by chunk: see Diff. It
// calls emit for each input (or pair), and note for a chunk left unaligned.
func alignByContent(la, lb []leftover, emit func(aligned), note func(na, nb int)) {
	for i, j := 0, 0; i < len(la) || j < len(lb); {
		c := int32(math.MaxInt32)
		if i < len(la) {
			c = la[i].chunk
		}
		if j < len(lb) {
			c = min(c, lb[j].chunk)
		}
		i2, j2 := i, j
		for i2 < len(la) && la[i2].chunk == c {
			i2++
		}
		for j2 < len(lb) && lb[j2].chunk == c {
			j2++
		}
		alignChunk(la[i:i2], lb[j:j2], emit, note)
		i, j = i2, j2
	}
}

// alignChunk aligns one chunk's inputs by their payloads' hashes: matches
// are aligned inputs, and between two matches the k-th removed input of A
// and the k-th inserted input of B are a changed input.
func alignChunk(la, lb []leftover, emit func(aligned), note func(na, nb int)) {
	var matches [][2]int
	if len(la) > 0 && len(lb) > 0 {
		ha, hb := make([]uint64, len(la)), make([]uint64, len(lb))
		for i := range la {
			ha[i] = la[i].g.in
		}
		for j := range lb {
			hb[j] = lb[j].g.in
		}
		var ok bool
		if matches, ok = lcsMatches(ha, hb, maxAlignEdits); !ok {
			note(len(la), len(lb))
			for _, x := range la {
				emit(aligned{a: x.sideKey})
			}
			for _, x := range lb {
				emit(aligned{b: x.sideKey})
			}
			return
		}
	}
	i, j := 0, 0
	for _, m := range append(matches, [2]int{len(la), len(lb)}) {
		removed, inserted := la[i:m[0]], lb[j:m[1]]
		n := min(len(removed), len(inserted))
		for k := range n {
			emit(aligned{a: removed[k].sideKey, b: inserted[k].sideKey, changed: true})
		}
		for _, x := range removed[n:] {
			emit(aligned{a: x.sideKey})
		}
		for _, x := range inserted[n:] {
			emit(aligned{b: x.sideKey})
		}
		if m[0] < len(la) {
			emit(aligned{a: la[m[0]].sideKey, b: lb[m[1]].sideKey})
		}
		i, j = m[0]+1, m[1]+1
	}
}

// byPosition reports whether input g is aligned by position: at the same
// place on both sides, with the same payload.
func byPosition(g *agg) bool { return g.a.n > 0 && g.b.n > 0 && g.a.in == g.b.in }

// leftovers walks each side's inputs of idx in stream order and collects,
// per lane, those positions do not align, each with its chunk: how many
// inputs of its lane before it were aligned by position.
func leftovers(idx map[ikey]*agg) map[ikey]*[2][]leftover {
	lanes := map[ikey]*[2][]leftover{}
	for si := range 2 {
		type ordKey struct {
			ord int64
			k   ikey
		}
		var order []ordKey
		for k, g := range idx {
			if s := g.side(si); s.n > 0 {
				order = append(order, ordKey{s.ord, k})
			}
		}
		slices.SortFunc(order, func(x, y ordKey) int { return cmp.Compare(x.ord, y.ord) })
		chunks := map[ikey]int32{}
		for _, o := range order {
			g, l := idx[o.k], lane(o.k)
			if byPosition(g) {
				chunks[l]++
				continue
			}
			ls := lanes[l]
			if ls == nil {
				ls = &[2][]leftover{}
				lanes[l] = ls
			}
			ls[si] = append(ls[si], leftover{sideKey{o.k, g.side(si)}, chunks[l]})
		}
	}
	return lanes
}
