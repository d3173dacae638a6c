package kafkasource_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// BenchmarkConsumeProcessCommit consumes one kfake topic of 100,000 records
// over 8 partitions, processes each (a no-op) and commits, each iteration
// as a new group, and reports records/s for: a bare franz-go loop
// (PollFetches, process, CommitRecords), the Source under the engine, and
// the Source with the run recorded to a CSV file. The same topic serves
// the three in one run.
func BenchmarkConsumeProcessCommit(b *testing.B) {
	const n = 100_000
	// The queue holds a poll's records, as `blackbox run --kafka` sets it.
	const queue = kafkasource.DefaultMaxPollRecords
	c := newCluster(b, 8)
	hwm := produce(b, c, n, 1000)
	group := 0
	next := func() string { group++; return fmt.Sprintf("bench-%d", group) }
	rate := func(b *testing.B) { b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s") }

	b.Run("bare-franz-go", func(b *testing.B) {
		for range b.N {
			bareLoop(b, c.ListenAddrs(), next(), n)
		}
		rate(b)
	})
	b.Run("source", func(b *testing.B) {
		for range b.N {
			src := newSource(b, c, next(), nil)
			var handled atomic.Int64
			eng, err := engine.New(engine.Config{
				Feeds: []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: queue}},
				Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"kafka"},
					Processors: []engine.ProcessorConfig{{Name: "noop", Processor: core.ProcessorFunc(func(*core.Cycle, any) error {
						handled.Add(1)
						return nil
					})}}}},
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := eng.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			testutil.PollUntil(b, time.Minute, "committed to the high watermarks", func() bool { return allCommitted(src, hwm) })
			if err := eng.Stop(context.Background()); err != nil {
				b.Fatal(err)
			}
			src.Close()
		}
		rate(b)
	})
	b.Run("source+csv", func(b *testing.B) {
		for i := range b.N {
			src := newSource(b, c, next(), nil)
			w, err := csvstore.Create(filepath.Join(b.TempDir(), fmt.Sprintf("run-%d.csv", i)))
			if err != nil {
				b.Fatal(err)
			}
			app := countApp(nil)
			p, err := app.Build(nil)
			if err != nil {
				b.Fatal(err)
			}
			run, err := recorder.Start(context.Background(), recorder.RunConfig{Store: w,
				Feed:       engine.FeedConfig{Name: "kafka", Source: src, QueueSize: queue},
				Processors: []recorder.Processor{{Name: "count", App: app, Processor: p}},
				Logger:     slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			testutil.PollUntil(b, time.Minute, "committed to the high watermarks", func() bool { return allCommitted(src, hwm) })
			if stopErr, recErr := run.Stop(context.Background()); stopErr != nil || recErr != nil {
				b.Fatal(stopErr, recErr)
			}
			src.Close()
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		rate(b)
	})
}

// bareLoop consumes n records as group with franz-go alone: PollFetches,
// process each (a no-op count), CommitRecords, until n are committed.
func bareLoop(b testing.TB, brokers []string, group string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var handled int
	for handled < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.Fatalf("%d of %d records: %v", handled, n, err)
		}
		rs := fs.Records()
		handled += len(rs)
		if err := cl.CommitRecords(ctx, rs...); err != nil {
			b.Fatal(err)
		}
	}
}
