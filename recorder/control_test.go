package recorder_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// syncCounter counts a writer's syncs.
type syncCounter struct {
	*store.Memory
	syncs int
}

func (s *syncCounter) Sync() error { s.syncs++; return s.Memory.Sync() }

// Recorder.Control writes a CONTROL row at once, indexed among the rows of
// no processor, and syncs it before it returns; a row the format cannot
// hold is refused and nothing is written; after Close it is refused with
// ErrClosed. The CONTROL row has no problem.
func TestControlWritesARowAndSyncsIt(t *testing.T) {
	w := &syncCounter{Memory: store.NewMemory()}
	rec, err := recorder.New(w, recorder.Options{Clock: core.NewStepClock(t0, time.Second),
		Apps: map[string]string{"p": "echo"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC)
	pause := store.Control{Feed: "in", Group: "g", Action: store.ControlPause, Who: "alice", Reason: "deploy", At: at, Until: at.Add(time.Minute)}
	if err := rec.Control(pause); err != nil {
		t.Fatal(err)
	}
	if w.syncs != 1 {
		t.Errorf("%d syncs after Control, want 1", w.syncs)
	}
	if err := rec.Control(store.Control{Feed: "in", Group: "g", Action: store.ControlPause, Who: "alice", At: at}); !errors.Is(err, store.ErrMalformed) {
		t.Errorf("Control without a reason: %v, want ErrMalformed", err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Control(pause); !errors.Is(err, recorder.ErrClosed) {
		t.Errorf("Control after Close: %v, want ErrClosed", err)
	}
	var got []store.Control
	for e, err := range w.ReadOnly().Rows() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == store.KindControl {
			if e.Index != 2 {
				t.Errorf("CONTROL row at index %d, want 2 (after META)", e.Index)
			}
			c, err := store.ControlOf(e)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
	}
	if len(got) != 1 || got[0] != pause {
		t.Errorf("CONTROL rows %+v, want [%+v]", got, pause)
	}
	for _, p := range w.ReadOnly().Problems() { // p's stream is missing: no processor ran
		if p.Row == store.KindControl || p.Kind != store.ProblemMissingStream {
			t.Errorf("problem %v, want none but the missing stream", p)
		}
	}
}

// The recorder's Observer records every seek the engine tells it of
// (engine.Observer.Acted, before the seek takes effect) as the seek's
// CONTROL row, synced before the hook returns, as Recorder.Control does;
// after Close the hook fails (ErrClosed), so the engine refuses the seek.
func TestTheObserverRecordsEachSeekAsItsControlRow(t *testing.T) {
	w := &syncCounter{Memory: store.NewMemory()}
	rec, err := recorder.New(w, recorder.Options{Clock: core.NewStepClock(t0, time.Second),
		Apps: map[string]string{"p": "echo"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	acted := rec.Observer().Acted
	if acted == nil {
		t.Fatal("the recorder's Observer has no Acted hook")
	}
	at := time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC)
	back := engine.OperatorAction{Action: engine.ActionSeek, Feed: "in", Group: "g", Who: "bob", Reason: "recompute", At: at, Before: 20, After: 5}
	if err := acted(back); err != nil {
		t.Fatal(err)
	}
	if w.syncs != 1 {
		t.Errorf("%d syncs after the hook, want 1", w.syncs)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := acted(back); !errors.Is(err, recorder.ErrClosed) {
		t.Errorf("the hook after Close: %v, want ErrClosed", err)
	}
	var got []store.Control
	for e, err := range w.ReadOnly().Rows() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == store.KindControl {
			c, err := store.ControlOf(e)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
	}
	want := store.Control{Feed: "in", Group: "g", Action: store.ControlSeek, Who: "bob", Reason: "recompute", At: at, Before: 20, After: 5}
	if len(got) != 1 || got[0] != want {
		t.Errorf("CONTROL rows %+v, want [%+v]", got, want)
	}
}
