package filesource

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
)

type constSource struct{ n int }

func (c constSource) DefaultPolicy() engine.Policy { return engine.Pause() }
func (c constSource) Run(ctx context.Context, f *engine.Feed) error {
	f.SetBounded(true)
	var item any = "constant line"
	for i := 1; i <= c.n; {
		if f.TryPublish(item, engine.Position{Offset: int64(i)}) {
			i++
		} else {
			runtime.Gosched()
		}
	}
	f.SetState(engine.StateEndOfStream, "")
	return nil
}

func BenchmarkEngineCeiling(b *testing.B) {
	const n = 2_000_000
	noop := engine.ProcessorFunc(func(*engine.Cycle, any) error { return nil })
	for i := 0; i < b.N; i++ {
		e, _ := engine.New(engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Source: constSource{n}, QueueSize: 1024}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: noop}}}},
		})
		e.Start(context.Background())
		e.WaitSettled(context.Background(), 200*time.Microsecond)
		e.Stop(context.Background())
	}
	reportLines(b, n)
}
