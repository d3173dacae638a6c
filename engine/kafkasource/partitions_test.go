package kafkasource_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// addPartition adds a partition to topic and produces n records to it;
// it returns the new partition's number.
func addPartition(t *testing.T, c *kfake.Cluster, n int) int32 {
	t.Helper()
	adm, done := admin(t, c)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := adm.CreatePartitions(ctx, 1, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("adding a partition: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	p := int32(len(ends[topic]) - 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Partition: p, Value: []byte("new" + strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAPartitionAddedWhileConsumingIsConsumed: a partition added to the
// topic while the source consumes it is assigned to the group and read to
// its end within seconds (not at the client's next metadata refresh,
// minutes later), each of its records processed once.
func TestAPartitionAddedWhileConsumingIsConsumed(t *testing.T) {
	c := newCluster(t, 1)
	hwm := produce(t, c, 50, 5)
	src := newSource(t, c, "gadd", nil)
	tl := newTally(map[int32]int64{0: hwm[0], 1: 40})
	startEngine(t, src, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		tl.add(ev.(*kafkasource.Record))
		return nil
	}))
	testutil.PollUntil(t, time.Minute, "the first partition committed", func() bool { return allCommitted(src, hwm) })
	p := addPartition(t, c, 40)
	hwm[p] = 40
	testutil.PollUntil(t, 30*time.Second, "the added partition consumed and committed to its end", func() bool { return allCommitted(src, hwm) })
	tl.check(t)
}

// TestAStopBeforeAnAddedPartitionIsAssignedIsNotSettled: the source is
// stopped right after a partition was added to its topic, before any
// member of the group was assigned it: at its stop the source reads the
// topic's partitions once more and the feed is BEHIND, naming the
// partition no member consumes, so the run is not settled.
func TestAStopBeforeAnAddedPartitionIsAssignedIsNotSettled(t *testing.T) {
	c := newCluster(t, 1)
	hwm := produce(t, c, 50, 5)
	src := newSource(t, c, "gstop", nil)
	eng, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: 64}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"kafka"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: core.ProcessorFunc(func(*core.Cycle, any) error { return nil })}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "settled at the end of the first partition", func() bool { return allCommitted(src, hwm) && eng.Status().Settled })
	addPartition(t, c, 10)
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st := eng.Status()
	fs := st.Feeds[0]
	if st.Settled || fs.State != engine.StateBehind || fs.Detail == nil || !strings.Contains(*fs.Detail, topic+"/1") {
		detail := "<nil>"
		if fs.Detail != nil {
			detail = *fs.Detail
		}
		t.Errorf("after the stop: settled %v, state %s (%s); want not settled, BEHIND naming %s/1", st.Settled, fs.State, detail, topic)
	}
}

// TestATopicDeletedWithRecordsNotReadCountsThemLost: the processor is
// stuck at offset 5 with the fetches paused behind it when the topic is
// deleted: the records the source had not read by then are gone. They are
// counted lost (reason "deleted": the feed is not lossless), every record
// is either processed once or counted lost, and, nothing being left to
// read, the feed is caught up, naming the deleted topic, and settles.
func TestATopicDeletedWithRecordsNotReadCountsThemLost(t *testing.T) {
	const n = 100
	c := newCluster(t, 1)
	hwm := produce(t, c, n, 10, kgo.ProducerBatchMaxBytes(512))
	src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gdel",
		PollInterval: 10 * time.Millisecond, MaxPollRecords: 4, Logger: slog.New(slog.DiscardHandler),
		ClientOptions: []kgo.Opt{kgo.FetchMaxPartitionBytes(512), kgo.FetchMaxBytes(512), kgo.MaxConcurrentFetches(1)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	tl := newTally(hwm)
	gate, stuck := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	eng := startEngineQueue(t, src, 4, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		r := ev.(*kafkasource.Record)
		if r.Offset == 5 && once.CompareAndSwap(false, true) {
			close(stuck)
			<-gate
		}
		tl.add(r)
		return nil
	}))
	<-stuck
	testutil.PollUntil(t, time.Minute, "the fetches paused behind the stuck processor, the high watermark known", func() bool {
		st := src.Status().Partitions
		return len(st) == 1 && st[0].Paused && st[0].HighWatermark == n
	})
	adm, done := admin(t, c)
	defer done()
	if resp, err := adm.DeleteTopics(context.Background(), topic); err != nil || resp.Error() != nil {
		t.Fatalf("deleting the topic: %v %v", err, resp.Error())
	}
	close(gate)
	var processed int64
	testutil.PollUntil(t, time.Minute, "every record processed or counted lost", func() bool {
		processed = 0
		for o := range int64(n) {
			processed += int64(tl.parts[0][o].Load())
		}
		return processed+partitionLost(src) == n
	})
	for o := range int64(n) {
		if got := tl.parts[0][o].Load(); got > 1 {
			t.Errorf("offset %d processed %d times", o, got)
		}
	}
	fs := eng.Status().Feeds[0]
	if partitionLost(src) == 0 || fs.Lossless || fs.Losses["deleted"] == 0 {
		t.Errorf("%d records lost, feed lossless %v, losses %v: want a loss of reason deleted", partitionLost(src), fs.Lossless, fs.Losses)
	}
	testutil.PollUntil(t, time.Minute, "settled", func() bool { return eng.Status().Settled })
	fs = eng.Status().Feeds[0]
	if fs.State != engine.StateCaughtUp || fs.Detail == nil || !strings.Contains(*fs.Detail, "topic "+topic+" deleted") {
		t.Errorf("feed state %s %v, want CAUGHT_UP naming the deleted topic", fs.State, fs.Detail)
	}
}
