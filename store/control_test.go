package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// TestAControlRowIsOfVersion6OnlyAndReadsBackWhatWasWritten: CONTROL rows
// are new in blackbox-recording/6: a row of no processor that leaves a
// recording complete; one in a version 5 (or older) recording is
// malformed, and writers refuse it there.
func TestAControlRowIsOfVersion6OnlyAndReadsBackWhatWasWritten(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	for _, c := range []store.Control{
		{Feed: "f", Group: "g", Action: store.ControlPause, Who: "alice", Reason: "deploy", At: at, Before: 4, After: 4, Until: at.Add(time.Minute)},
		{Feed: "f", Group: "g", Action: store.ControlRelease, Who: "bob", Reason: "poison", At: at, Before: 4, After: 20},
		{Feed: "f", Group: "g", Action: store.ControlRelease, Who: "bob", Reason: "state lost", At: at, Before: 4, After: 20, Released: 16, Processed: 2},
		{Feed: "f", Group: "g", Action: store.ControlSeek, Who: "bob", Reason: "state lost", At: at, Before: 4, After: 20, Released: 2, Processed: 2},
		{Action: store.ControlKill, Who: "alice", Reason: "runaway", At: at},
	} {
		row := c.Entry(0)
		back, err := store.ControlOf(row)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c, back); d != "" {
			t.Errorf("ControlOf(Entry) (-want +got):\n%s", d)
		}
		for _, tt := range []struct {
			format    string
			malformed bool
		}{{store.Format, false}, {"", false}, {store.FormatV5, true}, {store.FormatV4, true}, {store.FormatV3, true}, {store.FormatV2, true}, {store.FormatV1, true}} {
			rows := newRows(tt.format, "p").in("p", 1).add(row).end("p")
			ps := check(rows.rows)
			if got := len(ps) == 1 && errors.Is(&ps[0], store.ErrMalformed) && ps[0].Row == store.KindControl; got != tt.malformed || !tt.malformed && len(ps) > 0 {
				t.Errorf("%s, format %q: problems %v, want malformed %v", c.Action, tt.format, ps, tt.malformed)
			}
			if tt.malformed != (store.ValidateIn(tt.format, row) != nil) {
				t.Errorf("%s, format %q: ValidateIn = %v, want an error %v", c.Action, tt.format, store.ValidateIn(tt.format, row), tt.malformed)
			}
		}
	}
}

// TestAControlRowThatSaysNoActionItCouldBeIsMalformed: the checker reads
// every CONTROL row's detail.
func TestAControlRowThatSaysNoActionItCouldBeIsMalformed(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		source string
		detail string
	}{
		{"not JSON", "f", `{`},
		{"unknown action", "f", `{"group":"g","action":"explode","who":"a","reason":"r","before":0,"after":0}`},
		{"no operator", "f", `{"group":"g","action":"pause","who":"","reason":"r","before":0,"after":0}`},
		{"no reason", "f", `{"group":"g","action":"pause","who":"a","reason":"","before":0,"after":0}`},
		{"no group", "f", `{"action":"pause","who":"a","reason":"r","before":0,"after":0}`},
		{"no feed", "", `{"group":"g","action":"pause","who":"a","reason":"r","before":0,"after":0}`},
		{"negative position", "f", `{"group":"g","action":"pause","who":"a","reason":"r","before":-1,"after":0}`},
		{"until on a resume", "f", `{"group":"g","action":"resume","who":"a","reason":"r","before":0,"after":0,"until":"2030-01-01T00:02:00Z"}`},
		{"until not an instant", "f", `{"group":"g","action":"pause","who":"a","reason":"r","before":0,"after":0,"until":"soon"}`},
		{"negative released", "f", `{"group":"g","action":"release","who":"a","reason":"r","before":0,"after":0,"released":-1}`},
		{"more processed than released", "f", `{"group":"g","action":"release","who":"a","reason":"r","before":0,"after":2,"released":1,"processed":2}`},
		{"released on a pause", "f", `{"group":"g","action":"pause","who":"a","reason":"r","before":0,"after":0,"released":1}`},
	} {
		row := store.Entry{Kind: store.KindControl, Source: c.source, Instant: at, Detail: c.detail}
		if _, err := store.ControlOf(row); !errors.Is(err, store.ErrMalformed) {
			t.Errorf("%s: ControlOf = %v, want ErrMalformed", c.name, err)
		}
		ps := check(newRows(store.Format, "p").in("p", 1).add(row).end("p").rows)
		if len(ps) != 1 || ps[0].Row != store.KindControl || !errors.Is(&ps[0], store.ErrMalformed) {
			t.Errorf("%s: problems %v, want the CONTROL row malformed", c.name, ps)
		}
	}
	if _, err := store.ControlOf(store.Entry{Kind: store.KindControl, Detail: `{"action":"kill","who":"a","reason":"r","before":0,"after":0}`}); !errors.Is(err, store.ErrMalformed) {
		t.Errorf("a CONTROL row without an instant: %v, want ErrMalformed", err)
	}
}

// FuzzControlOf: ControlOf reads any row's detail without panicking, and
// a row it accepts is written back (Control.Entry) as a row it reads the
// same again.
func FuzzControlOf(f *testing.F) {
	at := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	f.Add("f", `{"group":"g","action":"pause","who":"alice","reason":"deploy","before":4,"after":4,"until":"2030-01-01T00:02:00Z"}`)
	f.Add("", `{"action":"kill","who":"alice","reason":"runaway","before":0,"after":0}`)
	f.Add("f", `{"group":"g","action":"seek","who":"bob","reason":"skip","before":4,"after":20}`)
	f.Add("f", `{"group":"g","action":"resume","who":"a","reason":"r","before":-1,"after":0}`)
	f.Fuzz(func(t *testing.T, source, detail string) {
		c, err := store.ControlOf(store.Entry{Kind: store.KindControl, Source: source, Instant: at, Detail: detail})
		if err != nil {
			if !errors.Is(err, store.ErrMalformed) {
				t.Fatalf("ControlOf: %v, want ErrMalformed", err)
			}
			return
		}
		back, err := store.ControlOf(c.Entry(0))
		if err != nil {
			t.Fatalf("ControlOf(%+v.Entry): %v", c, err)
		}
		if back != c {
			t.Fatalf("read back %+v, want %+v", back, c)
		}
	})
}
