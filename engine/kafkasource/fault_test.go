package kafkasource_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// warnings is a slog handler passing the errors of warnings to a channel
// (those that do not fit are dropped).
type warnings struct{ ch chan error }

func newWarnings() *warnings { return &warnings{ch: make(chan error, 1024)} }

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnings) WithGroup(string) slog.Handler            { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	var err error = errors.New(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if e, ok := a.Value.Any().(error); ok {
			err = e
		}
		return true
	})
	select {
	case w.ch <- err:
	default:
	}
	return nil
}

// next waits for a warning whose error wraps target.
func (w *warnings) next(t *testing.T, ctx context.Context, target error) error {
	t.Helper()
	for {
		select {
		case err := <-w.ch:
			if errors.Is(err, target) {
				return err
			}
		case <-ctx.Done():
			t.Fatalf("no warning wrapping %v: %v", target, ctx.Err())
		}
	}
}

// startEngine runs src into one group running p, stopped at the end of
// the test.
func startEngine(t *testing.T, src *kafkasource.Source, p core.Processor) *engine.Engine {
	t.Helper()
	return startEngineQueue(t, src, 64, p)
}

// startEngineQueue is startEngine with a queue of that size.
func startEngineQueue(t *testing.T, src *kafkasource.Source, queue int, p core.Processor) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: queue}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"kafka"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: p}}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		eng.Stop(ctx)
	})
	return eng
}

// failCommit is an OffsetCommit response failing every partition of req
// with a non-retriable error.
func failCommit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// TestAFailingOffsetCommitIsRetriedAndReportedNeverSkipped: every commit
// fails until every record is processed and two failures were warned; then
// the broker accepts commits again and the offsets reach the high
// watermarks: the failed commits were retried, not counted as done (no
// record is processed after the failures, so only a retry can commit).
func TestAFailingOffsetCommitIsRetriedAndReportedNeverSkipped(t *testing.T) {
	const n = 200
	c := newCluster(t, 2)
	hwm := produce(t, c, n, 10)
	var failing atomic.Bool
	failing.Store(true)
	var failures atomic.Int64
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !failing.Load() {
			return nil, nil, false
		}
		failures.Add(1)
		return failCommit(req.(*kmsg.OffsetCommitRequest)), nil, true
	})
	w := newWarnings()
	// No periodic read-back: only the retry of the failed commit can
	// commit the offsets.
	src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gfail",
		PollInterval: 10 * time.Millisecond, VerifyInterval: time.Hour, Logger: slog.New(w)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	var handled atomic.Int64
	all := make(chan struct{})
	startEngine(t, src, core.ProcessorFunc(func(*core.Cycle, any) error {
		if handled.Add(1) == n {
			close(all)
		}
		return nil
	}))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatalf("%d of %d records handled", handled.Load(), n)
	}
	w.next(t, ctx, kafkasource.ErrCommit)
	for failures.Load() < 2 {
		w.next(t, ctx, kafkasource.ErrCommit)
	}
	if got := committed(t, c, "gfail"); len(got) != 0 {
		t.Fatalf("committed %v while every commit fails", got)
	}
	if st := src.Status(); st.CommitFailures < 2 || st.LastError == "" {
		t.Fatalf("status: %d commit failures, last error %q; want the failures counted and the last reported", st.CommitFailures, st.LastError)
	}
	failing.Store(false)
	testutil.PollUntil(t, time.Minute, "the committed offsets reach the high watermarks", func() bool {
		return equalOffsets(committed(t, c, "gfail"), hwm)
	})
	testutil.PollUntil(t, time.Minute, "the commit error is cleared", func() bool { return src.Status().LastError == "" })
}

