package orders_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/examples/orders"
	"github.com/blackbox-audit/blackbox/store"
)

// A changed version of the processor (its limit lowered from 100.00 to
// 50.00) replays the recording of the old one identically up to o3, the
// first order that the new limit makes an alert of, and diverges there.
func TestAChangedVersionDivergesAtTheFirstInputItTreatsDifferently(t *testing.T) {
	rec := recordMemory(t, inputFile, map[string]string{orders.OptionLimit: "100.00"})

	proven(t, replay(t, rec, map[string]string{orders.OptionLimit: "100.00"}))

	rep := replay(t, rec, map[string]string{orders.OptionLimit: "50.00"})
	if rep.Identical {
		t.Fatal("the changed version replayed identical")
	}
	first := rep.Processors[0].First
	if first == nil {
		t.Fatal("no first divergence")
	}
	if first.Seq != seqO3 || first.Input != `"o3,alice,30.00"` {
		t.Errorf("first divergence at seq %d, input %s; want seq %d, input \"o3,alice,30.00\"", first.Seq, first.Input, seqO3)
	}
	// Its index is the index of o3's input row in the recording.
	var index int64
	for e, err := range rec.Stream(orders.AppName) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind.IsInput() && e.Seq == seqO3 && e.Source == "input" {
			index = e.Index
		}
	}
	if index == 0 || first.Index != index {
		t.Errorf("first divergence at index %d, want o3's row %d", first.Index, index)
	}
	wantGot := []string{
		`totals: {"order":"o3","customer":"alice","amount":"30.00","window":"70.00"}`,
		`alerts: {"kind":"over-limit","customer":"alice","order":"o3","window":"70.00","limit":"50.00"}`,
	}
	if diff := cmp.Diff(wantGot, first.Got); diff != "" {
		t.Errorf("replayed outputs of o3 (-want +got):\n%s", diff)
	}
}

// A restart from a snapshot: run 1 reads the first four lines and stops
// with alice's and bob's windows open; run 2 restores run 1's snapshot
// and reads the whole input again (the same file, the rest appended: the
// same position space), as a restart whose source had committed nothing
// does. The lines run 1 applied are skipped (AlreadyApplied with the
// position its completions recorded), the windows' timers are set again,
// and the windows settle with the orders of both runs, each counted once.
// Run 2's recording starts from the snapshot (its START row) and replays
// identical.
func TestARestartFromASnapshotSkipsWhatWasAppliedAndSettlesTheOpenWindows(t *testing.T) {
	options := map[string]string{orders.OptionLimit: "100.00"}
	input := writeLines(t, "# order,customer,amount", "o1,alice,40.00", "o2,bob,15.50", "o3,alice,30.00")
	first := build(t, options)
	run1 := store.NewMemory()
	got1 := recordLive(t, run1, input, first, false, 0)
	run1.Close()
	if n := len(got1.outputs(orders.SinkTotals)); n != 3 {
		t.Fatalf("run 1 emitted %d totals, want 3 (no window closed)", n)
	}
	snap, err := first.(core.Snapshotter).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(snap, &st); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{
		"windows": map[string]any{
			"alice": map[string]any{"orders": 2.0, "amount": "70.00"},
			"bob":   map[string]any{"orders": 1.0, "amount": "15.50"},
		},
		// o3's line ends at byte 67 of the file; epoch 1 is the file's
		// (filesource.Options.Epoch).
		"applied": true, "epoch": 1.0, "position": map[string]any{"key": "", "offset": 67.0},
	}, st); diff != "" {
		t.Errorf("run 1's snapshot (-want +got):\n%s", diff)
	}

	f, err := os.OpenFile(input, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("o4,carol,12.x\no5,bob,50.00\no6,alice,45.00\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	second := build(t, options)
	if err := second.(core.Snapshotter).Restore(snap); err != nil {
		t.Fatal(err)
	}
	run2 := store.NewMemory()
	got2 := recordLive(t, run2, input, second, true, orders.DefaultWindow)
	run2.Close()
	want := wantOutputs()
	for sink, want := range map[string][]any{orders.SinkTotals: want[orders.SinkTotals][3:], orders.SinkAlerts: want[orders.SinkAlerts]} {
		if diff := cmp.Diff(want, got2.outputs(sink)); diff != "" {
			t.Errorf("run 2's %s (-want +got):\n%s", sink, diff)
		}
	}
	proven(t, replay(t, run2, options))
}

func TestTheAppRefusesUnknownOptionsAndBadValuesWithErrOption(t *testing.T) {
	tests := []struct {
		name    string
		options map[string]string
		wantErr bool
	}{
		{"none", nil, false},
		{"limit and window", map[string]string{"limit": "50", "window": "10m"}, false},
		{"unknown option", map[string]string{"currency": "EUR"}, true},
		{"state is not an option of orders", map[string]string{"state": "x.json"}, true},
		{"limit not a number", map[string]string{"limit": "lots"}, true},
		{"limit zero", map[string]string{"limit": "0.00"}, true},
		{"limit with three places", map[string]string{"limit": "1.005"}, true},
		{"window not a duration", map[string]string{"window": "soon"}, true},
		{"window negative", map[string]string{"window": "-1h"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := orders.App().Build(tt.options)
			if got := errors.Is(err, core.ErrOption); got != tt.wantErr {
				t.Fatalf("Build(%v) = %v; ErrOption %v, want %v", tt.options, err, got, tt.wantErr)
			}
			if err == nil && p == nil {
				t.Fatal("no processor")
			}
		})
	}
}

func TestMoneyReadsAndWritesTwoDecimalPlaces(t *testing.T) {
	tests := []struct {
		in      string
		want    orders.Money
		text    string
		wantErr bool
	}{
		{"12.50", 1250, "12.50", false},
		{"12.5", 1250, "12.50", false},
		{"12", 1200, "12.00", false},
		{"0.07", 7, "0.07", false},
		{"", 0, "", true},
		{"12.", 0, "", true},
		{".5", 0, "", true},
		{"-1.00", 0, "", true},
		{"1.234", 0, "", true},
		{"1e3", 0, "", true},
		{"99999999999999999999", 0, "", true},
	}
	for _, tt := range tests {
		got, err := orders.ParseMoney(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseMoney(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && (got != tt.want || got.String() != tt.text) {
			t.Errorf("ParseMoney(%q) = %d (%s), want %d (%s)", tt.in, got, got, tt.want, tt.text)
		}
	}
}

// Any amount ParseMoney accepts writes back to a text that reads as the
// same amount.
func FuzzParseMoney(f *testing.F) {
	for _, s := range []string{"12.50", "0", "1.5", "", ".", "1.2.3", "007.10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := orders.ParseMoney(s)
		if err != nil {
			return
		}
		back, err := orders.ParseMoney(m.String())
		if err != nil || back != m {
			t.Fatalf("ParseMoney(%q) = %d, written %q, read back %d, %v", s, m, m, back, err)
		}
	})
}

// A recorded input that is not a JSON string is refused by Decode.
func TestDecodeReadsTheRecordedLine(t *testing.T) {
	got, err := orders.Decode([]byte(`"o1,alice,40.00"`))
	if err != nil || got != "o1,alice,40.00" {
		t.Errorf("Decode = %v, %v; want the line", got, err)
	}
	if _, err := orders.Decode([]byte(`{"order":"o1"}`)); err == nil {
		t.Error("Decode took a JSON object")
	}
}
