package store

import (
	"fmt"
	"slices"
	"sort"

	"github.com/blackbox-audit/blackbox/core"
)

// The missing-input rule (docs/FORMAT.md): what a Checker keeps of the seqs
// each processor handled, per feed, and the problems it finds at the end.

// coverage is what the missing-input rule keeps: per feed its last COMMIT
// row and the highest seq published, per feed and processor (workers
// merged) the seqs handled, as intervals.
type coverage struct {
	feeds   map[string]*feedCover
	handled map[feedProc]*intervals
	order   []feedProc // the pairs in the order they were first met
	// unprocessed: per feed and processor (workers merged) the seqs its
	// END rows say a clean stop left unprocessed (store.Unprocessed).
	unprocessed map[feedProc]*intervals
}

type feedCover struct {
	commit    int64  // the seq of the last COMMIT row; 0 for none
	commitRef rowRef // that row
	published int64  // the highest seq of an input or JOURNAL row
}

type feedProc struct{ feed, proc string }

func (v *coverage) feed(name string) *feedCover {
	if v.feeds == nil {
		v.feeds = map[string]*feedCover{}
	}
	f := v.feeds[name]
	if f == nil {
		f = &feedCover{}
		v.feeds[name] = f
	}
	return f
}

// takes records that processor stream takes feed, and returns the seqs it
// handled so far.
func (v *coverage) takes(feed, stream string) *intervals {
	k := feedProc{feed, core.BaseStream(stream)}
	if v.handled == nil {
		v.handled = map[feedProc]*intervals{}
	}
	iv := v.handled[k]
	if iv == nil {
		iv = &intervals{}
		v.handled[k] = iv
		v.order = append(v.order, k)
	}
	return iv
}

// cover keeps what the coverage rules need of a stream row (see Checker):
// the seqs of a feed it handled, the feeds it takes, its first FAILED row.
func (c *Checker) cover(s *stream, e Entry, ref rowRef) {
	switch e.Kind {
	case KindIndexed, KindInline:
		if s.covSeqs == nil || s.covFeed != e.Source {
			s.covFeed, s.covSeqs, s.cover = e.Source, c.cov.takes(e.Source, s.name), c.cov.feed(e.Source)
		}
		s.covSeqs.add(e.Seq)
		s.cover.published = max(s.cover.published, e.Seq)
	case KindDropped:
		if e.N >= 1 && e.Seq <= maxInt64-(e.N-1) {
			c.cov.takes(e.Source, s.name).addRange(e.Seq, e.Seq+e.N-1)
		}
	case KindLost:
		c.cov.takes(e.Source, s.name)
	case KindCompleted:
		if _, err := CompletedOf(e); err != nil {
			c.problem(ProblemMalformed, ref, "%v", err)
			s.damaged = true
			return
		}
		c.cov.takes(e.Source, s.name).addRange(e.Seq, e.Seq+e.N-1)
	case KindFailed:
		if e.Source != "" {
			c.cov.takes(e.Source, s.name).add(e.Seq)
		}
		if !s.failed {
			s.failed = true
			c.problem(ProblemFailed, ref, "a recorded failure: the stream is not reproducible past it (%s)", failedWhat(e))
		}
	}
}

// failedWhat names what a FAILED row says failed.
func failedWhat(e Entry) string {
	if e.Source == "" {
		return fmt.Sprintf("timer %d", e.Seq)
	}
	return fmt.Sprintf("feed %q seq %d", e.Source, e.Seq)
}

// endDetail keeps the seqs an END row says the stop left unprocessed.
func (c *Checker) endDetail(s *stream, e Entry, ref rowRef) {
	us, err := UnprocessedOf(e)
	if err != nil {
		c.problem(ProblemMalformed, ref, "%v", err)
		return
	}
	for _, u := range us {
		k := feedProc{u.Feed, core.BaseStream(s.name)}
		if c.cov.unprocessed == nil {
			c.cov.unprocessed = map[feedProc]*intervals{}
		}
		iv := c.cov.unprocessed[k]
		if iv == nil {
			iv = &intervals{}
			c.cov.unprocessed[k] = iv
		}
		iv.addRange(u.First, u.Last)
	}
}

