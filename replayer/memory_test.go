package replayer_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

var raceEnabled bool

// TestReplayMemory replays a CSV recording of many inputs and checks that
// the process stays under 100 MB resident and the heap in use under 32 MB
// while replaying: the replay streams. It uses 100,000 inputs (20,000 under
// the race detector); BLACKBOX_REPLAY_INPUTS=1000000 runs the 1M-input
// check (about a minute; BenchmarkReplayCSV reports the same peaks).
func TestReplayMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("records and replays 100,000 inputs")
	}
	n := 100_000
	if raceEnabled {
		n = 20_000
	}
	if s := os.Getenv("BLACKBOX_REPLAY_INPUTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "r.csv")
	w, err := csvstore.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	recordLedger(t, w, n)
	runtime.GC()
	debug.FreeOSMemory()
	base := vmRSS()
	peak := sampleMemory()
	r, err := csvstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reg := []core.App{apps.LedgerApp()}
	rep, err := replayer.Replay(context.Background(), r, reg, replayer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rss, heap := peak()
	if !rep.Identical || !rep.Complete || rep.Processors[0].Inputs != int64(n) {
		t.Fatalf("replay of %d inputs:\n%s", n, text(t, rep))
	}
	t.Logf("%d inputs: peak VmRSS %.1f MB (%.1f MB before), peak heap in use %.1f MB", n,
		float64(rss)/(1<<20), float64(base)/(1<<20), float64(heap)/(1<<20))
	// The process's resident memory also holds what earlier tests of this
	// process left (and, under the race detector, its shadow memory): the
	// absolute bound is checked only without the race detector; the growth
	// while replaying is checked always.
	if rss > base && rss-base > 100<<20 {
		t.Errorf("resident memory grew by %.1f MB while replaying, want < 100 MB", float64(rss-base)/(1<<20))
	}
	if !raceEnabled && rss > 100<<20 {
		t.Errorf("peak resident memory %.1f MB while replaying, want < 100 MB", float64(rss)/(1<<20))
	}
	if heap > 32<<20 {
		t.Errorf("peak heap in use %.1f MB while replaying, want < 32 MB", float64(heap)/(1<<20))
	}
}
