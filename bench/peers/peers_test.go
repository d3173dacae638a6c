package peers

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/blackbox-audit/blackbox/engine"
)

var payload = []byte(`{"account":"alice","amount":100}`)

// BenchmarkWatermillGoChannel: Watermill's in-process gochannel Pub/Sub, one
// subscriber that acknowledges every message.
func BenchmarkWatermillGoChannel(b *testing.B) {
	ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 1024}, watermill.NopLogger{})
	defer ps.Close()
	msgs, err := ps.Subscribe(context.Background(), "t")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	var got atomic.Int64
	go func() {
		for m := range msgs {
			m.Ack()
			if got.Add(1) == int64(b.N) {
				close(done)
			}
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := ps.Publish("t", message.NewMessage(strconv.Itoa(i), payload)); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

type acks struct{ n atomic.Int64 }

func (a *acks) Acknowledged(_, _ int64, pos engine.Position) { a.n.Store(pos.Offset) }
func (a *acks) Commit() error                                { return nil }

// BenchmarkEngine: the same workload on blackbox's engine, end to end: a
// positioned feed published with TryPublish under PAUSE, one processor, every
// message acknowledged to the source's committer.
func BenchmarkEngine(b *testing.B) {
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 1024}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p",
			Processor: engine.ProcessorFunc(func(*engine.Cycle, any) error { return nil })}}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	f := e.Feed("in")
	a := &acks{}
	f.SetCommitter(a)
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer e.Stop(context.Background())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for !f.TryPublish(payload, engine.Position{Offset: int64(i + 1)}) {
			f.PollAcks()
			runtime.Gosched()
		}
		if i&1023 == 0 {
			f.PollAcks()
		}
	}
	for a.n.Load() < int64(b.N) {
		f.PollAcks()
		runtime.Gosched()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
