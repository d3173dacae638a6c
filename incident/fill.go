package incident

import (
	"errors"

	"github.com/blackbox-audit/blackbox/store"
)

// rowKey names a row of one run.
type rowKey struct {
	processor string
	index     int64
}

// fill reads what the Findings show of the rows they name, which Explain
// does not keep while it reads: each reported input's line and time, and
// each duplicate's sink and payload (and whether the earlier output was the
// same). It reads each run that has such a row once more, then looks up the
// JOURNAL rows of the INDEXED inputs.
func fill(f *Findings, readers []store.Reader) {
	wants := make([]map[rowKey][]func(store.Entry), len(readers))
	want := func(r Ref, f func(store.Entry)) {
		if r.Run < 1 || r.Run > len(readers) {
			return
		}
		m := wants[r.Run-1]
		if m == nil {
			m = map[rowKey][]func(store.Entry){}
			wants[r.Run-1] = m
		}
		k := rowKey{r.Processor, r.Index}
		m[k] = append(m[k], f)
	}
	var journal []func() // after the pass: JOURNAL lookups of INDEXED inputs
	input := func(in *Input) {
		if in == nil {
			return
		}
		for _, r := range in.Rows {
			switch r.Kind {
			case store.KindInline, store.KindIndexed, store.KindJournal:
			default:
				continue
			}
			rd := readers[in.Run-1]
			want(r, func(e store.Entry) {
				switch e.Kind {
				case store.KindInline:
					in.Line, in.Time = string(e.Payload), e.Instant
				case store.KindJournal:
					in.Line = string(e.Payload)
				case store.KindIndexed:
					in.Time = e.Instant
					feed, seq := e.Source, e.Seq
					journal = append(journal, func() {
						if j, err := rd.Journal(feed, seq); err == nil {
							in.Line = string(j.Payload)
						}
					})
				}
			})
		}
	}
	type output struct {
		sink, payload string
		read          bool
	}
	type dupRead struct {
		dup            *Duplicate
		earlier, again output
	}
	var dups []*dupRead
	for i := range f.Answers {
		a := &f.Answers[i]
		for j := range a.Crashes {
			c := &a.Crashes[j]
			input(c.LastProcessed)
			input(c.MaybeInFlight)
			for k := range c.InFlight {
				input(&c.InFlight[k])
			}
		}
		for j := range a.Redelivered {
			input(&a.Redelivered[j].Earlier)
			input(&a.Redelivered[j].Again)
		}
		for j := range a.Duplicates {
			dr := &dupRead{dup: &a.Duplicates[j]}
			dups = append(dups, dr)
			want(dr.dup.Again, func(e store.Entry) { dr.again = output{e.Source, string(e.Payload), true} })
			if dr.dup.Earlier != nil {
				want(*dr.dup.Earlier, func(e store.Entry) { dr.earlier = output{e.Source, string(e.Payload), true} })
			}
		}
	}
	if od := f.OnDisk; od != nil {
		input(od.PointerInput)
		input(od.StateInput)
	}
	for i, m := range wants {
		if len(m) == 0 {
			continue
		}
		for e, err := range readers[i].Scan() {
			if err != nil {
				var p *store.Problem
				if errors.As(err, &p) {
					continue
				}
				break // the first pass reported it
			}
			for _, f := range m[rowKey{e.Processor, e.Index}] {
				f(e)
			}
		}
	}
	for _, f := range journal {
		f()
	}
	for _, dr := range dups {
		dr.dup.Sink, dr.dup.Payload = dr.again.sink, dr.again.payload
		dr.dup.Same = dr.dup.Earlier != nil && dr.earlier.read && dr.again.read &&
			dr.earlier.sink == dr.again.sink && dr.earlier.payload == dr.again.payload
	}
}