// uncovered reports the missing-input problems (see Checker): per feed and
// processor, the seqs up to the last COMMIT row's (and, in a recording that
// ended, up to the highest published) without an input, DROPPED or FAILED
// row.
func (c *Checker) uncovered() {
	ended := !c.torn && len(c.order) > 0
	damaged := map[string]bool{} // a processor with a row that cannot be read: what it handled is unknown
	for _, name := range c.order {
		s := c.streams[name]
		ended = ended && s.ended
		if s.damaged {
			damaged[core.BaseStream(name)] = true
		}
	}
	for _, k := range c.cov.order {
		f := c.cov.feeds[k.feed]
		if f == nil || damaged[k.proc] {
			continue
		}
		through := f.commit
		if ended {
			through = max(through, f.published)
		}
		if through <= 0 {
			continue
		}
		gaps := c.cov.handled[k].gaps(through)
		if un := c.cov.unprocessed[k]; un != nil {
			// Seqs an END row says were left unprocessed need no row,
			// unless a COMMIT row covers them (the source said they were
			// handled).
			var past intervals
			for _, u := range un.iv {
				if u.hi > f.commit {
					past.addRange(max(u.lo, f.commit+1), u.hi)
				}
			}
			all := intervals{iv: gaps}
			gaps = all.minus(&past)
		}
		for _, g := range gaps {
			p := Problem{Kind: ProblemMissingInput, Processor: k.proc, Row: KindEnd, Line: c.lastEnd.line, Feed: k.feed, First: g.lo, Last: g.hi}
			seqs := fmt.Sprintf("seq %d", g.lo)
			if g.hi > g.lo {
				seqs = fmt.Sprintf("seqs %d-%d", g.lo, g.hi)
			}
			why := fmt.Sprintf("the recording ended cleanly after seq %d of the feed was published", f.published)
			if g.lo <= f.commit {
				p.Row, p.Line = KindCommit, f.commitRef.line
				why = fmt.Sprintf("the source committed through seq %d (COMMIT index %d)", f.commit, f.commitRef.index)
			}
			p.Detail = fmt.Sprintf("%s of feed %q have no input, DROPPED or FAILED row in processor %q, and %s", seqs, k.feed, k.proc, why)
			c.report(p)
		}
	}
}

// intervals is a set of int64 kept as sorted disjoint closed intervals.
type intervals struct{ iv []span }

type span struct{ lo, hi int64 }

func (s *intervals) contains(x int64) bool {
	i := sort.Search(len(s.iv), func(i int) bool { return s.iv[i].hi >= x })
	return i < len(s.iv) && s.iv[i].lo <= x
}

func (s *intervals) add(x int64) {
	// Fast path: increasing seqs extend the last interval.
	if n := len(s.iv); n > 0 {
		last := &s.iv[n-1]
		if x >= last.lo && x <= last.hi {
			return
		}
		if x == last.hi+1 && x > last.hi {
			last.hi = x
			return
		}
	}
	if s.contains(x) {
		return
	}
	i := sort.Search(len(s.iv), func(i int) bool { return s.iv[i].lo > x })
	// s.iv[i-1].lo <= x (if any), s.iv[i].lo > x.
	joinLeft := i > 0 && s.iv[i-1].hi != maxInt64 && s.iv[i-1].hi+1 == x
	joinRight := i < len(s.iv) && x != maxInt64 && s.iv[i].lo == x+1
	switch {
	case joinLeft && joinRight:
		s.iv[i-1].hi = s.iv[i].hi
		s.iv = slices.Delete(s.iv, i, i+1)
	case joinLeft:
		s.iv[i-1].hi = x
	case joinRight:
		s.iv[i].lo = x
	default:
		s.iv = slices.Insert(s.iv, i, span{x, x})
	}
}

// addRange adds lo..hi (lo <= hi).
func (s *intervals) addRange(lo, hi int64) {
	if n := len(s.iv); n == 0 || lo > s.iv[n-1].hi {
		if n > 0 && s.iv[n-1].hi != maxInt64 && lo == s.iv[n-1].hi+1 {
			s.iv[n-1].hi = hi
		} else {
			s.iv = append(s.iv, span{lo, hi})
		}
		return
	}
	// The spans that touch or overlap lo..hi are merged with it.
	i := sort.Search(len(s.iv), func(i int) bool { return s.iv[i].hi >= lo-1 || s.iv[i].hi == maxInt64 })
	j := i
	for j < len(s.iv) && (s.iv[j].lo <= hi || hi != maxInt64 && s.iv[j].lo == hi+1) {
		lo, hi = min(lo, s.iv[j].lo), max(hi, s.iv[j].hi)
		j++
	}
	s.iv = slices.Replace(s.iv, i, j, span{lo, hi})
}

// gaps returns the spans of 1..through not in s.
func (s *intervals) gaps(through int64) []span {
	all := intervals{iv: []span{{1, through}}}
	return all.minus(s)
}

// minus returns the spans of s not in t (t may be nil).
func (s *intervals) minus(t *intervals) []span {
	var out []span
	for _, a := range s.iv {
		lo, covered := a.lo, false
		if t != nil {
			for _, b := range t.iv {
				if b.hi < lo || b.lo > a.hi {
					continue
				}
				if b.lo > lo {
					out = append(out, span{lo, b.lo - 1})
				}
				if b.hi >= a.hi {
					covered = true
					break
				}
				lo = b.hi + 1
			}
		}
		if !covered {
			out = append(out, span{lo, a.hi})
		}
	}
	return out
}
