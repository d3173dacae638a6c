package recorder_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// discard is a writer that keeps nothing: the recorder's own cost.
type discard struct{}

func (discard) Append(...store.Entry) error { return nil }
func (discard) Close() error                { return nil }

// benchStore opens a fresh writer for one benchmark run; the benchmark
// closes it after the recorder. Add a store here to measure it end to end
// (e.g. csvstore.Create(filepath.Join(b.TempDir(), "r.csv"))).
type benchStore struct {
	name    string
	journal bool // journal the feed (INDEXED rows) instead of INLINE rows
	open    func(b *testing.B) store.Writer
}

var benchStores = []benchStore{
	{name: "discard", open: func(*testing.B) store.Writer { return discard{} }},
	{name: "discard-journal", journal: true, open: func(*testing.B) store.Writer { return discard{} }},
}

// BenchmarkThroughput pushes b.N in-memory items through a small processor
// (one clock reading, one output per item), end to end: from the first
// publish to the last item handled. Run 1M items with
//
//	go test -run '^$' -bench Throughput -benchtime 1000000x ./recorder/
func BenchmarkThroughput(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchThroughput(b, nil) })
	for _, s := range benchStores {
		b.Run("record/"+s.name, func(b *testing.B) { benchThroughput(b, &s) })
	}
}

func benchThroughput(b *testing.B, s *benchStore) {
	n := int64(b.N)
	var handled atomic.Int64
	fin := make(chan struct{})
	proc := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Now()
		c.Emit("out", ev.(int)*2)
		if handled.Add(1) == n {
			close(fin)
		}
		return nil
	})
	feed := engine.FeedConfig{Name: "in", Policy: engine.BlockWithDeadline(time.Minute), QueueSize: 4096}
	cfg := engine.Config{
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: "p", Processor: proc}}}},
		Logger: slog.New(slog.DiscardHandler),
	}
	var rec *recorder.Recorder
	var w store.Writer
	if s != nil {
		w = s.open(b)
		var err error
		if rec, err = recorder.New(w, recorder.Options{}); err != nil {
			b.Fatal(err)
		}
		cfg.Observer = rec.Observer()
		if s.journal {
			feed.Journal = rec.Journal()
		}
	}
	cfg.Feeds = []engine.FeedConfig{feed}
	e, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	f := e.Feed("in")
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if err := f.Publish(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	<-fin
	elapsed := time.Since(start)
	b.StopTimer()
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if rec != nil {
		if err := rec.Close(); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
}
