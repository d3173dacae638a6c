package recorder_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
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

// stopper emits each item; on "block" it tells started, waits until its
// cycle's context is cancelled (Stop's drain is over) and fails with it:
// the item is not dispatched, and the group takes nothing after it.
type stopper struct{ started chan struct{} }

func (s *stopper) OnEvent(c *core.Cycle, ev any) error {
	if ev == "block" {
		close(s.started)
		<-c.Context().Done()
		return c.Context().Err()
	}
	c.Emit("out", ev)
	return nil
}

// TestACleanStopThatLeftItemsQueuedSaysSoInItsEndRows: a clean stop whose
// drain times out leaves journalled items in the group's queue (seqs 3-5)
// and cuts the one being handled (seq 2, no row): not dispatched, never
// committed (the next run delivers them). The END row
// lists them (store.Unprocessed), so the Checker does not call them
// missing-input: the recording is whole and says what it did not process.
// Before, the END row said nothing and the recording of a clean stop was
// reported as missing inputs (verify: not complete; explain: lost).
func TestACleanStopThatLeftItemsQueuedSaysSoInItsEndRows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &fakeWriter{}
		rec, err := recorder.New(w, recorder.Options{Apps: map[string]string{"p": "app"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s := &stopper{started: make(chan struct{})}
		e, err := engine.New(engine.Config{
			Feeds:        []engine.FeedConfig{logFeed("log", rec.Journal(), "a", "block", "c", "d", "e")},
			Groups:       []engine.GroupConfig{group("g", []string{"log"}, 1, pc("p", s))},
			Observer:     rec.Observer(),
			DrainTimeout: time.Second,
			Logger:       slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-s.started
		synctest.Wait() // the source published and journalled every item
		if err := e.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		rows := w.rows()
		var inputs []int64
		var end store.Entry
		for _, r := range rows {
			switch r.Kind {
			case store.KindIndexed, store.KindInline:
				inputs = append(inputs, r.Seq)
			case store.KindCommit:
				if r.Seq > 1 {
					t.Errorf("COMMIT of seq %d: seqs 2-5 were not processed", r.Seq)
				}
			case store.KindEnd:
				end = r
			}
		}
		if d := cmp.Diff([]int64{1}, inputs); d != "" {
			t.Errorf("inputs (-want +got):\n%s", d)
		}
		got, err := store.UnprocessedOf(end)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]store.Unprocessed{{Feed: "log", First: 2, Last: 5}}, got); d != "" {
			t.Errorf("END %+v lists (-want +got):\n%s", end, d)
		}
		if ps := problems(rows); len(ps) != 0 {
			t.Errorf("problems: %v", ps)
		}
	})
}
