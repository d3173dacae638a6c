package recorder_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// TestTheFirstAppendHoldsMetaAndTheStartOfEveryStream: New writes nothing;
// the first Append holds META and the START row of every stream META lists
// (a group of four workers: one stream each), and the JOURNAL rows of the
// items published before it, and nothing else: so that a process killed at
// its start leaves no recording (an empty file) or one whose every stream
// started, never META alone or some of the STARTs. META used to be written
// by New with an Append of its own, and each START with one more.
func TestTheFirstAppendHoldsMetaAndTheStartOfEveryStream(t *testing.T) {
	const workers = 4
	var streams []string
	for w := range workers {
		streams = append(streams, core.WorkerStream("p", w))
	}
	w := &fakeWriter{}
	newP := func() (core.Processor, error) { return &testProc{}, nil }
	rec, st := run(t, w, apps(streams...), func(rec *recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds: []engine.FeedConfig{batchFeed("in", rec.Journal(), strs(20, func(i int) string { return fmt.Sprint(i) })...)},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: workers, Order: engine.OrderNone,
				Processors: []engine.ProcessorConfig{{Name: "p", New: newP}}}},
		}
	})
	if err := rec.Err(); err != nil || !st.Lossless {
		t.Fatalf("Err() = %v, lossless %v", err, st.Lossless)
	}
	w.mu.Lock()
	calls := slices.Clone(w.calls)
	w.mu.Unlock()
	if len(calls) == 0 {
		t.Fatal("nothing written")
	}
	first := calls[0]
	var started []string
	for i, e := range first {
		switch {
		case i == 0 && e.Kind == store.KindMeta, e.Kind == store.KindJournal:
		case e.Kind == store.KindStart:
			started = append(started, e.Processor)
		default:
			t.Errorf("the first Append holds %s (row %d of %d), want META first, then the STARTs and JOURNAL rows only",
				describe(e), i+1, len(first))
		}
	}
	slices.Sort(started)
	if !slices.Equal(started, streams) {
		t.Errorf("the first Append starts the streams %v, want every one META lists: %v", started, streams)
	}
	for _, c := range calls[1:] {
		for _, e := range c {
			if e.Kind == store.KindMeta || e.Kind == store.KindStart {
				t.Errorf("a later Append holds %s", describe(e))
			}
		}
	}
	if got := problems(w.rows()); len(got) != 0 {
		t.Errorf("integrity problems: %v", got)
	}
}
