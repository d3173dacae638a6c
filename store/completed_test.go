package store_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// TestACompletedRowIsOfVersion6OnlyAndReadsBackWhatWasWritten: COMPLETED
// rows are new in blackbox-recording/6: a stream row that leaves a
// recording complete; one in a version 5 (or older) recording is
// malformed, and writers refuse it there.
func TestACompletedRowIsOfVersion6OnlyAndReadsBackWhatWasWritten(t *testing.T) {
	for _, c := range []store.Completed{
		{Feed: "f", Seq: 1, Items: 1, Epoch: 7, From: 10, Last: 10},
		{Feed: "f", Seq: 1, Items: 5, Epoch: -3, Key: "orders/2", From: 0, Last: 4},
	} {
		row := c.Entry("p", 2)
		back, err := store.CompletedOf(row)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c, back); d != "" {
			t.Errorf("CompletedOf(Entry) (-want +got):\n%s", d)
		}
		for _, tt := range []struct {
			format    string
			malformed bool
		}{{store.Format, false}, {"", false}, {store.FormatV5, true}, {store.FormatV4, true}, {store.FormatV3, true}, {store.FormatV2, true}, {store.FormatV1, true}} {
			rows := newRows(tt.format, "p").add(row).in("p", c.Seq+c.Items).end("p")
			ps := check(rows.rows)
			if got := len(ps) == 1 && errors.Is(&ps[0], store.ErrMalformed) && ps[0].Row == store.KindCompleted; got != tt.malformed || !tt.malformed && len(ps) > 0 {
				t.Errorf("%+v, format %q: problems %v, want malformed %v", c, tt.format, ps, tt.malformed)
			}
			if tt.malformed != (store.ValidateIn(tt.format, row) != nil) {
				t.Errorf("%+v, format %q: ValidateIn = %v, want an error %v", c, tt.format, store.ValidateIn(tt.format, row), tt.malformed)
			}
		}
	}
}

// TestACompletedRowThatSaysNoRunOfItemsIsMalformed: the checker reads
// every COMPLETED row, and a processor with one it cannot read is not
// judged for missing-input (that row may have covered the seqs).
func TestACompletedRowThatSaysNoRunOfItemsIsMalformed(t *testing.T) {
	good := store.Completed{Feed: "f", Seq: 1, Items: 2, Epoch: 1, From: 10, Last: 20}.Entry("p", 0)
	for _, tt := range []struct {
		name string
		edit func(e *store.Entry)
	}{
		{"no feed", func(e *store.Entry) { e.Source = "" }},
		{"seq 0", func(e *store.Entry) { e.Seq = 0 }},
		{"no item", func(e *store.Entry) { e.N = 0 }},
		{"seqs past the largest integer", func(e *store.Entry) { e.Seq = 1<<63 - 1 }},
		{"not JSON", func(e *store.Entry) { e.Detail = "{" }},
		{"no detail", func(e *store.Entry) { e.Detail = "" }},
		{"no last offset", func(e *store.Entry) { e.Detail = `{}` }},
		{"another field", func(e *store.Entry) { e.Detail = `{"last":20,"first":10}` }},
		{"two values", func(e *store.Entry) { e.Detail = `{"last":20}{"last":20}` }},
		{"last before the first", func(e *store.Entry) { e.Detail = `{"last":9}` }},
	} {
		row := good
		tt.edit(&row)
		if _, err := store.CompletedOf(row); !errors.Is(err, store.ErrMalformed) {
			t.Errorf("%s: CompletedOf = %v, want ErrMalformed", tt.name, err)
		}
		ps := check(newRows(store.Format, "p").add(row).in("p", 3).commit(3).end("p").rows)
		if len(ps) != 1 || !errors.Is(&ps[0], store.ErrMalformed) {
			t.Errorf("%s: problems %v, want the COMPLETED row malformed only", tt.name, ps)
		}
	}
}

// FuzzCompletedOf: CompletedOf reads any row without panicking, and a row
// it accepts is written back (Completed.Entry) as a row it reads the same
// again, one every store accepts.
func FuzzCompletedOf(f *testing.F) {
	f.Add("f", int64(1), int64(2), int64(7), "", int64(10), `{"last":20}`)
	f.Add("f", int64(4), int64(1), int64(0), "orders/3", int64(0), `{"last":0}`)
	f.Add("", int64(0), int64(0), int64(0), "", int64(0), `{`)
	f.Fuzz(func(t *testing.T, source string, seq, n, epoch int64, key string, offset int64, detail string) {
		row := store.Entry{Processor: "p", Index: 2, Kind: store.KindCompleted, Source: source, Seq: seq, N: n,
			Epoch: epoch, Key: key, Offset: offset, Detail: detail}
		c, err := store.CompletedOf(row)
		if err != nil {
			if !errors.Is(err, store.ErrMalformed) {
				t.Fatalf("CompletedOf: %v, want ErrMalformed", err)
			}
			return
		}
		again := c.Entry("p", 2)
		back, err := store.CompletedOf(again)
		if err != nil {
			t.Fatalf("CompletedOf(%+v.Entry): %v", c, err)
		}
		if back != c {
			t.Fatalf("read back %+v, want %+v", back, c)
		}
		if store.Validate(row) == nil {
			if err := store.Validate(again); err != nil {
				t.Fatalf("a valid row read and written back is refused: %v", err)
			}
		}
	})
}
