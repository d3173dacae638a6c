package kafkasource_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// TestHundredThousandRecordsOverEightPartitionsAreProcessedCommittedAndReplayIdentical:
// 100,000 records over 8 partitions, 8 workers key-ordered by partition,
// recorded: every record handled exactly once, the committed offsets (kadm)
// equal the high watermarks, and the recording replays identical with no
// broker.
func TestHundredThousandRecordsOverEightPartitionsAreProcessedCommittedAndReplayIdentical(t *testing.T) {
	const n = 100_000
	c := newCluster(t, 8)
	hwm := produce(t, c, n, 1000)
	tl := newTally(hwm)
	app := countApp(tl.add)
	src := newSource(t, c, "g100k", nil)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mem := store.NewMemory()
	run, err := recorder.Start(ctx, recorder.RunConfig{
		Store:      mem,
		Feed:       engine.FeedConfig{Name: "kafka", Source: src, QueueSize: 1024},
		Processors: []recorder.Processor{{Name: "count", App: app, New: func() (core.Processor, error) { return app.Build(nil) }}},
		Workers:    8,
		Order:      engine.OrderKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "every partition committed to its high watermark", func() bool { return allCommitted(src, hwm) })
	if stopErr, recErr := run.Stop(ctx); stopErr != nil || recErr != nil {
		t.Fatalf("stop: %v; recording: %v", stopErr, recErr)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	mem.Close()

	tl.check(t)
	if got := committed(t, c, "g100k"); !equalOffsets(got, hwm) {
		t.Fatalf("committed offsets %v, want the high watermarks %v", got, hwm)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer rcancel()
	rep, err := replayer.Replay(rctx, mem, []core.App{app}, replayer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var inputs int64
	for _, p := range rep.Processors {
		inputs += p.Inputs
	}
	var outputs int64
	for _, p := range rep.Processors {
		outputs += p.Outputs
	}
	if !rep.Identical || !rep.Complete || inputs != n || outputs < n/16-8 {
		t.Fatalf("replay: identical %v complete %v, %d inputs, %d outputs compared; want identical, complete, %d inputs, about %d outputs",
			rep.Identical, rep.Complete, inputs, outputs, n, n/16)
	}
}

func equalOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestProcessedRecordsAreCommittedWithoutWaitingForAPollInterval: with a
// poll interval of an hour, the records processed after the last fetch
// are still committed (the duty cycle waits CommitInterval, not
// PollInterval, while published records wait for their commit).
func TestProcessedRecordsAreCommittedWithoutWaitingForAPollInterval(t *testing.T) {
	const n = 2000
	c := newCluster(t, 4)
	hwm := produce(t, c, n, 100)
	tl := newTally(hwm)
	src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gidle",
		PollInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	startEngine(t, src, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		tl.add(ev.(*kafkasource.Record))
		return nil
	}))
	testutil.PollUntil(t, 30*time.Second, "every partition committed to its high watermark", func() bool { return allCommitted(src, hwm) })
	tl.check(t)
}

// TestAQueueThatKeepsTakingRecordsDoesNotPauseTheFetches: a processor
// paced by the test keeps a queue of 4 full for far longer than the poll
// interval, but the feed takes records all along: the fetches are never
// paused (pausing drops what the client buffered), and every record is
// processed once and committed.
func TestAQueueThatKeepsTakingRecordsDoesNotPauseTheFetches(t *testing.T) {
	const n = 400
	c := newCluster(t, 2)
	hwm := produce(t, c, n, 10)
	tl := newTally(hwm)
	src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gsteady",
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	step, quit := make(chan struct{}), make(chan struct{})
	startEngineQueue(t, src, 4, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		select {
		case <-step:
		case <-quit: // the test failed: let the engine's Stop through
		}
		tl.add(ev.(*kafkasource.Record))
		return nil
	}))
	t.Cleanup(func() { close(quit) }) // before the engine's Stop
	// One record every millisecond: 400 ms of a full queue that drains
	// steadily, twenty poll intervals.
	pace := time.NewTicker(time.Millisecond)
	defer pace.Stop()
	for range n {
		<-pace.C
		step <- struct{}{}
		for _, p := range src.Status().Partitions {
			if p.Paused {
				t.Fatalf("partition %d paused while its queue kept taking records", p.Partition)
			}
		}
	}
	testutil.PollUntil(t, time.Minute, "every partition committed to its high watermark", func() bool { return allCommitted(src, hwm) })
	tl.check(t)
}
