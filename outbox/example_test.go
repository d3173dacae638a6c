package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// Record a run whose outputs leave through an outbox: each is appended
// to out.jsonl once it is recorded and its input committed, as one line
// in envelope format ({"key":...,"output":...}), exactly once.
func Example() {
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// The out file and its outbox: Open delivers first what earlier runs
	// recorded and committed but did not deliver (nothing here).
	out, err := outbox.OpenFile(filepath.Join(dir, "out.jsonl"), outbox.FormatEnvelope, false)
	if err != nil {
		panic(err)
	}
	defer out.Close()
	box, err := outbox.Open(outbox.Config{Marks: filepath.Join(dir, "out.jsonl.outbox"), Sink: out})
	if err != nil {
		panic(err)
	}

	// The run: a re-readable log (its source commits), recorded to a CSV
	// recording that the outbox's marks name by its path.
	path := filepath.Join(dir, "run.csv")
	w, err := store.Create(path, "")
	if err != nil {
		panic(err)
	}
	log := memsource.NewLog("a", "b", "c")
	log.Close()
	upper := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Emit("out", strings.ToUpper(ev.(string)))
		return nil
	})
	clock := core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Second)
	run, err := recorder.Start(ctx, recorder.RunConfig{
		Store:         w,
		Feed:          engine.FeedConfig{Name: "in", Source: log.Source(), QueueSize: 8},
		Processors:    []recorder.Processor{{Name: "upper", App: core.App{Name: "upper"}, Processor: upper}},
		Clock:         clock,
		RecorderClock: clock,
		Outbox:        box,
		Path:          path,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	// Until settled, or until the outbox fails (a full disk): what it did
	// not deliver is recorded and committed, and the next Open delivers it.
	if err := run.Wait(ctx, recorder.WaitConfig{Stop: box.Failed()}); err != nil {
		panic(err)
	}
	if stopErr, recErr := run.Stop(ctx); stopErr != nil || recErr != nil {
		panic(fmt.Sprint(stopErr, recErr))
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	// After the recorder: the last commits are in.
	if err := box.Close(); err != nil {
		panic(err)
	}

	b, err := os.ReadFile(out.Path())
	if err != nil {
		panic(err)
	}
	fmt.Print(string(b))
	st := box.Status()
	fmt.Printf("%s: delivered %d, recovered %d, pending %d\n", st.Guarantee, st.Delivered, st.Recovered, st.Pending)
	// Output:
	// {"key":{"feed":"in","epoch":1,"position":{"key":"","offset":1},"index":1},"output":"A"}
	// {"key":{"feed":"in","epoch":1,"position":{"key":"","offset":2},"index":1},"output":"B"}
	// {"key":{"feed":"in","epoch":1,"position":{"key":"","offset":3},"index":1},"output":"C"}
	// exactly-once: delivered 3, recovered 0, pending 0
}
