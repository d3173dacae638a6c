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

	"github.com/blackbox-audit/blackbox/core"
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

func (a *acks) Acknowledged(_, _ int64, pos core.Position) { a.n.Store(pos.Offset) }
func (a *acks) Commit() error                              { return nil }

// publisher is the benchmark's source: it publishes n positioned messages
// under PAUSE, polling acknowledgements as a re-readable source does, until
// the committer has been told all of them.
type publisher struct {
	n    int
	acks *acks
	done chan struct{}
}

func (p *publisher) Run(ctx context.Context, in *engine.Intake) error {
	defer close(p.done)
	in.SetCommitter(p.acks)
	for i := 0; i < p.n; i++ {
		for !in.TryPublish(payload, core.Position{Offset: int64(i + 1)}) {
			in.PollAcks()
			runtime.Gosched()
		}
		if i&1023 == 0 {
			in.PollAcks()
		}
	}
	for p.acks.n.Load() < int64(p.n) && ctx.Err() == nil {
		in.PollAcks()
		runtime.Gosched()
	}
	return nil
}

// BenchmarkEngine: the same workload on blackbox's engine, end to end: a
// positioned feed published with TryPublish under PAUSE, one processor, every
// message acknowledged to the source's committer.
func BenchmarkEngine(b *testing.B) {
	src := &publisher{n: b.N, acks: &acks{}, done: make(chan struct{})}
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 1024, Source: src}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p",
			Processor: core.ProcessorFunc(func(*core.Cycle, any) error { return nil })}}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	<-src.done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if err := e.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
}