// TestADelayedOffsetCommitResponseNeverMovesAnOffsetBackwards: the first
// commit is held by the broker past the client's commit timeout (the
// client gives up on it), later records are processed and committed, and
// only then does the held commit land, with its older offset: the source
// finds the offset moved back and commits the processed one again.
func TestADelayedOffsetCommitResponseNeverMovesAnOffsetBackwards(t *testing.T) {
	const n = 100
	c := newCluster(t, 1)
	hwm := produce(t, c, n, 1)
	var (
		mu     sync.Mutex
		landed []int64 // the offsets of partition 0 commits, in the order the broker takes them
		first  *kmsg.OffsetCommitRequest
	)
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		r := req.(*kmsg.OffsetCommitRequest)
		if first == nil {
			// Held: no answer, the client times out; it lands later.
			first = r
			return nil, nil, true
		}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				landed = append(landed, rp.Offset)
			}
		}
		return nil, nil, false
	})
	w := newWarnings()
	src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gdelay",
		PollInterval: 10 * time.Millisecond, CommitTimeout: 300 * time.Millisecond, Logger: slog.New(w),
		// The unanswered request holds its connection until the read
		// times out (default 10s): the next commit waits for that.
		ClientOptions: []kgo.Opt{kgo.RequestTimeoutOverhead(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	gate := make(chan struct{})
	startEngine(t, src, core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		if ev.(*kafkasource.Record).Offset == n/2 {
			<-gate // the first commit covers at most the first half
		}
		return nil
	}))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w.next(t, ctx, kafkasource.ErrCommit) // the held commit timed out
	close(gate)
	testutil.PollUntil(t, time.Minute, "the second half committed", func() bool { return committedAt(src) == n })
	// The held commit lands now, with its older offset, its member and
	// generation: sent again as it was, from another connection.
	late, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	mu.Lock()
	held := first
	mu.Unlock()
	if _, err := late.Request(ctx, held); err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "the offset moved back by the late commit committed again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		// A commit older than n landed after the first commit of n,
		// and the last one landed is n again.
		back, firstN := false, -1
		for i, off := range landed {
			switch {
			case off == n && firstN < 0:
				firstN = i
			case off < n && firstN >= 0:
				back = true
			}
		}
		return back && landed[len(landed)-1] == n && equalOffsets(committed(t, c, "gdelay"), hwm)
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("commits of partition 0 in the order they landed: %v", landed)
	if o := held.Topics[0].Partitions[0].Offset; o < 1 || o > n/2+1 {
		t.Fatalf("the held commit's offset %d, want one in [1, %d]", o, n/2+1)
	}
}

// committedAt is the committed offset of partition 0 the source reports.
func committedAt(src *kafkasource.Source) int64 {
	for _, p := range src.Status().Partitions {
		if p.Partition == 0 {
			return p.Committed
		}
	}
	return -1
}

// TestAFullQueuePausesThePartitionsFetchesAndDropsNothing: a processor
// stuck on the first record fills a queue of 4: the source pauses the
// partitions' fetches (Status: paused) and the feed is BEHIND; once the
// processor goes on, every record is processed exactly once, none dropped,
// and the committed offsets reach the high watermarks.
func TestAFullQueuePausesThePartitionsFetchesAndDropsNothing(t *testing.T) {
	const n = 500
	c := newCluster(t, 2)
	hwm := produce(t, c, n, 10)
	tl := newTally(hwm)
	src := newSource(t, c, "gpause", nil)
	gate := make(chan struct{})
	var first sync.Once
	eng, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: 4}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"kafka"}, Processors: []engine.ProcessorConfig{{Name: "p",
			Processor: core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
				first.Do(func() { <-gate })
				tl.add(ev.(*kafkasource.Record))
				return nil
			})}}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(context.Background())
	testutil.PollUntil(t, time.Minute, "the owned partitions' fetches paused", func() bool {
		ps := src.Status().Partitions
		for _, p := range ps {
			if p.Owned && !p.Paused {
				return false
			}
		}
		return len(ps) > 0
	})
	if fs := eng.Status().Feeds[0]; fs.State != engine.StateBehind {
		t.Fatalf("feed state %s while paused, want %s", fs.State, engine.StateBehind)
	}
	close(gate)
	testutil.PollUntil(t, time.Minute, "every partition committed to its high watermark", func() bool { return allCommitted(src, hwm) })
	tl.check(t)
	if fs := eng.Status().Feeds[0]; fs.Dropped != 0 || !fs.Lossless {
		t.Fatalf("feed dropped %d, lossless %v; want nothing dropped", fs.Dropped, fs.Lossless)
	}
	for _, p := range src.Status().Partitions {
		if p.Paused {
			t.Errorf("partition %d still paused after the queue drained", p.Partition)
		}
	}
}
