package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

type problemKey struct {
	Kind      store.ProblemKind
	Processor string
	Index     int64
	Row       store.Kind
	Line      int64
}

func keys(ps []store.Problem) []problemKey {
	var out []problemKey
	for _, p := range ps {
		out = append(out, problemKey{p.Kind, p.Processor, p.Index, p.Row, p.Line})
	}
	return out
}

func check(rows []store.Entry) []store.Problem {
	var c store.Checker
	for i, e := range rows {
		c.Add(e, int64(i+1))
	}
	return c.Finish()
}

// journalled builds META, then n INDEXED inputs of processor p (feed f,
// seqs 1..n, no outputs), then END; with the JOURNAL rows of the seqs in
// journal, written before (before) or after the inputs.
func journalled(n int64, journal []int64, before bool) []store.Entry {
	rows := []store.Entry{store.EncodeMeta(store.Meta{Streams: []string{"p"}})}
	var js []store.Entry
	for i, seq := range journal {
		js = append(js, store.Entry{Index: int64(i + 2), Kind: store.KindJournal, Source: "f", Seq: seq})
	}
	if before {
		rows = append(rows, js...)
	}
	rows = append(rows, store.Entry{Processor: "p", Index: 1, Kind: store.KindStart})
	for i := int64(1); i <= n; i++ {
		rows = append(rows, store.Entry{Processor: "p", Index: i + 1, Kind: store.KindIndexed, Source: "f", Seq: i})
	}
	rows = append(rows, store.Entry{Processor: "p", Index: n + 2, Kind: store.KindEnd, N: n})
	if !before {
		rows = append(rows, js...)
	}
	return rows
}

func seqs(from, to int64, skip ...int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		if !contains(skip, s) {
			out = append(out, s)
		}
	}
	return out
}

func contains(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestCheckerJournal(t *testing.T) {
	tests := []struct {
		name string
		rows []store.Entry
		want []problemKey
	}{
		{"journal before", journalled(10, seqs(1, 10), true), nil},
		{"journal after", journalled(10, seqs(1, 10), false), nil},
		{"journal out of order", journalled(3, []int64{3, 1, 2}, false), nil},
		{"one missing", journalled(10, seqs(1, 10, 7), true), []problemKey{
			{store.ProblemMissingJournal, "p", 8, store.KindIndexed, 18},
		}},
		{"one missing, journal after", journalled(10, seqs(1, 10, 7), false), []problemKey{
			{store.ProblemMissingJournal, "p", 8, store.KindIndexed, 9},
		}},
		// More unresolved references than are kept one by one: the rest
		// are kept as intervals and reported as ranges, with no line.
		{"many missing", journalled(5000, seqs(4097, 4500), true), func() []problemKey {
			var want []problemKey
			for i := int64(1); i <= 4096; i++ {
				want = append(want, problemKey{store.ProblemMissingJournal, "p", i + 1, store.KindIndexed, 406 + i})
			}
			return append(want, problemKey{store.ProblemMissingJournal, "", 0, store.KindIndexed, 0})
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := check(tt.rows)
			if d := cmp.Diff(tt.want, keys(ps)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestCheckerLimit(t *testing.T) {
	rows := []store.Entry{store.EncodeMeta(store.Meta{Streams: []string{"p"}})}
	for i := int64(1); i <= 100; i++ {
		rows = append(rows, store.Entry{Processor: "p", Index: i, Kind: "BOGUS"})
	}
	c := store.Checker{Limit: 10}
	for i, e := range rows {
		c.Add(e, int64(i+1))
	}
	ps := c.Finish()
	if len(ps) != 11 {
		t.Fatalf("%d problems, want 10 and a summary", len(ps))
	}
	if got, want := ps[10].Detail, "91 more problems not listed"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestCheckerRules(t *testing.T) {
	meta := store.EncodeMeta(store.Meta{Streams: []string{"p"}})
	p := func(i int64, k store.Kind, f ...func(*store.Entry)) store.Entry {
		e := store.Entry{Processor: "p", Index: i, Kind: k}
		for _, f := range f {
			f(&e)
		}
		return e
	}
	n := func(v int64) func(*store.Entry) { return func(e *store.Entry) { e.N = v } }
	k := func(v int64) func(*store.Entry) { return func(e *store.Entry) { e.Seq = v } }
	tests := []struct {
		name string
		rows []store.Entry
		want []problemKey
	}{
		{"empty", nil, []problemKey{
			{store.ProblemMalformed, "", 0, "", 0},
			{store.ProblemMissingStream, "", 0, store.KindMeta, 0},
		}},
		{"first row not META", []store.Entry{p(1, store.KindStart), p(2, store.KindEnd)}, []problemKey{
			{store.ProblemMalformed, "p", 1, store.KindStart, 1},
		}},
		{"second META", []store.Entry{meta, {Index: 2, Kind: store.KindMeta}, p(1, store.KindStart), p(2, store.KindEnd)}, []problemKey{
			{store.ProblemMalformed, "", 2, store.KindMeta, 2},
		}},
		{"TIMER with outputs", []store.Entry{meta, p(1, store.KindStart), p(2, store.KindTimer, n(2)),
			p(3, store.KindOutput, k(1)), p(4, store.KindOutput, k(2)), p(5, store.KindEnd, n(1))}, nil},
		{"DELIVERY before TIMER", []store.Entry{meta, p(1, store.KindStart), p(2, store.KindDelivery),
			p(3, store.KindTimer), p(4, store.KindEnd, n(1))}, []problemKey{
			{store.ProblemOrphan, "p", 2, store.KindDelivery, 3},
		}},
		{"DELIVERY last", []store.Entry{meta, p(1, store.KindStart), p(2, store.KindDelivery)}, []problemKey{
			{store.ProblemOrphan, "p", 2, store.KindDelivery, 3},
			{store.ProblemUnfinished, "p", 2, store.KindDelivery, 3},
		}},
		{"OUTPUT after DROPPED", []store.Entry{meta, p(1, store.KindStart), p(2, store.KindInline, n(1)),
			p(3, store.KindDropped, n(1)), p(4, store.KindOutput, k(1)), p(5, store.KindEnd, n(1))}, []problemKey{
			{store.ProblemOrphan, "p", 2, store.KindInline, 3},
			{store.ProblemOrphan, "p", 4, store.KindOutput, 5},
		}},
		{"repeated index", []store.Entry{meta, p(1, store.KindStart), p(1, store.KindEnd)}, []problemKey{
			{store.ProblemGap, "p", 1, store.KindEnd, 3},
		}},
		{"second START", []store.Entry{meta, p(1, store.KindStart), p(2, store.KindStart), p(3, store.KindEnd)}, []problemKey{
			{store.ProblemMalformed, "p", 2, store.KindStart, 3},
		}},
		{"row without processor", []store.Entry{meta, {Index: 2, Kind: store.KindEnd}, p(1, store.KindStart), p(2, store.KindEnd)}, []problemKey{
			{store.ProblemMalformed, "", 2, store.KindEnd, 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, keys(check(tt.rows))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
