package apps_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// TestRecordedRun runs both apps on a live engine (a positioned, journalled
// feed "input") in RECORD mode: the recording's one problem is the
// ledger's recorded failure (the "fail" line's FAILED row, past which its
// stream is not reproducible), every kind of line leaves the rows it
// should, and every recorded input decodes back to its line.
func TestRecordedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lines := []any{"alice,100", "bob,-2000", "transfer,alice,bob,40", "oops", "fail", "tick", "carol,5"}
		log := memsource.NewLog(lines...)
		log.Close()
		path := filepath.Join(t.TempDir(), "ledger.json")
		ledger, err := apps.LedgerApp().Build(map[string]string{"state": path})
		if err != nil {
			t.Fatal(err)
		}
		alerts, err := apps.AlertsApp().Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		mem := store.NewMemory()
		rec, err := recorder.New(mem, recorder.Options{Apps: map[string]string{"ledger": "ledger", "alerts": "alerts"}})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{
			Feeds: []engine.FeedConfig{{Name: "input", Source: log.Source(), QueueSize: 16, Journal: rec.Journal()}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"input"}, Retry: engine.RetryPolicy{Attempts: 2},
				Processors: []engine.ProcessorConfig{{Name: "ledger", Processor: ledger}, {Name: "alerts", Processor: alerts}}}},
			Observer: rec.Observer(),
			Logger:   slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := e.RunSettled(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if ps := mem.Problems(); len(ps) != 1 || ps[0].Kind != store.ProblemFailed || ps[0].Processor != "ledger" {
			t.Fatalf("problems: %v, want the ledger's FAILED row's alone", ps)
		}
		kinds := func(p string) []string {
			var ks []string
			for row, err := range mem.Stream(p) {
				if err != nil {
					t.Fatal(err)
				}
				if row.Kind == store.KindDelivery {
					continue
				}
				ks = append(ks, string(row.Kind))
				if row.Kind == store.KindIndexed {
					j, err := mem.Journal(row.Source, row.Seq)
					if err != nil {
						t.Fatal(err)
					}
					line, err := apps.Decode(j.Payload)
					if err != nil || line != lines[row.Seq-1] {
						t.Errorf("journal seq %d decodes to %v (%v), want %v", row.Seq, line, err, lines[row.Seq-1])
					}
				}
			}
			return ks
		}
		wantLedger := []string{"START",
			"INDEXED", "OUTPUT", // alice,100
			"INDEXED", "OUTPUT", // bob,-2000
			"INDEXED", "OUTPUT", "OUTPUT", // transfer: debit, credit
			"INDEXED", "OUTPUT", // oops: rejected
			"FAILED",          // fail
			"INDEXED",         // tick
			"TIMER", "OUTPUT", // the summary
			"INDEXED", "OUTPUT", // carol,5
			"END"}
		if diff := cmp.Diff(wantLedger, kinds("ledger")); diff != "" {
			t.Errorf("ledger (-want +got):\n%s", diff)
		}
		wantAlerts := []string{"START", "INDEXED", "INDEXED", "OUTPUT", "INDEXED", "INDEXED", "INDEXED", "INDEXED", "INDEXED", "END"}
		if diff := cmp.Diff(wantAlerts, kinds("alerts")); diff != "" {
			t.Errorf("alerts (-want +got):\n%s", diff)
		}
		want := apps.LedgerState{Balances: map[string]int64{"alice": 60, "bob": -1960, "carol": 5}, Applied: 5, Epoch: 1, Offset: 7}
		if diff := cmp.Diff(want, readState(t, path)); diff != "" {
			t.Errorf("saved state (-want +got):\n%s", diff)
		}
	})
}
