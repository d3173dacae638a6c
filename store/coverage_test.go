package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// rowsOf builds a recording row by row: META (streams listed), then rows
// whose index is counted per stream (and among the META, JOURNAL and COMMIT
// rows) as they are added.
type rowsOf struct {
	rows []store.Entry
	next map[string]int64
}

func newRows(format string, streams ...string) *rowsOf {
	r := &rowsOf{next: map[string]int64{"": 2}}
	apps := map[string]string{}
	for _, s := range streams {
		apps[s] = "app"
	}
	r.rows = []store.Entry{store.EncodeMeta(store.Meta{Format: format, Apps: apps, Streams: streams})}
	for _, s := range streams {
		r.add(store.Entry{Processor: s, Kind: store.KindStart})
	}
	return r
}

func (r *rowsOf) add(e store.Entry) *rowsOf {
	if _, ok := r.next[e.Processor]; !ok {
		r.next[e.Processor] = 1
	}
	e.Index = r.next[e.Processor]
	r.next[e.Processor]++
	r.rows = append(r.rows, e)
	return r
}

func (r *rowsOf) in(p string, seqs ...int64) *rowsOf {
	for _, s := range seqs {
		r.add(store.Entry{Processor: p, Kind: store.KindInline, Source: "f", Seq: s})
	}
	return r
}

func (r *rowsOf) commit(seq int64) *rowsOf {
	return r.add(store.Entry{Kind: store.KindCommit, Source: "f", Seq: seq, Epoch: 1, Offset: 10 * seq})
}

func (r *rowsOf) end(ps ...string) *rowsOf {
	for _, p := range ps {
		var n int64
		for _, e := range r.rows {
			if e.Processor == p && e.Kind.IsInput() {
				n++
			}
		}
		r.add(store.Entry{Processor: p, Kind: store.KindEnd, N: n})
	}
	return r
}

// endLeaving closes each stream with an END row saying the stop left seqs
// first..last of feed f unprocessed.
func (r *rowsOf) endLeaving(first, last int64, ps ...string) *rowsOf {
	r.end(ps...)
	for i := len(r.rows) - len(ps); i < len(r.rows); i++ {
		r.rows[i].Detail = store.EndDetail([]store.Unprocessed{{Feed: "f", First: first, Last: last}})
	}
	return r
}

// killedLeaving closes each stream with the END row of a run killed for
// reason that left seqs first..last of feed f unprocessed.
func (r *rowsOf) killedLeaving(reason string, first, last int64, ps ...string) *rowsOf {
	r.end(ps...)
	for i := len(r.rows) - len(ps); i < len(r.rows); i++ {
		r.rows[i].Detail = store.End{Killed: reason, Unprocessed: []store.Unprocessed{{Feed: "f", First: first, Last: last}}}.Detail()
	}
	return r
}

func (r *rowsOf) journal(seqs ...int64) *rowsOf {
	for _, s := range seqs {
		r.add(store.Entry{Kind: store.KindJournal, Source: "f", Seq: s})
	}
	return r
}

// missing is a missing-input problem as the tests compare it.
type missing struct {
	Processor   string
	Row         store.Kind
	Line        int64
	First, Last int64
}

