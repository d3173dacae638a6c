package recorder_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// events is an ordered log shared by a writer and an app's completions.
type events struct {
	mu  sync.Mutex
	evs []string
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	e.evs = append(e.evs, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.evs...)
}

// applier emits each item and applies it in a completion callback (as an
// app saving its state would), noting it in applied. A completion of an
// item in failOnce fails its first run.
type applier struct {
	ev       *events
	failOnce map[any]bool
	mu       sync.Mutex
	applied  []any
}

func (a *applier) OnEvent(c *core.Cycle, item any) error {
	c.Emit("out", item)
	c.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.failOnce[item] {
			delete(a.failOnce, item)
			if a.ev != nil {
				a.ev.add("complete %v fails", item)
			}
			return fmt.Errorf("%w: saving %v", errFail, item)
		}
		if a.ev != nil {
			a.ev.add("complete %v", item)
		}
		a.applied = append(a.applied, item)
		return nil
	}))
	return nil
}

func (a *applier) appliedItems() []any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]any(nil), a.applied...)
}

// closedLog returns a bounded log of items and a feed reading it.
func closedLog(items ...any) (*memsource.Log, engine.FeedConfig) {
	l := memsource.NewLog(items...)
	l.Close()
	return l, engine.FeedConfig{Name: "log", Source: l.Source(), QueueSize: 64}
}

// TestAnInputsRowsReachTheStoreBeforeItsCompletionsRun: the recording is
// written ahead of what an app makes durable: an input's DELIVERY, input
// and OUTPUT rows are appended before its completion callbacks run, and a
// completion that fails adds its FAILED row after them.
func TestAnInputsRowsReachTheStoreBeforeItsCompletionsRun(t *testing.T) {
	ev := &events{}
	w := &fakeWriter{fail: func(rows []store.Entry) error {
		var kinds []string
		for _, e := range rows {
			if e.Processor != "" {
				kinds = append(kinds, string(e.Kind))
			}
		}
		if len(kinds) > 0 {
			ev.add("append %s", strings.Join(kinds, " "))
		}
		return nil
	}}
	app := &applier{ev: ev, failOnce: map[any]bool{"y": true}}
	_, fc := closedLog("x", "y")
	rec, st := run(t, w, recorder.Options{Apps: map[string]string{"p": "p"}}, func(*recorder.Recorder) engine.Config {
		return engine.Config{Feeds: []engine.FeedConfig{fc},
			Groups: []engine.GroupConfig{group("g", []string{"log"}, 2, pc("p", app))}}
	})
	if err := rec.Err(); err != nil || !st.Lossless {
		t.Fatalf("Err() = %v, lossless %v", err, st.Lossless)
	}
	want := []string{
		"append START",
		"append DELIVERY INLINE OUTPUT", "complete x",
		"append DELIVERY INLINE OUTPUT", "complete y fails", "append FAILED", "complete y",
		"append END",
	}
	if diff := cmp.Diff(want, ev.all()); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if got := problems(w.rows()); len(got) != 0 {
		t.Errorf("integrity problems: %v", got)
	}
}

// failingSyncWriter is a syncWriter whose Sync fails from its (after+1)th call.
type failingSyncWriter struct {
	fakeWriter
	mu    sync.Mutex
	syncs int
	after int
}

func (w *failingSyncWriter) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.syncs++; w.syncs > w.after {
		return fmt.Errorf("fsync: %w", errDiskFull)
	}
	return nil
}

var errDiskFull = errors.New("no space left on device")

// appendsFailAfter makes a fakeWriter's Appends fail from the (n+1)th on.
func appendsFailAfter(n int) *fakeWriter {
	var mu sync.Mutex
	calls := 0
	return &fakeWriter{fail: func([]store.Entry) error {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls > n {
			return fmt.Errorf("write: %w", errDiskFull)
		}
		return nil
	}}
}

