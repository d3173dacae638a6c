package orders_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/examples/orders"
	"github.com/blackbox-audit/blackbox/golden"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

var update = flag.Bool("update", false, "re-record the golden cases of testdata/golden")

const goldenDir = "testdata/golden"

// Every golden case of the orders app (testdata/golden/*: its options in
// case.json) still replays identical. After a deliberate change of
// outputs: go test -run TestTheGoldenCasesStillReproduce -update, and
// review the diff of the recordings.
func TestTheGoldenCasesStillReproduce(t *testing.T) {
	if *update {
		if err := golden.Update(goldenDir, orders.App()); err != nil {
			t.Fatal(err)
		}
	}
	golden.Check(t, goldenDir, orders.App())
}

// golden.Update records a case whose processor sets day-long timers: every
// timer fires (its TIMER row and its settlement are in the recording)
// and the update takes no wall-clock time for them (golden moves its timer
// clock to the next due timer; waiting out a single timer would take a day,
// and golden gives up on a step after 30 s).
func TestAGoldenUpdateFiresDayLongTimersWithoutWaitingForThem(t *testing.T) {
	dir := t.TempDir()
	c := filepath.Join(dir, "day-windows")
	if err := os.Mkdir(c, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		golden.CaseFile:  `{"app": "orders", "options": {"window": "24h"}}`,
		golden.InputFile: "o1,alice,40.00\no2,bob,15.50\no3,alice,30.00\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(c, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := golden.Update(dir, orders.App()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the update took %s", took)
	}
	r, err := csvstore.Open(filepath.Join(c, golden.Recording))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	timers, settled := 0, 0
	for e, err := range r.Stream(orders.AppName) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Kind == store.KindTimer:
			timers++
		case e.Kind == store.KindOutput && e.Source == orders.SinkTotals && strings.HasPrefix(string(e.Payload), `{"customer":`):
			settled++
		}
	}
	// Each line opens a window (golden fires a line's timers before the
	// next line), so three windows settle.
	if timers != 3 || settled != 3 {
		t.Errorf("the recording holds %d TIMER rows and %d settlements, want 3 and 3", timers, settled)
	}
	golden.Check(t, dir, orders.App())
}
