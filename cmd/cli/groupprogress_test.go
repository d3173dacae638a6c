package cli_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// recordTwoGroups records, into a CSV recording at rec, a run of the
// alerts app (no checkpoint user: the test's hold on slow stays) in two
// groups, fast and slow (processors fast and slow), over
// in's committed read, as recorder.Start sets a feed up (SkipCompleted);
// slow's commits are held at nothing durable (a processing checkpoint
// never marked), so the feed's commit stays before every line while fast's
// own progress follows it. The run stops cleanly once both handled every
// line (the items not handed again counted: they are reported with the
// group's next item, so the test gives each group one after them).
func recordTwoGroups(t *testing.T, in, rec string, lines int64, holdSlow bool) {
	t.Helper()
	w, err := csvstore.Create(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := recorder.New(w, recorder.Options{Apps: map[string]string{"fast": apps.AlertsName, "slow": apps.AlertsName},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src, err := filesource.New(in, filesource.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	group := func(name string) engine.GroupConfig {
		p, err := apps.AlertsApp().New(nil)
		if err != nil {
			t.Fatal(err)
		}
		return engine.GroupConfig{Name: name, Feeds: []string{"input"}, Processors: []engine.ProcessorConfig{{Name: name, Processor: p}}}
	}
	// Both groups dispatched every line: with slow held the feed never
	// settles (its items stay unacknowledged), so the hook says it.
	var mu sync.Mutex
	dispatched := map[string]int64{}
	all := make(chan struct{})
	count := func(group string, n int64) {
		mu.Lock()
		defer mu.Unlock()
		dispatched[group] += n
		if dispatched["fast"] >= lines && dispatched["slow"] >= lines && all != nil {
			close(all)
			all = nil
		}
	}
	wait := all
	obs := r.Observer().Then(engine.Observer{
		AfterDispatch:    func(group string, _ *engine.Input) { count(group, 1) },
		AlreadyCompleted: func(group string, c engine.Completed) { count(group, c.Count()) },
	})
	e, err := engine.New(engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "input", Source: src, QueueSize: 64, SkipCompleted: true}},
		Groups:       []engine.GroupConfig{group("fast"), group("slow")},
		Observer:     obs,
		DrainTimeout: 10 * time.Second,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if holdSlow {
		if _, err := e.Hold("input", "slow"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wait:
	case <-ctx.Done():
		t.Fatalf("not every line dispatched by both groups: %+v", e.Status().Feeds[0].Subscribers)
	}
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestARecordedRestartThatSkipsWhatAGroupCompletedVerifiesComplete
// (per-group progress, on the record; the library path: `blackbox run`
// records one group, whose progress is the feed's commit): a run left
// fast's progress 8 lines ahead of the feed's commit (slow held it); the
// restart hands fast none of them, hands slow all of them again, and its
// recording says so (a COMPLETED row in fast's stream). verify and replay
// call it complete, diff finds it equal to itself, and, stitched after the
// first run, holding fast's every input once as a clean run does; explain
// answers for fast: the 8 items not handed again, completed in an earlier
// run, neither re-delivered nor lost.
func TestARecordedRestartThatSkipsWhatAGroupCompletedVerifiesComplete(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	in := filepath.Join(dir, "in.txt")
	for i := range 8 {
		writeLines(t, in, fmt.Sprintf("acct-%02d,%d", i%3, 10*(i+1)))
	}
	recordTwoGroups(t, in, "run-1.csv", 8, true)
	writeLines(t, in, "acct-01,5", "acct-02,7")
	recordTwoGroups(t, in, "run-2.csv", 10, false)

	for _, args := range [][]string{{"verify", "run-2.csv"}, {"replay", "run-2.csv"}, {"diff", "run-2.csv", "run-2.csv"},
		{"verify", "run-1.csv"}} {
		if code, out := execute(t, context.Background(), args...); code != 0 {
			t.Errorf("%s: exit %d, want 0:\n%s", strings.Join(args, " "), code, out)
		}
	}
	code, out := execute(t, context.Background(), "explain", "run-1.csv,run-2.csv")
	for _, want := range []string{
		"fast <- feed input\n  4 redelivered: none\n  8 items not handed again: completed in an earlier run\n",
		`run 2: 8 items of feed "input" (seqs 1-8,`,
		"slow <- feed input\n  4 redelivered: 8 ",
		"verdict: nothing lost",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("explain: exit %d (want 0), and does it say %q?\n%s", code, want, out)
		}
	}
	clean := filepath.Join(dir, "clean.txt")
	for i := range 8 {
		writeLines(t, clean, fmt.Sprintf("acct-%02d,%d", i%3, 10*(i+1)))
	}
	writeLines(t, clean, "acct-01,5", "acct-02,7")
	recordTwoGroups(t, clean, "clean.csv", 10, false)
	// Stitched, the two runs hold every input of fast once, as a clean
	// run does. (slow's 8 inputs handed again differ: run 1 stopped
	// cleanly with them uncommitted, held by a checkpoint never made
	// durable, which no row of the recording says.)
	_, out = execute(t, context.Background(), "diff", "run-1.csv,run-2.csv", "clean.csv")
	if want := `processor "fast": 10 inputs in A, 10 inputs in B, 10 common: 0 only in A, 0 only in B, 0 different, 0 processed twice, 0 with duplicate outputs` + "\n"; !strings.Contains(out, want) || strings.Contains(out, `processor "fast" differs`) {
		t.Errorf("diff of the stitched runs against a clean run does not say %q for fast:\n%s", want, out)
	}
}
