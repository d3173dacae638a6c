package incident

import (
	"cmp"
	"math"
	"slices"
)

// span is the seqs lo ... hi.
type span struct{ lo, hi int64 }

// spans is a set of seqs kept as spans, so that a DROPPED row of a billion
// items or a seq near the top of int64 costs one span, not a billion marks.
// Call merge after the last add and before has or gaps. Not safe for
// concurrent use.
type spans []span

// addRange adds the n seqs from seq (n >= 1; capped at the largest int64).
func (s *spans) addRange(seq, n int64) {
	hi := int64(math.MaxInt64)
	if n-1 <= math.MaxInt64-seq {
		hi = seq + n - 1
	}
	*s = append(*s, span{seq, hi})
}

// add adds seq, joining it to the last span when it follows it (seqs
// added in order cost one span).
func (s *spans) add(seq int64) {
	if n := len(*s); n > 0 && (*s)[n-1].hi < math.MaxInt64 && (*s)[n-1].hi+1 == seq {
		(*s)[n-1].hi = seq
		return
	}
	s.addRange(seq, 1)
}

// merge sorts the spans and joins those that overlap or touch.
func (s *spans) merge() {
	slices.SortFunc(*s, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	out := (*s)[:0]
	for _, x := range *s {
		if n := len(out); n > 0 && (x.lo <= out[n-1].hi || out[n-1].hi < math.MaxInt64 && x.lo == out[n-1].hi+1) {
			out[n-1].hi = max(out[n-1].hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	*s = out
}

// has reports whether seq is in the (merged) set.
func (s spans) has(seq int64) bool {
	i, _ := slices.BinarySearchFunc(s, seq, func(x span, v int64) int {
		switch {
		case x.hi < v:
			return -1
		case x.lo > v:
			return 1
		}
		return 0
	})
	return i < len(s) && s[i].lo <= seq && seq <= s[i].hi
}

// gaps returns the seqs of 1 ... through that are not in the (merged) set.
func (s spans) gaps(through int64) []span {
	var out []span
	next := int64(1)
	for _, x := range s {
		if next > through {
			break
		}
		if x.hi < next {
			continue
		}
		if x.lo > next {
			out = append(out, span{next, min(x.lo-1, through)})
		}
		if x.hi == math.MaxInt64 {
			return out
		}
		next = max(next, x.hi+1)
	}
	if next <= through {
		out = append(out, span{next, through})
	}
	return out
}
