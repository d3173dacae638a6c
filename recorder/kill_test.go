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
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// killRun records a run of feed "log" (journalled, a closed log of items)
// into w, with group "g" of processor "p" on workers (New gives each
// worker's instance); item "block" waits for gate (ignoring its context).
// Once it is in flight and the other items are done or queued, the run is
// killed for reason (abandoning what is in flight, or letting it finish),
// the gate opened, the engine stopped and the recorder closed.
func killRun(t *testing.T, w *fakeWriter, workers int, abandon bool, reason string, items ...any) {
	t.Helper()
	var names []string
	for i := range max(1, workers) {
		if workers > 1 {
			names = append(names, core.WorkerStream("p", i))
		} else {
			names = append(names, "p")
		}
	}
	apps := map[string]string{}
	for _, n := range names {
		apps[n] = "app"
	}
	rec, err := recorder.New(w, recorder.Options{Apps: apps, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gate, entered := testutil.NewGate(t), make(chan struct{})
	newP := func() (core.Processor, error) {
		return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			if ev == "block" {
				close(entered)
				gate.Wait()
			}
			c.Emit("out", ev)
			return nil
		}), nil
	}
	g := engine.GroupConfig{Name: "g", Feeds: []string{"log"}, Workers: workers, Order: engine.OrderNone, MaxGap: 2,
		Processors: []engine.ProcessorConfig{{Name: "p", New: newP}}}
	if workers <= 1 {
		p, _ := newP()
		g.Processors[0].Processor = p
	}
	e, err := engine.New(engine.Config{
		Feeds:        []engine.FeedConfig{logFeed("log", rec.Journal(), items...)},
		Groups:       []engine.GroupConfig{g},
		Observer:     rec.Observer(),
		DrainTimeout: time.Second,
		KillAbandon:  abandon,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	synctest.Wait() // the source published and journalled every item; the group took what it could
	if err := e.Kill(reason); err != nil {
		t.Fatal(err)
	}
	gate.Open()
	if err := e.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after Kill: %v", err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
}

// endsOf returns the END rows' details, read (store.EndOf), by stream.
func endsOf(t *testing.T, rows []store.Entry) map[string]store.End {
	t.Helper()
	out := map[string]store.End{}
	for _, r := range rows {
		if r.Kind == store.KindEnd {
			end, err := store.EndOf(r)
			if err != nil {
				t.Fatal(err)
			}
			out[r.Processor] = end
		}
	}
	return out
}

func inputSeqs(rows []store.Entry) []int64 {
	var seqs []int64
	for _, r := range rows {
		if r.Kind.IsInput() {
			seqs = append(seqs, r.Seq)
		}
	}
	slices.Sort(seqs)
	return seqs
}

// TestAKilledRunsEndRowsSayKilledAndWhy: a run killed with item 2 in
// flight and 3-5 queued, abandoning what is in flight: item 2 has no row,
// and item 1, handled before the kill but still waiting for its batch to
// be written, is written and not committed (no completion runs and no
// item counts after an abandoning kill). The END row says the run was
// killed and why, and lists 1-5 as unprocessed: the recording is complete
// (no missing-input problem: they were not committed, and the next run
// delivers them). When the group took item 1 in a batch of its own
// (before the source published the rest: the scheduler decides), item 1
// completed and was committed before the kill: then END lists 2-5, and
// the COMMIT of 1 is the only one.
func TestAKilledRunsEndRowsSayKilledAndWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &fakeWriter{}
		killRun(t, w, 1, true, "operator: bad deploy", "a", "block", "c", "d", "e")
		rows := w.rows()
		if got := inputSeqs(rows); !slices.Equal(got, []int64{1}) {
			t.Errorf("inputs %v, want seq 1 only", got)
		}
		first := int64(1) // the first seq not committed
		for _, r := range rows {
			if r.Kind == store.KindCommit {
				if r.Seq != 1 || first != 1 {
					t.Errorf("COMMIT of seq %d: only item 1, completed in a batch of its own, may be", r.Seq)
				}
				first = 2
			}
		}
		want := map[string]store.End{"p": {Killed: "operator: bad deploy", Unprocessed: []store.Unprocessed{{Feed: "log", First: first, Last: 5}}}}
		if d := cmp.Diff(want, endsOf(t, rows)); d != "" {
			t.Errorf("END rows (-want +got):\n%s", d)
		}
		if ps := problems(rows); len(ps) != 0 {
			t.Errorf("problems: %v", ps)
		}
	})
}

// TestAKillThatLetsItsItemFinishCommitsThemAndSaysKilled: the same run
// killed letting the item in flight finish: 1 and 2 are processed and
// committed, END says killed and lists only 3-5.
func TestAKillThatLetsItsItemFinishCommitsThemAndSaysKilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &fakeWriter{}
		killRun(t, w, 1, false, "operator", "a", "block", "c", "d", "e")
		rows := w.rows()
		if got := inputSeqs(rows); !slices.Equal(got, []int64{1, 2}) {
			t.Errorf("inputs %v, want 1 and 2", got)
		}
		var committed int64
		for _, r := range rows {
			if r.Kind == store.KindCommit {
				committed = r.Seq
			}
		}
		if committed != 2 {
			t.Errorf("last COMMIT of seq %d, want 2", committed)
		}
		want := map[string]store.End{"p": {Killed: "operator", Unprocessed: []store.Unprocessed{{Feed: "log", First: 3, Last: 5}}}}
		if d := cmp.Diff(want, endsOf(t, rows)); d != "" {
			t.Errorf("END rows (-want +got):\n%s", d)
		}
		if ps := problems(rows); len(ps) != 0 {
			t.Errorf("problems: %v", ps)
		}
	})
}

// TestAKilledRunOnWorkersIsCompleteAndListsWhatItLeft: killed with seq 2
// in flight on one of two workers (abandoned) while the other handled 1, 3
// and 4 beyond it (MaxGap 2) and 5 and 6 wait in the queue: every worker's
// END says killed, and together they list 2, 5 and 6 as unprocessed, so
// the recording is complete: seq 2, with no row, is not called missing.
func TestAKilledRunOnWorkersIsCompleteAndListsWhatItLeft(t *testing.T) {
	for _, abandon := range []bool{true, false} {
		t.Run(map[bool]string{true: "abandon", false: "finish"}[abandon], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fakeWriter{}
				killRun(t, w, 2, abandon, "drill", "a", "block", "c", "d", "e", "f")
				rows := w.rows()
				wantIn := []int64{1, 3, 4}
				if !abandon {
					wantIn = []int64{1, 2, 3, 4} // the item in flight finished
				}
				if got := inputSeqs(rows); !slices.Equal(got, wantIn) {
					t.Errorf("inputs %v, want %v", got, wantIn)
				}
				ends := endsOf(t, rows)
				if len(ends) != 2 {
					t.Fatalf("END rows %v, want one per worker", ends)
				}
				for stream, end := range ends {
					if end.Killed != "drill" {
						t.Errorf("%s: END %+v does not say killed: drill", stream, end)
					}
				}
				if ps := problems(rows); len(ps) != 0 {
					t.Errorf("problems: %v", ps)
				}
			})
		})
	}
}
