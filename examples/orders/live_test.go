package orders_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/examples/orders"
)

// The outputs of testdata/orders.txt with limit 100.00, every window closed
// after the last line, by sink.
func wantOutputs() map[string][]any {
	return map[string][]any{
		orders.SinkTotals: {
			orders.Accepted{Order: "o1", Customer: "alice", Amount: 4000, Window: 4000},
			orders.Accepted{Order: "o2", Customer: "bob", Amount: 1550, Window: 1550},
			orders.Accepted{Order: "o3", Customer: "alice", Amount: 3000, Window: 7000},
			orders.Accepted{Order: "o5", Customer: "bob", Amount: 5000, Window: 6550},
			orders.Accepted{Order: "o6", Customer: "alice", Amount: 4500, Window: 11500},
			// The timers, in the order they were set; each reads the
			// cycles' clock once.
			orders.Settled{Customer: "alice", Orders: 3, Amount: 11500, At: t0},
			orders.Settled{Customer: "bob", Orders: 2, Amount: 6550, At: t0.Add(time.Millisecond)},
		},
		orders.SinkAlerts: {
			orders.Alert{Kind: "rejected", Line: "o4,carol,12.x", Reason: `amount "12.x": want a decimal such as 12.50`},
			// Queued by o6, emitted in the reentrant cycle after it.
			orders.Alert{Kind: "over-limit", Customer: "alice", Order: "o6", Window: 11500, Limit: 10000},
		},
	}
}

func TestALiveRunRecordedToCSVAndSQLiteRoutesEachSinkByName(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run"+f.ext)
			w, err := f.create(path)
			if err != nil {
				t.Fatal(err)
			}
			got := recordLive(t, w, inputFile, build(t, map[string]string{orders.OptionLimit: "100.00"}), true, orders.DefaultWindow)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for sink, want := range wantOutputs() {
				if diff := cmp.Diff(want, got.outputs(sink)); diff != "" {
					t.Errorf("sink %s (-want +got):\n%s", sink, diff)
				}
			}
			// o6's alert came from the event it queued: a second cycle.
			if diff := cmp.Diff(map[int64]int{seqO6: 2}, got.reentrant()); diff != "" {
				t.Errorf("inputs that ran reentrant cycles, seq -> cycles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBothRecordingsReplayIdenticalCompleteAndLossless(t *testing.T) {
	options := map[string]string{orders.OptionLimit: "100.00"}
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run"+f.ext)
			w, err := f.create(path)
			if err != nil {
				t.Fatal(err)
			}
			recordLive(t, w, inputFile, build(t, options), true, orders.DefaultWindow)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := f.open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			rep := replay(t, r, options)
			proven(t, rep)
			// Every line and both timers were replayed and compared.
			if p := rep.Processors[0]; p.Inputs != 9 || p.Outputs != 9 {
				t.Errorf("replayed %d inputs and %d outputs, want 9 and 9", p.Inputs, p.Outputs)
			}
		})
	}
}
