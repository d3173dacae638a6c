package apps_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// twoBatchSource publishes its first lines as one batch (at offsets 1..),
// then, once next is closed, the rest as another.
type twoBatchSource struct {
	first, rest []any
	next        chan struct{}
}

func (s *twoBatchSource) DefaultPolicy() engine.Policy { return engine.Pause() }

func (s *twoBatchSource) Run(ctx context.Context, in *engine.Intake) error {
	publish := func(items []any, from int) {
		pos := make([]core.Position, len(items))
		for i := range pos {
			pos[i] = core.Position{Offset: int64(from + i + 1)}
		}
		if k := in.TryPublishBatch(items, pos); k != len(items) {
			panic(fmt.Sprintf("TryPublishBatch took %d of %d", k, len(items)))
		}
	}
	publish(s.first, 0)
	select {
	case <-s.next:
	case <-ctx.Done():
		return nil
	}
	publish(s.rest, len(s.first))
	<-ctx.Done()
	return nil
}

// errStoreDown is the failingWriter's error.
var errStoreDown = errors.New("store down")

// failingWriter counts the Appends that hold input rows and fails those
// holding an input of a sequence above okThrough.
type failingWriter struct {
	okThrough int64

	mu     sync.Mutex
	inputs int
}

func (w *failingWriter) Sync() error { return nil }

func (w *failingWriter) Append(rows ...store.Entry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.ContainsFunc(rows, func(e store.Entry) bool { return e.Kind.IsInput() }) {
		return nil
	}
	w.inputs++
	if store.LastSeq(rows) > w.okThrough {
		return errStoreDown
	}
	return nil
}

func (w *failingWriter) Close() error { return nil }

// TestTheBatchedLedgerRecordsABatchInOneWriteAndSavesOnlyLinesWhoseRowsWereWritten:
// with --state in batches, the ledger's completions are deferred, so the
// lines a group finds ready together are recorded with one Append; when
// the next batch's write fails, none of its completions run and the state
// saved at the stop holds the postings of the written lines only, through
// the last written offset.
func TestTheBatchedLedgerRecordsABatchInOneWriteAndSavesOnlyLinesWhoseRowsWereWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		var first, rest []any
		want := apps.LedgerState{Balances: map[string]int64{}, Applied: n, Epoch: 0, Offset: n}
		for i := range 2 * n {
			account, amount := "acct-"+strconv.Itoa(i%3), int64(i+1)
			line := account + "," + strconv.FormatInt(amount, 10)
			if i < n {
				first = append(first, line)
				want.Balances[account] += amount
			} else {
				rest = append(rest, line)
			}
		}
		path := filepath.Join(t.TempDir(), "state.json")
		ledger, err := apps.LedgerApp().Build(map[string]string{apps.OptionState: path, apps.OptionStateEvery: "1000"})
		if err != nil {
			t.Fatal(err)
		}
		w := &failingWriter{okThrough: n}
		rec, err := recorder.New(w, recorder.Options{Apps: map[string]string{"ledger": "ledger"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		src := &twoBatchSource{first: first, rest: rest, next: make(chan struct{})}
		e, err := engine.New(engine.Config{
			Feeds:    []engine.FeedConfig{{Name: "input", Source: src, QueueSize: 64}},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"input"}, Processors: []engine.ProcessorConfig{{Name: "ledger", Processor: ledger}}}},
			Observer: rec.Observer(),
			Logger:   slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		close(src.next)
		synctest.Wait()
		if err := e.Stop(t.Context()); !errors.Is(err, engine.ErrObserver) || !errors.Is(err, errStoreDown) {
			t.Errorf("Stop: %v, want ErrObserver wrapping the store's error", err)
		}
		_ = rec.Close()
		w.mu.Lock()
		inputs := w.inputs
		w.mu.Unlock()
		if inputs != 2 {
			t.Errorf("the two batches of %d lines took %d Appends, want 2", n, inputs)
		}
		want.Epoch = readState(t, path).Epoch // the source's epoch is not the point here
		if got := readState(t, path); !equalState(got, want) {
			t.Errorf("saved state %+v, want %+v (the first batch's lines only)", got, want)
		}
	})
}

// failAccount is a sink that fails the writes of the ledger's postings to
// account: the first `times` of them (all, with times < 0).
type failAccount struct {
	account string
	times   int
}

func (s *failAccount) Write(_, _ string, out any) error {
	if p, ok := out.(apps.Posting); ok && p.Account == s.account && s.times != 0 {
		s.times--
		return errors.New("sink down")
	}
	return nil
}

// TestTheBatchedLedgerTakesBackOnlyTheFailedTriesPostings: with its
// completions deferred (several deliveries open at once), a line whose try
// failed after posting takes back only that try's posting when it is tried
// again, and a line that failed every try (skipped) has its posting taken
// back when the next line completes: the saved and the in-memory state hold
// every other line once.
func TestTheBatchedLedgerTakesBackOnlyTheFailedTriesPostings(t *testing.T) {
	tests := []struct {
		name  string
		times int // the failures of the writes of b's postings
		want  map[string]int64
	}{
		{name: "retried once", times: 1, want: map[string]int64{"a": 1, "b": 2, "c": 3}},
		{name: "skipped", times: -1, want: map[string]int64{"a": 1, "c": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "state.json")
				ledger, err := apps.NewLedger(apps.LedgerOptions{StatePath: path, SaveEvery: 1000})
				if err != nil {
					t.Fatal(err)
				}
				rec, err := recorder.New(store.NewMemory(), recorder.Options{Apps: map[string]string{"ledger": "ledger"}, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				src := &twoBatchSource{first: []any{"a,1", "b,2", "c,3"}, next: make(chan struct{})}
				e, err := engine.New(engine.Config{
					Feeds: []engine.FeedConfig{{Name: "input", Source: src, QueueSize: 64}},
					Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"input"}, Retry: engine.RetryPolicy{Attempts: 2},
						Processors: []engine.ProcessorConfig{{Name: "ledger", Processor: ledger}}}},
					Observer: rec.Observer(),
					Sink:     &failAccount{account: "b", times: tt.times},
					Logger:   slog.New(slog.DiscardHandler),
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if err := e.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := rec.Close(); err != nil {
					t.Fatal(err)
				}
				saved := readState(t, path)
				want := apps.LedgerState{Balances: tt.want, Applied: int64(len(tt.want)), Epoch: saved.Epoch, Offset: 3}
				if !equalState(saved, want) {
					t.Errorf("saved state %+v, want %+v", saved, want)
				}
				if got := ledger.State(); !equalState(got, want) {
					t.Errorf("state %+v, want %+v", got, want)
				}
			})
		})
	}
}
