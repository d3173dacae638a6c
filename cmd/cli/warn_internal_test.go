package cli

import (
	"bytes"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
)

// TestAWarningIsOneStderrLineWithoutTheEnginesPrefix: a run's warnings
// reach stderr as "blackbox: warning: <message>" lines, the engine's prefix
// dropped, attributes (with their groups) after the message, and records
// below Warn left out.
func TestAWarningIsOneStderrLineWithoutTheEnginesPrefix(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(newWarnHandler(&out, ""))
	log.Warn(`blackbox engine: feed "in" seq 5: item skipped`)
	log.Info("not shown")
	log.With("feed", "in").WithGroup("pointer").Warn("filesource: corrupt", "offset", 7)
	want := "blackbox: warning: feed \"in\" seq 5: item skipped\n" +
		"blackbox: warning: filesource: corrupt feed=in pointer.offset=7\n"
	if got := out.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestWarningsFromManyGoroutinesAreWholeLines: the engine's goroutines
// warn at once, through handlers derived from one (With, WithGroup); a
// writer that is not safe for concurrent use (a test's buffer) gets one
// line at a time (the race detector checks the writes; the lines are
// whole).
func TestWarningsFromManyGoroutinesAreWholeLines(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(newWarnHandler(&out, ""))
	loggers := []*slog.Logger{log, log.With("feed", "in"), log.WithGroup("g")}
	const each = 200
	var wg sync.WaitGroup
	for _, l := range loggers {
		wg.Go(func() {
			for range each {
				l.Warn("w", "k", 1)
			}
		})
	}
	wg.Wait()
	want := map[string]int{"blackbox: warning: w k=1": each, "blackbox: warning: w feed=in k=1": each, "blackbox: warning: w g.k=1": each}
	got := map[string]int{}
	for l := range strings.Lines(out.String()) {
		got[strings.TrimSuffix(l, "\n")]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("lines %v, want %v", got, want)
	}
}
