package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
)

func TestSmoke(t *testing.T) {
	var mu sync.Mutex
	var got []any
	log := memsource.NewLog()
	for i := 0; i < 5000; i++ {
		log.Append(i)
	}
	log.Close()
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 16}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: engine.ProcessorFunc(func(c *engine.Cycle, ev any) error {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
			return nil
		})}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.Start(ctx)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := e.WaitSettled(wctx, time.Millisecond)
	if err != nil {
		t.Fatalf("not settled: %+v", st)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5000 || log.Committed() != 5000 {
		t.Fatalf("got %d committed %d", len(got), log.Committed())
	}
	t.Logf("%+v", e.Status())
}
