package orders_test

import (
	"bufio"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/examples/orders"
	"github.com/blackbox-audit/blackbox/testkit"
)

// lines are the lines of testdata/orders.txt.
func lines(t *testing.T) []any {
	t.Helper()
	f, err := os.Open(inputFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWithTheTestKitNoWindowClosesUntilTheClockSaysSo is the processor's
// test written with package testkit: the lines sent, every window open and
// nothing settled; the timer clock moved a window on, every window
// settled; the recording (made with limit 100.00, which its META holds)
// replays identical with no option given.
func TestWithTheTestKitNoWindowClosesUntilTheClockSaysSo(t *testing.T) {
	run := testkit.Start(t, testkit.Config{App: orders.App(), Options: map[string]string{orders.OptionLimit: "100.00"}})
	run.Sink().Only = []string{orders.SinkTotals, orders.SinkAlerts}
	run.Send(lines(t)...)
	run.Idle()
	want := wantOutputs()
	accepted := want[orders.SinkTotals][:5] // the Settled outputs come once the windows close
	if diff := cmp.Diff(accepted, run.Sink().Outputs(orders.SinkTotals)); diff != "" {
		t.Errorf("totals before the windows close (-want +got):\n%s", diff)
	}
	run.Advance(orders.DefaultWindow)
	for sink, w := range want {
		if diff := cmp.Diff(w, run.Sink().Outputs(sink)); diff != "" {
			t.Errorf("sink %s once the windows closed (-want +got):\n%s", sink, diff)
		}
	}
	rec := run.Stop()
	testkit.ReplaysIdentical(t, rec, orders.App())
}