// TestEverySeqACommitCoversHasARowInEveryProcessorOfTheFeed: a COMMIT row
// claims every item of its feed up to its seq was handled, and a handled
// item's rows are written before it is committed; the Checker reports the
// seqs a processor (its workers' streams merged) holds no input, DROPPED or
// FAILED row for as missing-input, at the COMMIT row. A recording that ended
// cleanly is held to every seq it published. (verify and replay called such
// a recording complete; explain called it lost.)
func TestEverySeqACommitCoversHasARowInEveryProcessorOfTheFeed(t *testing.T) {
	tests := []struct {
		name string
		rows *rowsOf
		want []missing
	}{
		{"every seq has an input", newRows("", "p").in("p", 1, 2, 3).commit(3), nil},
		{"a seq with no row, crashed", newRows("", "p").in("p", 1, 3).commit(3),
			[]missing{{"p", store.KindCommit, 5, 2, 2}}},
		{"seqs past the last commit, crashed", newRows("", "p").in("p", 1, 4).commit(1), nil},
		{"a DROPPED row covers its seqs", newRows("", "p").in("p", 1).
			add(store.Entry{Processor: "p", Kind: store.KindDropped, Source: "f", Seq: 2, N: 2}).in("p", 4).commit(4), nil},
		{"a FAILED row stands for its input", newRows("", "p").in("p", 1).
			add(store.Entry{Processor: "p", Kind: store.KindFailed, Source: "f", Seq: 2}).in("p", 3).commit(3), nil},
		{"a LOST row covers no seq", newRows("", "p").in("p", 1).
			add(store.Entry{Processor: "p", Kind: store.KindLost, Source: "f", Seq: 1, Epoch: 1, Offset: 10, Detail: "{}"}).in("p", 3).commit(3),
			[]missing{{"p", store.KindCommit, 6, 2, 2}}},
		// A COMPLETED row: items the group completed in an earlier run,
		// not handed to the processor again.
		{"a COMPLETED row covers its seqs", newRows("", "p").
			add(store.Completed{Feed: "f", Seq: 1, Items: 3, Epoch: 1, From: 10, Last: 30}.Entry("p", 0)).in("p", 4).commit(4), nil},
		{"a COMPLETED row covers no seq past its own", newRows("", "p").
			add(store.Completed{Feed: "f", Seq: 1, Items: 2, Epoch: 1, From: 10, Last: 20}.Entry("p", 0)).in("p", 4).commit(4),
			[]missing{{"p", store.KindCommit, 5, 3, 3}}},
		{"ended: a COMPLETED row of a worker covers the processor", newRows("", "p#w0", "p#w1").
			add(store.Completed{Feed: "f", Seq: 1, Items: 2, Epoch: 1, From: 10, Last: 20}.Entry("p#w1", 0)).in("p#w0", 3).journal(1, 2, 3).end("p#w0", "p#w1"), nil},
		{"workers together hold every seq", newRows("", "p#w0", "p#w1").in("p#w0", 1, 3).in("p#w1", 2).commit(3), nil},
		{"a seq no worker holds", newRows("", "p#w0", "p#w1").in("p#w0", 1, 4).in("p#w1", 2).commit(4),
			[]missing{{"p", store.KindCommit, 7, 3, 3}}},
		{"each processor of the feed", newRows("", "a", "b").in("a", 1, 2).in("b", 1).commit(2),
			[]missing{{"b", store.KindCommit, 7, 2, 2}}},
		{"a processor of another feed is not judged", newRows("", "a", "b").in("a", 1, 2).
			add(store.Entry{Processor: "b", Kind: store.KindInline, Source: "g", Seq: 1}).commit(2), nil},
		{"a processor with a malformed row is not judged", newRows("", "p").in("p", 1).
			add(store.Entry{Processor: "p", Kind: "BOGUS"}).in("p", 3).commit(3), nil},
		{"ended: a seq published and never handled", newRows("", "p").in("p", 1, 2, 4).end("p"),
			[]missing{{"p", store.KindEnd, 6, 3, 3}}},
		{"ended: a journalled seq past the last input", newRows("", "p").in("p", 1).
			add(store.Entry{Kind: store.KindJournal, Source: "f", Seq: 2}).end("p"),
			[]missing{{"p", store.KindEnd, 5, 2, 2}}},
		{"crashed: no claim past the commit", newRows("", "p").in("p", 1, 2, 4), nil},
		// A clean stop whose drain timed out: END says which published
		// seqs it left unprocessed (and uncommitted).
		{"ended: seqs END says the stop left unprocessed", newRows("", "p").in("p", 1, 2).journal(1, 2, 3, 4, 5).commit(2).
			endLeaving(3, 5, "p"), nil},
		{"ended: a seq published before the unprocessed ones", newRows("", "p").in("p", 1).journal(1, 2, 3, 4).
			endLeaving(3, 4, "p"), []missing{{"p", store.KindEnd, 8, 2, 2}}},
		{"ended: a COMMIT covering a seq END says is unprocessed", newRows("", "p").in("p", 1, 2).journal(1, 2, 3, 4).commit(3).
			endLeaving(3, 4, "p"), []missing{{"p", store.KindCommit, 9, 3, 3}}},
		{"ended: workers' ENDs say it for the processor", newRows("", "p#w0", "p#w1").in("p#w0", 1).in("p#w1", 2).journal(3, 4).
			endLeaving(3, 4, "p#w0", "p#w1"), nil},
		{"ended: unprocessed seqs of another processor", newRows("", "a", "b").in("a", 1).in("b", 1).journal(1, 2).
			endLeaving(2, 2, "a").end("b"), []missing{{"b", store.KindEnd, 9, 2, 2}}},
		// A killed run ends its streams as a clean stop does: END says
		// why, and what it left unprocessed.
		{"ended by a kill: seqs END says it left unprocessed", newRows("", "p").in("p", 1, 2).journal(1, 2, 3, 4, 5).commit(2).
			killedLeaving("operator", 3, 5, "p"), nil},
		{"ended by a kill: a seq before those it left", newRows("", "p").in("p", 1).journal(1, 2, 3, 4).
			killedLeaving("operator", 3, 4, "p"), []missing{{"p", store.KindEnd, 8, 2, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []missing
			for _, p := range check(tt.rows.rows) {
				if !errors.Is(&p, store.ErrMissingInput) {
					continue
				}
				if p.Feed != "f" || p.Detail == "" {
					t.Errorf("problem %v: want feed f and a detail", &p)
				}
				got = append(got, missing{p.Processor, p.Row, p.Line, p.First, p.Last})
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("missing-input problems (-want +got):\n%s", d)
			}
		})
	}
}

// TestAnEndDetailThatIsNotTheUnprocessedSeqsIsMalformed: an END row's
// detail is the JSON of the seqs a clean stop left unprocessed
// (store.EndDetail), or empty; anything else is a malformed row.
func TestAnEndDetailThatIsNotTheUnprocessedSeqsIsMalformed(t *testing.T) {
	for _, tt := range []struct {
		detail    string
		malformed bool
	}{
		{"", false},
		{store.EndDetail([]store.Unprocessed{{Feed: "f", First: 2, Last: 2}}), false},
		{"drained", true},
		{`{"unprocessed":[{"feed":"f","first":3,"last":2}]}`, true},
		{`{"unprocessed":[{"feed":"","first":1,"last":2}]}`, true},
		{`{"unprocessed":[{"feed":"f","first":0,"last":2}]}`, true},
		{store.End{Killed: "operator"}.Detail(), false},
		{`{"killed":""}`, true},
		{`{"killed":7}`, true},
	} {
		rows := newRows("", "p").in("p", 1, 2).end("p")
		rows.rows[len(rows.rows)-1].Detail = tt.detail
		ps := check(rows.rows)
		got := len(ps) == 1 && errors.Is(&ps[0], store.ErrMalformed) && ps[0].Row == store.KindEnd
		if got != tt.malformed || !tt.malformed && len(ps) != 0 {
			t.Errorf("END detail %q: problems %v, want malformed %v", tt.detail, ps, tt.malformed)
		}
	}
}

// TestAFailedRowEndsWhatItsStreamProves: a FAILED row (of an input, a
// completion or a timer) is a problem of its stream, the first one only:
// the stream is not reproducible past it, so the recording is not
// complete. verify called such a recording complete while replay stopped
// there.
func TestAFailedRowEndsWhatItsStreamProves(t *testing.T) {
	rows := newRows("", "p", "q").in("p", 1).
		add(store.Entry{Processor: "p", Kind: store.KindFailed, Source: "f", Seq: 2, Detail: "boom"}).
		in("p", 3).
		add(store.Entry{Processor: "p", Kind: store.KindFailed, Seq: 1, Detail: "timer 1"}).
		in("q", 1, 2, 3).end("p", "q")
	got := keys(check(rows.rows))
	want := []problemKey{{store.ProblemFailed, "p", 3, store.KindFailed, 5}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
}

// TestALostRowIsOfVersion4Only: LOST rows are new in blackbox-recording/4:
// one in a version 3 recording is malformed, and writers refuse it there.
func TestALostRowIsOfVersion4Only(t *testing.T) {
	lost := store.Entry{Processor: "p", Kind: store.KindLost, Source: "f", Seq: 0, Epoch: 3, Key: "t/0", Offset: 5, N: 0,
		Detail: `{"reason":"retention","to":9}`}
	for _, tt := range []struct {
		format    string
		malformed bool
	}{{store.Format, false}, {"", false}, {store.FormatV3, true}, {store.FormatV2, true}, {store.FormatV1, true}} {
		rows := newRows(tt.format, "p").add(lost).end("p")
		ps := check(rows.rows)
		if got := len(ps) == 1 && errors.Is(&ps[0], store.ErrMalformed) && ps[0].Row == store.KindLost; got != tt.malformed {
			t.Errorf("format %q: problems %v, want malformed %v", tt.format, ps, tt.malformed)
		}
		if tt.malformed != (store.ValidateIn(tt.format, lost) != nil) {
			t.Errorf("format %q: ValidateIn = %v, want an error %v", tt.format, store.ValidateIn(tt.format, lost), tt.malformed)
		}
	}
	if err := store.Validate(store.Entry{Processor: "p", Kind: store.KindLost, Source: "f", Instant: time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)}); !errors.Is(err, store.ErrMalformed) {
		t.Errorf("a LOST row with an instant: %v, want malformed (it has none)", err)
	}
}

// TestAnEndDetailSaysAKilledRunWasKilledAndWhy: a killed run's END detail
// carries the reason beside the unprocessed seqs, read back by EndOf; a
// stop's detail is byte for byte what it was before kills (older readers
// read both: the reason is a JSON field they ignore).
func TestAnEndDetailSaysAKilledRunWasKilledAndWhy(t *testing.T) {
	u := []store.Unprocessed{{Feed: "orders", First: 2881, Last: 3061}}
	for _, tt := range []struct {
		end    store.End
		detail string
	}{
		{store.End{}, ""},
		{store.End{Unprocessed: u}, `{"unprocessed":[{"feed":"orders","first":2881,"last":3061}]}`},
		{store.End{Killed: "disk full"}, `{"killed":"disk full"}`},
		{store.End{Killed: "disk full", Unprocessed: u}, `{"killed":"disk full","unprocessed":[{"feed":"orders","first":2881,"last":3061}]}`},
	} {
		if got := tt.end.Detail(); got != tt.detail {
			t.Errorf("%+v: detail %s, want %s", tt.end, got, tt.detail)
		}
		got, err := store.EndOf(store.Entry{Kind: store.KindEnd, Detail: tt.detail})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tt.end, got); d != "" {
			t.Errorf("EndOf(%s) (-want +got):\n%s", tt.detail, d)
		}
		us, err := store.UnprocessedOf(store.Entry{Kind: store.KindEnd, Detail: tt.detail})
		if err != nil || !cmp.Equal(us, tt.end.Unprocessed) {
			t.Errorf("UnprocessedOf(%s) = %v, %v", tt.detail, us, err)
		}
	}
}
