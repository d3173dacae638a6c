package cli

import (
	"bytes"
	"log/slog"
	"testing"
)

// TestAWarningIsOneStderrLineWithoutTheEnginesPrefix: a run's warnings
// reach stderr as "blackbox: warning: <message>" lines, the engine's prefix
// dropped, attributes (with their groups) after the message, and records
// below Warn left out.
func TestAWarningIsOneStderrLineWithoutTheEnginesPrefix(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(&warnHandler{w: &out})
	log.Warn(`blackbox engine: feed "in" seq 5: item skipped`)
	log.Info("not shown")
	log.With("feed", "in").WithGroup("pointer").Warn("filesource: corrupt", "offset", 7)
	want := "blackbox: warning: feed \"in\" seq 5: item skipped\n" +
		"blackbox: warning: filesource: corrupt feed=in pointer.offset=7\n"
	if got := out.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
