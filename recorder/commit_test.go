package recorder_test

import (
	"slices"
	"testing"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// onlyCommits reports whether an Append call wrote COMMIT rows alone.
func onlyCommits(call []store.Entry) bool {
	for _, e := range call {
		if e.Kind != store.KindCommit {
			return false
		}
	}
	return len(call) > 0
}

// TestCommitRowsRideOnTheRowsWrittenAnywayAfterTheInputsTheyCover: a run
// whose source commits records COMMIT rows: each in an Append of other rows
// (only those left at Close on their own, in one last call), each after
// the input rows of every seq it covers, indexed among META and JOURNAL
// rows with no gap, the last one covering every item.
func TestCommitRowsRideOnTheRowsWrittenAnywayAfterTheInputsTheyCover(t *testing.T) {
	const n = 40
	items := make([]any, n)
	for i := range items {
		items[i] = "x"
	}
	w := &fakeWriter{}
	rec, _ := run(t, w, recorder.Options{Apps: map[string]string{"p": "app"}}, func(rec *recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{logFeed("log", rec.Journal(), items...)},
			Groups: []engine.GroupConfig{group("g", []string{"log"}, 1, pc("p", &testProc{}))},
		}
	})
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	calls := slices.Clone(w.calls)
	w.mu.Unlock()
	for i, c := range calls {
		if onlyCommits(c) && i != len(calls)-1 {
			t.Errorf("Append call %d of %d holds COMMIT rows alone: an extra write", i+1, len(calls))
		}
	}
	rows := w.rows()
	if ps := problems(rows); len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	var written, last int64
	commits := 0
	for _, e := range rows {
		switch e.Kind {
		case store.KindIndexed, store.KindInline:
			written = max(written, e.Seq)
		case store.KindCommit:
			commits++
			if e.Seq > written {
				t.Errorf("COMMIT of seq %d before the input rows of seq %d", e.Seq, e.Seq)
			}
			if e.Seq < last || e.Source != "log" || e.Epoch != 1 || e.Offset != e.Seq {
				t.Errorf("COMMIT %+v after seq %d: want feed log, epoch 1, offset = seq, in order", e, last)
			}
			last = e.Seq
		}
	}
	if commits == 0 || last != n {
		t.Errorf("%d COMMIT rows, the last of seq %d; want some, the last of seq %d", commits, last, n)
	}
}

// TestNoCommitsRecordsNoCommitRows: with Options.NoCommits a run whose
// source commits records no COMMIT row.
func TestNoCommitsRecordsNoCommitRows(t *testing.T) {
	w := &fakeWriter{}
	rec, _ := run(t, w, recorder.Options{Apps: map[string]string{"p": "app"}, NoCommits: true}, func(rec *recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{logFeed("log", nil, "a", "b", "c")},
			Groups: []engine.GroupConfig{group("g", []string{"log"}, 1, pc("p", &testProc{}))},
		}
	})
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	for _, e := range w.rows() {
		if e.Kind == store.KindCommit {
			t.Fatalf("COMMIT row %+v with NoCommits", e)
		}
	}
	if ps := problems(w.rows()); len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
}
