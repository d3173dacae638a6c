package incident

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"

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
func fill(f *Findings, readers []store.Reader, ignore []string) {
	fl := &filler{readers: readers, wants: make([]map[rowKey][]func(store.Entry), len(readers))}
	dups := fl.wantAll(f)
	fl.read()
	for _, f := range fl.journal {
		f()
	}
	for _, dr := range dups {
		dr.dup.Sink, dr.dup.Payload = dr.again.sink, dr.again.payload
		dr.dup.Same = dr.dup.Earlier != nil && dr.earlier.read && dr.again.read &&
			dr.earlier.sink == dr.again.sink && samePayload(dr.earlier.payload, dr.again.payload, ignore)
	}
}

// samePayload reports whether two output payloads are the same: the same
// bytes, or, with keys to ignore, the same JSON values once those keys
// are left out at any depth.
func samePayload(a, b string, ignore []string) bool {
	if a == b {
		return true
	}
	if len(ignore) == 0 {
		return false
	}
	va, oka := decodeJSON(a)
	vb, okb := decodeJSON(b)
	return oka && okb && reflect.DeepEqual(without(va, ignore), without(vb, ignore))
}

// decodeJSON decodes one JSON value, numbers kept as written.
func decodeJSON(s string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return nil, false
	}
	return v, true
}

// without is v with the object keys of ignore left out at any depth
// (v is a fresh decoded value: changed in place).
func without(v any, ignore []string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if slices.Contains(ignore, k) {
				delete(x, k)
				continue
			}
			x[k] = without(e, ignore)
		}
	case []any:
		for i, e := range x {
			x[i] = without(e, ignore)
		}
	}
	return v
}

// filler is one fill: the rows it wants of each run, and what to do with
// each. It is used by one goroutine.
type filler struct {
	readers []store.Reader
	wants   []map[rowKey][]func(store.Entry) // per run
	journal []func()                         // after the pass: JOURNAL lookups of INDEXED inputs
}

// dupOutput is an OUTPUT row of a duplicate, once read.
type dupOutput struct {
	sink, payload string
	read          bool
}

// dupRead is a duplicate and its two OUTPUT rows, as fill reads them.
type dupRead struct {
	dup            *Duplicate
	earlier, again dupOutput
}

// wantAll asks for the rows of every input and duplicate f reports (its
// crashes', re-deliveries', duplicates' and what is on disk), and returns
// the duplicates, whose rows fill compares once read.
func (fl *filler) wantAll(f *Findings) []*dupRead {
	var dups []*dupRead
	for i := range f.Answers {
		a := &f.Answers[i]
		for j := range a.Crashes {
			c := &a.Crashes[j]
			fl.input(c.LastProcessed)
			fl.input(c.MaybeInFlight)
			for k := range c.InFlight {
				fl.input(&c.InFlight[k])
			}
		}
		for j := range a.Redelivered {
			fl.input(&a.Redelivered[j].Earlier)
			fl.input(&a.Redelivered[j].Again)
		}
		for j := range a.Duplicates {
			dr := &dupRead{dup: &a.Duplicates[j]}
			dups = append(dups, dr)
			fl.want(dr.dup.Again, func(e store.Entry) { dr.again = dupOutput{e.Source, string(e.Payload), true} })
			if dr.dup.Earlier != nil {
				fl.want(*dr.dup.Earlier, func(e store.Entry) { dr.earlier = dupOutput{e.Source, string(e.Payload), true} })
			}
		}
	}
	if od := f.OnDisk; od != nil {
		fl.input(od.PointerInput)
		fl.input(od.StateInput)
	}
	return dups
}

// want asks for row r: f is called with it when it is read. A Ref of no
// run given is ignored.
func (fl *filler) want(r Ref, f func(store.Entry)) {
	if r.Run < 1 || r.Run > len(fl.readers) {
		return
	}
	m := fl.wants[r.Run-1]
	if m == nil {
		m = map[rowKey][]func(store.Entry){}
		fl.wants[r.Run-1] = m
	}
	k := rowKey{r.Processor, r.Index}
	m[k] = append(m[k], f)
}

// input asks for the input row of in (nil: none) for its line and time:
// an INLINE row's payload and instant, a JOURNAL row's payload, or an
// INDEXED row's instant and, after the pass, its journal row's payload.
func (fl *filler) input(in *Input) {
	if in == nil {
		return
	}
	for _, r := range in.Rows {
		switch r.Kind {
		case store.KindInline, store.KindIndexed, store.KindJournal:
		default:
			continue
		}
		rd := fl.readers[in.Run-1]
		fl.want(r, func(e store.Entry) {
			switch e.Kind {
			case store.KindInline:
				in.Line, in.Time = string(e.Payload), e.Instant
			case store.KindJournal:
				in.Line = string(e.Payload)
			case store.KindIndexed:
				in.Time = e.Instant
				feed, seq := e.Source, e.Seq
				fl.journal = append(fl.journal, func() {
					if j, err := rd.Journal(feed, seq); err == nil {
						in.Line = string(j.Payload)
					}
				})
			}
		})
	}
}

// read reads once more each run with a row wanted, handing each wanted
// row to what asked for it. A read error ends a run's read: the first
// pass reported it.
func (fl *filler) read() {
	for i, m := range fl.wants {
		if len(m) == 0 {
			continue
		}
		for e, err := range fl.readers[i].Scan() {
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
}