// TestAnUnwritableRecordingHoldsTheCommitAndARestartDeliversTheItems: when
// the store cannot take an item's rows (Append or Sync fails: a full disk),
// the item is not dispatched: its completion does not run (it is not
// applied), the source commits nothing past the item before it, the run is
// stalled and not lossless naming the error, and a restart (space freed)
// delivers it and what follows.
func TestAnUnwritableRecordingHoldsTheCommitAndARestartDeliversTheItems(t *testing.T) {
	tests := []struct {
		name string
		w    store.Writer
		opts recorder.Options
	}{
		// META and START (one Append), items 1-3: the 5th Append (item 4) fails.
		{"append", appendsFailAfter(4), recorder.Options{}},
		// A sync after META and START and after each item: the 5th (item 4) fails.
		{"sync", &failingSyncWriter{after: 4}, recorder.Options{SyncEvery: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, fc := closedLog("1", "2", "3", "4", "5", "6")
			app := &applier{}
			rec, st := run(t, tt.w, tt.opts, func(*recorder.Recorder) engine.Config {
				return engine.Config{Feeds: []engine.FeedConfig{fc},
					Groups: []engine.GroupConfig{group("g", []string{"log"}, 1, pc("p", app))}}
			})
			if err := rec.Err(); !errors.Is(err, errDiskFull) {
				t.Errorf("Err() = %v, want the disk error", err)
			}
			if diff := cmp.Diff([]any{"1", "2", "3"}, app.appliedItems()); diff != "" {
				t.Errorf("applied (-want +got):\n%s", diff)
			}
			if got := log.Committed(); got != 3 {
				t.Errorf("committed offset %d, want 3", got)
			}
			fs := st.Feeds[0]
			if st.Lossless || st.Settled || fs.Stalled == nil || !strings.Contains(*fs.Stalled, errDiskFull.Error()) {
				t.Errorf("lossless %v, settled %v, stalled %v; want false, false and the disk error", st.Lossless, st.Settled, fs.Stalled)
			}

			// Space freed: a restart delivers items 4-6 and records them.
			w2 := &fakeWriter{}
			app2 := &applier{}
			fc2 := engine.FeedConfig{Name: "log", Source: log.Source(), QueueSize: 64} // the same log, resumed
			rec2, st2 := run(t, w2, recorder.Options{}, func(*recorder.Recorder) engine.Config {
				return engine.Config{Feeds: []engine.FeedConfig{fc2},
					Groups: []engine.GroupConfig{group("g", []string{"log"}, 1, pc("p", app2))}}
			})
			if err := rec2.Err(); err != nil || !st2.Lossless || !st2.Settled {
				t.Fatalf("restart: Err() = %v, lossless %v, settled %v", err, st2.Lossless, st2.Settled)
			}
			if diff := cmp.Diff([]any{"4", "5", "6"}, app2.appliedItems()); diff != "" {
				t.Errorf("the restart applied (-want +got):\n%s", diff)
			}
			var inputs []string
			for _, e := range w2.stream("p") {
				if e.Kind == store.KindInline {
					inputs = append(inputs, string(e.Payload))
				}
			}
			if diff := cmp.Diff([]string{`"4"`, `"5"`, `"6"`}, inputs); diff != "" {
				t.Errorf("the restart recorded (-want +got):\n%s", diff)
			}
		})
	}
}

// badSnapshot is an applier whose Snapshot fails.
type badSnapshot struct{ *applier }

func (badSnapshot) Snapshot() ([]byte, error) { return nil, errors.New("state not serialisable") }
func (badSnapshot) Restore([]byte) error      { return nil }

// TestAStreamTheRecorderCannotStartFailsTheRun: a processor whose START row
// cannot be written (its Snapshot fails, or the store refuses the row) is
// never silently left out: its group handles nothing, the source commits
// nothing, and the run is stalled and not lossless.
func TestAStreamTheRecorderCannotStartFailsTheRun(t *testing.T) {
	refuseStart := &fakeWriter{fail: func(rows []store.Entry) error {
		if slices.ContainsFunc(rows, func(e store.Entry) bool { return e.Kind == store.KindStart }) {
			return fmt.Errorf("write: %w", errDiskFull)
		}
		return nil
	}}
	tests := []struct {
		name string
		w    *fakeWriter
		proc func(*applier) core.Processor
	}{
		{"snapshot fails", &fakeWriter{}, func(a *applier) core.Processor { return badSnapshot{a} }},
		{"START not written", refuseStart, func(a *applier) core.Processor { return a }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, fc := closedLog("1", "2", "3")
			app := &applier{}
			rec, st := run(t, tt.w, recorder.Options{}, func(*recorder.Recorder) engine.Config {
				return engine.Config{Feeds: []engine.FeedConfig{fc},
					Groups: []engine.GroupConfig{group("g", []string{"log"}, 1, pc("p", tt.proc(app)))}}
			})
			var be *recorder.BrokenError
			if err := rec.Err(); !errors.As(err, &be) || be.Processor != "p" {
				t.Errorf("Err() = %v, want a *BrokenError of p", err)
			}
			if got := app.appliedItems(); len(got) != 0 {
				t.Errorf("applied %v, want nothing", got)
			}
			if got := log.Committed(); got != 0 {
				t.Errorf("committed offset %d, want 0", got)
			}
			fs := st.Feeds[0]
			if st.Lossless || st.Settled || fs.Stalled == nil || !strings.Contains(*fs.Stalled, "consumer g/log failed") {
				t.Errorf("lossless %v, settled %v, stalled %v; want false, false, consumer g/log failed", st.Lossless, st.Settled, fs.Stalled)
			}
			if got := len(tt.w.stream("p")); got != 0 {
				t.Errorf("p's stream holds %d rows, want none", got)
			}
		})
	}
}
