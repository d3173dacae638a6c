package engine_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/blackbox-audit/blackbox/engine"
)

// The floor: a plain buffered Go channel hand-off of the same items to a
// consumer goroutine.
func BenchmarkChannelHandoff(b *testing.B) {
	ch := make(chan any, 1024)
	done := make(chan struct{})
	var n atomic.Int64
	go func() {
		for v := range ch {
			if v != nil {
				n.Add(1)
			}
		}
		close(done)
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch <- i
	}
	close(ch)
	<-done
	b.StopTimer()
	if n.Load() != int64(b.N) {
		b.Fatalf("consumed %d of %d", n.Load(), b.N)
	}
}

func noop() engine.Processor {
	return engine.ProcessorFunc(func(*engine.Cycle, any) error { return nil })
}

func benchEngine(b *testing.B, pol engine.Policy) (*engine.Engine, *engine.Feed) {
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Policy: pol, QueueSize: 1024}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: noop()}}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Stop(context.Background()) })
	return e, e.Feed("in")
}

func waitDispatched(b *testing.B, f *engine.Feed, n int64) {
	for f.Status().Subscribers[0].Dispatched < n {
		runtime.Gosched()
	}
}

// The default publish path: one DROP queue, no observer, publish to
// dispatched.
func BenchmarkPublish(b *testing.B) {
	_, f := benchEngine(b, engine.DropAfterSpin(engine.DefaultSpin))
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.Publish(ctx, i)
	}
	waitDispatched(b, f, int64(b.N)-f.Status().Dropped)
	b.StopTimer()
	b.ReportMetric(float64(f.Status().Dropped), "dropped")
}

// TryPublish under PAUSE, as a re-readable source publishes: retry on a
// pause.
func BenchmarkTryPublishPause(b *testing.B) {
	_, f := benchEngine(b, engine.Pause())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for !f.TryPublish(i, engine.Position{Offset: int64(i + 1)}) {
			runtime.Gosched()
		}
	}
	waitDispatched(b, f, int64(b.N))
}

// TryPublish under PAUSE on a positioned feed: the acknowledgement window
// and a commit per 1,024 items, as the file source does.
func BenchmarkTryPublishPauseCommitted(b *testing.B) {
	_, f := benchEngine(b, engine.Pause())
	f.SetCommitter(&committer{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for !f.TryPublish(i, engine.Position{Offset: int64(i + 1)}) {
			f.PollAcks()
			runtime.Gosched()
		}
		if i%1024 == 0 {
			f.PollAcks()
		}
	}
	waitDispatched(b, f, int64(b.N))
}

// The deterministic core alone: one input through one processor.
func BenchmarkHostHandle(b *testing.B) {
	h := engine.NewHost("p", noop(), engine.SystemClock())
	for i := 0; i < b.N; i++ {
		if t := h.Handle(nil, i); t.Err != nil {
			b.Fatal(t.Err)
		}
	}
}
