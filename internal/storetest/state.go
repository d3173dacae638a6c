package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/store"
)

// stateRecording is commitRecording with two STATE rows among its rows of
// no processor: a binding degraded, then up again.
func stateRecording() []store.Entry {
	rows := commitRecording()
	degraded := store.State{Feed: "orders", Group: "g", From: store.StateUp, To: store.StateDegraded,
		Reason: "queue g/orders full after 0s spin", At: T0, Observed: T0}
	up := store.State{Feed: "orders", Group: "g", From: store.StateDegraded, To: store.StateUp,
		Reason: "no loss for the quiet period (1m0s)", At: T0.Add(time.Minute), Observed: T0.Add(time.Hour)}
	// After the first COMMIT row (index 3): the JOURNAL and COMMIT rows
	// after them move up by two.
	at := slices.IndexFunc(rows, func(e store.Entry) bool { return e.Kind == store.KindCommit }) + 1
	rows = slices.Insert(rows, at, degraded.Entry(4), up.Entry(5))
	for i := at + 2; i < len(rows); i++ {
		if rows[i].Processor == "" {
			rows[i].Index += 2
		}
	}
	return rows
}

// testStateRows: STATE rows of a Format recording are stored and read back
// row for row, counted among META, JOURNAL and COMMIT rows, the recording
// complete; a writer refuses one into a FormatV4 recording.
func testStateRows(t *testing.T, b Backend) {
	t.Run("read back", func(t *testing.T) {
		p := path(t)
		readBackWhole(t, b, p, stateRecording())
		checkStreams(t, b, p)
	})
	t.Run("version 4", func(t *testing.T) {
		s, err := b.Create(path(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Append(store.EncodeMeta(store.Meta{Format: store.FormatV4, Created: T0, Streams: []string{"p"}})); err != nil {
			t.Fatal(err)
		}
		err = s.Append(store.State{Feed: "orders", Group: "g", From: store.StateUp, To: store.StateLatched, At: T0, Observed: T0}.Entry(2))
		var fe *store.FieldError
		if !errors.As(err, &fe) || fe.Field != "kind" || !errors.Is(err, store.ErrMalformed) {
			t.Fatalf("Append(STATE) into version 4: %v, want a *FieldError of kind wrapping ErrMalformed", err)
		}
	})
}
