package recorder_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// Record a run of one processor into an in-memory recording and list its
// rows.
func Example() {
	rec := store.NewMemory()
	r, err := recorder.New(rec, recorder.Options{
		Clock: core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Second),
		Apps:  map[string]string{"upper": "upper"},
	})
	if err != nil {
		panic(err)
	}
	upper := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Emit("out", strings.ToUpper(ev.(string)))
		return nil
	})
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: memsource.NewList("a", "b"),
			Policy: engine.BlockWithDeadline(time.Second), QueueSize: 8, Journal: r.Journal()}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: "upper", Processor: upper}}}},
		Observer: r.Observer(),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = e.Start(ctx)
	_, _ = e.WaitSettled(ctx)
	_ = e.Stop(ctx)
	if err := r.Close(); err != nil {
		panic(err)
	}
	_ = rec.Close()

	// JOURNAL rows are written by the feed's publisher, concurrently with
	// the group: list each processor's stream in its index order.
	for _, p := range rec.Processors() {
		for row, err := range rec.Stream(p) {
			if err != nil {
				panic(err)
			}
			fmt.Printf("%s %d %-7s source=%q seq=%d n=%d payload=%s\n",
				row.Processor, row.Index, row.Kind, row.Source, row.Seq, row.N, row.Payload)
		}
	}
	fmt.Println("apps:", rec.Meta().Apps, "problems:", len(rec.Problems()))
	// Output:
	// upper 1 START   source="" seq=0 n=0 payload=
	// upper 2 INDEXED source="in" seq=1 n=1 payload=
	// upper 3 OUTPUT  source="out" seq=1 n=0 payload="A"
	// upper 4 INDEXED source="in" seq=2 n=1 payload=
	// upper 5 OUTPUT  source="out" seq=1 n=0 payload="B"
	// upper 6 END     source="" seq=0 n=2 payload=
	// apps: map[upper:upper] problems: 0
}
