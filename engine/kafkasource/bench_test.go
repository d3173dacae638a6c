package kafkasource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// BenchmarkConsumeProcessCommit consumes one kfake topic of 100,000 records
// over 8 partitions, processes each (a no-op) and commits, each iteration
// as a new group, and reports records/s for: a bare franz-go loop
// (PollFetches, process, CommitRecords), the Source under the engine, the
// same bare loop writing, for each poll, the rows a recording of the run
// holds for its records with encoding/csv and one write to a file
// (bare-franz-go+csv: the floor of the next), and the Source with the run
// recorded to a CSV file. The same topic serves the four in one run.
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
			bareLoop(b, c.ListenAddrs(), next(), n, nil)
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
	b.Run("bare-franz-go+csv", func(b *testing.B) {
		for i := range b.N {
			fl := storetest.FloorCSV(b, filepath.Join(b.TempDir(), fmt.Sprintf("floor-%d.csv", i)), csvstore.Header)
			var rows csvFloorRows
			bareLoop(b, c.ListenAddrs(), next(), n, func(fs kgo.Fetches) {
				rows.add(fs, time.Now)
				fl.Write(rows.batch)
			})
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
// process each (a no-op count; batch, if not nil, is called with each
// poll's fetches), CommitRecords, until n are committed.
func bareLoop(b testing.TB, brokers []string, group string, n int, batch func(kgo.Fetches)) {
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
		if batch != nil {
			batch(fs)
		}
		if err := cl.CommitRecords(ctx, rs...); err != nil {
			b.Fatal(err)
		}
	}
}

// csvFloorRows builds the rows the recorder writes for the records of a
// run (processor "count" running countApp on feed "kafka", recorded with
// the JSON codec), in the order the Source publishes them: for each, its
// DELIVERY row, its INLINE row (the record's JSON) and, at every 16th
// record of a partition, the OUTPUT row of what countApp emits. The
// floor of the Kafka source with CSV recording writes them per poll. Not
// safe for concurrent use.
type csvFloorRows struct {
	batch  []store.Entry  // the rows of the last add
	seq    int64          // the feed sequence of the last record
	index  int64          // the index of the last row (START is row 1)
	counts map[string]int // records per partition
}

// add sets batch to the rows of the records of fs, their instants read
// from now (once per record, as the recorder reads its clock).
func (c *csvFloorRows) add(fs kgo.Fetches, now func() time.Time) {
	if c.counts == nil {
		c.counts, c.index = map[string]int{}, 1
	}
	c.batch = c.batch[:0]
	row := func(e store.Entry) {
		c.index++
		e.Processor, e.Index = "count", c.index
		c.batch = append(c.batch, e)
	}
	fs.EachTopic(func(ft kgo.FetchTopic) {
		epoch := kafkasource.TopicEpoch(ft.TopicID)
		ft.EachPartition(func(fp kgo.FetchPartition) {
			key := kafkasource.PartitionKey(&kafkasource.Record{Topic: ft.Topic, Partition: fp.Partition})
			fp.EachRecord(func(r *kgo.Record) {
				c.seq++
				rec := kafkasource.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
				for _, h := range r.Headers {
					rec.Headers = append(rec.Headers, kafkasource.Header{Key: h.Key, Value: h.Value})
				}
				payload, err := json.Marshal(&rec)
				if err != nil {
					panic(err) // a struct of strings, numbers and bytes
				}
				c.counts[key]++
				k := c.counts[key]
				var out []byte
				if k%16 == 0 {
					if out, err = json.Marshal(fmt.Sprintf("%s@%d %s #%d", key, r.Offset, r.Value, k)); err != nil {
						panic(err)
					}
				}
				row(store.Entry{Kind: store.KindDelivery, Source: "kafka", Seq: c.seq, Epoch: epoch, Key: key, Offset: r.Offset + 1})
				inline := store.Entry{Kind: store.KindInline, Source: "kafka", Seq: c.seq, Instant: now(), Payload: payload}
				if out != nil {
					inline.N = 1
				}
				row(inline)
				if out != nil {
					row(store.Entry{Kind: store.KindOutput, Source: "out", Seq: 1, Payload: out})
				}
			})
		})
	})
}

// rowLog is a store.Writer that keeps the rows appended to it. Not safe
// for concurrent use, as store.Writer.
type rowLog struct{ rows []store.Entry }

func (w *rowLog) Append(rows ...store.Entry) error {
	for _, r := range rows {
		r.Payload = slices.Clone(r.Payload)
		w.rows = append(w.rows, r)
	}
	return nil
}
func (w *rowLog) Sync() error  { return nil }
func (w *rowLog) Close() error { return nil }

// TestTheKafkaCSVFloorWritesTheRowsTheRecorderWrites: the rows the floor of
// BenchmarkConsumeProcessCommit/source+csv writes (csvFloorRows) are the
// recorder's own for the same records in the same order, but for their
// instants.
func TestTheKafkaCSVFloorWritesTheRowsTheRecorderWrites(t *testing.T) {
	const n = 100
	c := newCluster(t, 3)
	hwm := produce(t, c, n, 7)

	// The records and their fetches, as the bare loop polls them.
	byPos := map[string]kgo.Fetches{}
	bareLoop(t, c.ListenAddrs(), "floor", n, func(fs kgo.Fetches) {
		fs.EachRecord(func(r *kgo.Record) {
			// One record's fetch: its topic (and ID) and partition.
			one := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: r.Topic, TopicID: fetchTopicID(fs, r.Topic),
				Partitions: []kgo.FetchPartition{{Partition: r.Partition, Records: []*kgo.Record{r}}}}}}}
			byPos[fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset+1)] = one
		})
	})
	if len(byPos) != n {
		t.Fatalf("the bare loop polled %d records, want %d", len(byPos), n)
	}

	src := newSource(t, c, "recorded", nil)
	w := &rowLog{}
	app := countApp(nil)
	p, err := app.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := recorder.Start(context.Background(), recorder.RunConfig{Store: w,
		Feed:       engine.FeedConfig{Name: "kafka", Source: src, QueueSize: n},
		Processors: []recorder.Processor{{Name: "count", App: app, Processor: p}},
		Logger:     slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "committed to the high watermarks", func() bool { return allCommitted(src, hwm) })
	if stopErr, recErr := run.Stop(context.Background()); stopErr != nil || recErr != nil {
		t.Fatal(stopErr, recErr)
	}

	var got, want []store.Entry
	var floor csvFloorRows
	for _, e := range w.rows {
		switch e.Kind {
		case store.KindDelivery:
			fs, ok := byPos[fmt.Sprintf("%s@%d", e.Key, e.Offset)]
			if !ok {
				t.Fatalf("the recorder delivered %s@%d, which the bare loop did not poll", e.Key, e.Offset)
			}
			floor.add(fs, func() time.Time { return time.Time{} })
			want = append(want, floor.batch...)
			fallthrough
		case store.KindInline, store.KindOutput:
			got = append(got, e)
		}
	}
	if outputs := len(want) - 2*n; outputs <= 0 {
		t.Fatalf("%d rows for %d records: no OUTPUT row", len(want), n)
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(store.Entry{}, "Instant"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("rows (-floor +recorder):\n%s", diff)
	}
}

// fetchTopicID is the ID fs names for topic.
func fetchTopicID(fs kgo.Fetches, topic string) (id [16]byte) {
	fs.EachTopic(func(ft kgo.FetchTopic) {
		if ft.Topic == topic {
			id = ft.TopicID
		}
	})
	return id
}
