package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// TestAStateRowIsOfVersion5OnlyAndReadsBackWhatWasWritten: STATE rows are
// new in blackbox-recording/5: a row of no processor, counted among META,
// JOURNAL and COMMIT rows, that leaves a recording complete; one in a
// version 4 (or older) recording is malformed, and writers refuse it there.
func TestAStateRowIsOfVersion5OnlyAndReadsBackWhatWasWritten(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	st := store.State{Feed: "f", Group: "g", From: store.StateDegraded, To: store.StateUp,
		Reason: "no loss for the quiet period (1m0s)", At: at, Observed: at.Add(time.Second)}
	row := st.Entry(0)
	back, err := store.StateOf(row)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(st, back); d != "" {
		t.Errorf("StateOf(Entry) (-want +got):\n%s", d)
	}
	for _, tt := range []struct {
		format    string
		malformed bool
	}{{store.Format, false}, {"", false}, {store.FormatV4, true}, {store.FormatV3, true}, {store.FormatV2, true}, {store.FormatV1, true}} {
		rows := newRows(tt.format, "p").in("p", 1).add(row).end("p")
		ps := check(rows.rows)
		if got := len(ps) == 1 && errors.Is(&ps[0], store.ErrMalformed) && ps[0].Row == store.KindState; got != tt.malformed || !tt.malformed && len(ps) > 0 {
			t.Errorf("format %q: problems %v, want malformed %v", tt.format, ps, tt.malformed)
		}
		if tt.malformed != (store.ValidateIn(tt.format, row) != nil) {
			t.Errorf("format %q: ValidateIn = %v, want an error %v", tt.format, store.ValidateIn(tt.format, row), tt.malformed)
		}
	}
	if err := store.Validate(store.Entry{Kind: store.KindState, Source: "f", Seq: 3, Instant: at, Detail: row.Detail}); !errors.Is(err, store.ErrMalformed) {
		t.Errorf("a STATE row with a seq: %v, want malformed (it has none)", err)
	}
}

// TestAStateRowThatSaysNoChangeItCouldBeIsMalformed: the checker reads
// every STATE row's detail: verify calls a recording complete only when
// each says a change from one of the three states to another.
func TestAStateRowThatSaysNoChangeItCouldBeIsMalformed(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := store.State{Feed: "f", Group: "g", From: store.StateUp, To: store.StateLatched, At: at, Observed: at}
	for _, tt := range []struct {
		name string
		edit func(e *store.Entry)
	}{
		{"not JSON", func(e *store.Entry) { e.Detail = "UP->LATCHED" }},
		{"no group", func(e *store.Entry) {
			e.Detail = `{"group":"","from":"UP","to":"LATCHED","reason":"","observed":"2030-01-01T00:00:00Z"}`
		}},
		{"unknown state", func(e *store.Entry) {
			e.Detail = `{"group":"g","from":"UP","to":"DOWN","reason":"","observed":"2030-01-01T00:00:00Z"}`
		}},
		{"no change", func(e *store.Entry) {
			e.Detail = `{"group":"g","from":"UP","to":"UP","reason":"","observed":"2030-01-01T00:00:00Z"}`
		}},
		{"observed before", func(e *store.Entry) { e.Instant = at.Add(time.Second) }},
		{"no instant", func(e *store.Entry) { e.Instant = time.Time{} }},
		{"no feed", func(e *store.Entry) { e.Source = "" }},
	} {
		row := ok.Entry(0)
		tt.edit(&row)
		ps := check(newRows(store.Format, "p").add(row).end("p").rows)
		if len(ps) != 1 || !errors.Is(&ps[0], store.ErrMalformed) || ps[0].Row != store.KindState {
			t.Errorf("%s: problems %v, want the STATE row malformed", tt.name, ps)
		}
	}
	if ps := check(newRows(store.Format, "p").add(ok.Entry(0)).end("p").rows); len(ps) != 0 {
		t.Errorf("a good STATE row: problems %v", ps)
	}
}
