package cli_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// TestAKilledRunAndItsRestartLoseNothing: a recorded run of the ledger
// over a committed file, its feed journalled, is killed by its kill
// switch once it handled 3 of 8 lines (the other 5 read, journalled and
// never processed); its recording is complete and says why it was killed,
// its pointer is after line 3; `blackbox run` then reads on from the
// pointer and processes lines 4-8; explain over both runs finds nothing
// lost: the killed run's unprocessed lines are its in flight, delivered by
// the restart.
func TestAKilledRunAndItsRestartLoseNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var lines []string
	for i := 1; i <= 8; i++ {
		lines = append(lines, fmt.Sprintf("alice,%d", i))
	}
	writeLines(t, "in.txt", lines...)

	src, err := filesource.New("in.txt", filesource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := csvstore.Create("run1.csv")
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := apps.LedgerApp().New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	counted := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		defer handled.Add(1)
		return ledger.OnEvent(c, ev)
	})
	run, err := recorder.Start(context.Background(), recorder.RunConfig{
		Store:      w,
		Feed:       engine.FeedConfig{Name: "input", Source: src, QueueSize: 64},
		Journal:    true,
		Processors: []recorder.Processor{{Name: "ledger", App: apps.LedgerApp(), Processor: counted}},
		Logger:     slog.New(slog.DiscardHandler),
		KillSwitch: func() (string, bool) { return "three lines is enough", handled.Load() >= 3 },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a bound on a broken run, never reached
	defer cancel()
	if err := run.Wait(ctx, recorder.WaitConfig{Follow: true}); err != nil || ctx.Err() != nil {
		t.Fatalf("Wait: %v, %v", err, ctx.Err())
	}
	if _, recErr := run.Stop(context.Background()); recErr != nil {
		t.Fatal(recErr)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st := run.Engine().Status(); st.Killed != "three lines is enough" || !st.Lossless || handled.Load() != 3 {
		t.Fatalf("status %+v after %d lines: want killed, lossless, 3 lines", st, handled.Load())
	}
	ptr, err := filesource.ReadPointer("in.txt.ptr")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len("alice,1\nalice,2\nalice,3\n")); ptr.Offset != want {
		t.Fatalf("pointer at %d, want %d (after line 3)", ptr.Offset, want)
	}
	if code, out := execute(t, context.Background(), "verify", "run1.csv"); code != 0 {
		t.Fatalf("verify run1.csv: exit %d:\n%s", code, out)
	}
	if code, out := execute(t, context.Background(), "inspect", "run1.csv"); code != 0 || !strings.Contains(out, `ended by a kill ("three lines is enough")`) {
		t.Errorf("inspect run1.csv: exit %d:\n%s", code, out)
	}

	code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", "run2.csv", "--journal")
	if code != 0 || !strings.Contains(out, "5 lines") {
		t.Fatalf("the restart: exit %d, want 0 and lines 4-8:\n%s", code, out)
	}
	code, out = execute(t, context.Background(), "explain", "run1.csv,run2.csv")
	for _, want := range []string{`kill of run 1 ("three lines is enough")`, "2 in flight: 5", "nothing lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("explain: exit %d:\n%s", code, out)
	}
}
