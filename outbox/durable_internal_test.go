package outbox

import (
	"log/slog"
	"path/filepath"
	"testing"
)

// Config.Durable makes each file batch durable, as it says, whatever
// OpenFile was told: the marks of a batch are synced before the next
// one, and a file not synced could lose, in a power loss, the bytes they
// say it holds.
func TestADurableOutboxSyncsItsFilesBatches(t *testing.T) {
	for _, durable := range []bool{false, true} {
		dir := t.TempDir()
		f, err := OpenFile(filepath.Join(dir, "out"), FormatValue, false)
		if err != nil {
			t.Fatal(err)
		}
		box, err := Open(Config{Marks: filepath.Join(dir, "out.outbox"), Sink: f, Durable: durable,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := box.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if f.sync != durable {
			t.Errorf("Durable %v: the file syncs its batches: %v", durable, f.sync)
		}
	}
}
