package kafkasource_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// topicID is the ID of topic on c now.
func topicID(t *testing.T, c *kfake.Cluster) kadm.TopicID {
	t.Helper()
	adm, done := admin(t, c)
	defer done()
	ts, err := adm.ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ts[topic]
	if !ok || d.Err != nil {
		t.Fatalf("topic %s: %v", topic, d.Err)
	}
	return d.ID
}

// topicEpoch is the epoch of topic's records on c now: TopicEpoch of its
// topic ID.
func topicEpoch(t *testing.T, c *kfake.Cluster) int64 {
	t.Helper()
	return kafkasource.TopicEpoch(topicID(t, c))
}

// recreateTopic deletes topic and creates it again with partitions
// partitions (another topic ID, its offsets from 0 again).
func recreateTopic(t *testing.T, c *kfake.Cluster, partitions int32) {
	t.Helper()
	adm, done := admin(t, c)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := adm.DeleteTopics(ctx, topic); err != nil || resp.Error() != nil {
		t.Fatalf("deleting the topic: %v %v", err, resp.Error())
	}
	// The deletion completes asynchronously: the creation is refused until
	// it did.
	testutil.PollUntil(t, time.Minute, "the topic created again", func() bool {
		r, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		return err == nil && r.Err == nil
	})
}

// delivered is a record handled and the epoch of its delivery.
type delivered struct {
	epoch     int64
	partition int32
	offset    int64
	value     string
}

// TestATopicCreatedAgainWhileConsumingIsReadAsANewPositionSpace: the source
// reads a topic to its end, then the topic is deleted and created again
// (another topic ID) and records are produced to it, at offsets 0 on
// again. Each record's delivery epoch is its topic's incarnation
// (TopicEpoch of the topic ID), not the group generation: the first
// topic's records have one epoch, the second's another, though the
// offsets repeat. The source reads the second topic from its start (the
// client alone never consumes another incarnation of a topic it consumed,
// and its commits of the first are refused), each record once, and commits
// it to its end; nothing is lost, no commit failure is left.
func TestATopicCreatedAgainWhileConsumingIsReadAsANewPositionSpace(t *testing.T) {
	const first, second = 40, 25
	c := newCluster(t, 2)
	hwm := produce(t, c, first, 5)
	firstEpoch := topicEpoch(t, c)
	src := newSource(t, c, "grecreate", nil)
	var mu sync.Mutex
	var got []delivered
	eng := startEngine(t, src, core.ProcessorFunc(func(cy *core.Cycle, ev any) error {
		r := ev.(*kafkasource.Record)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, delivered{cy.Delivery().Epoch, r.Partition, r.Offset, string(r.Value)})
		return nil
	}))
	testutil.PollUntil(t, time.Minute, "the first topic committed to its end", func() bool { return allCommitted(src, hwm) })
	recreateTopic(t, c, 2)
	hwm2 := produce(t, c, second, 5)
	secondEpoch := topicEpoch(t, c)
	if secondEpoch == firstEpoch {
		t.Fatalf("the topic created again has the epoch of the first, %d", firstEpoch)
	}
	testutil.PollUntil(t, time.Minute, "the second topic read and committed to its end", func() bool {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		return n >= first+second && allCommitted(src, hwm2)
	})
	testutil.PollUntil(t, 10*time.Second, "no commit failure left", func() bool { return src.Status().LastError == "" })
	mu.Lock()
	defer mu.Unlock()
	seen := map[delivered]int{}
	for _, d := range got {
		seen[delivered{d.epoch, d.partition, d.offset, ""}]++
	}
	for _, tc := range []struct {
		epoch int64
		hwm   map[int32]int64
	}{{firstEpoch, hwm}, {secondEpoch, hwm2}} {
		for p, end := range tc.hwm {
			for o := range end {
				if n := seen[delivered{tc.epoch, p, o, ""}]; n != 1 {
					t.Errorf("epoch %d partition %d offset %d delivered %d times, want 1", tc.epoch, p, o, n)
				}
			}
		}
	}
	if len(got) != first+second {
		t.Errorf("%d deliveries, want %d: each record of both topics once, under its topic's epoch", len(got), first+second)
	}
	if fs := eng.Status().Feeds[0]; !fs.Lossless {
		t.Errorf("feed not lossless (%v): nothing was left unread when the topic was deleted", fs.Losses)
	}
}

// commitAs commits offset at of partition 0 of topic for group with kadm
// (a simple commit: the group has no member), with metadata meta.
func commitAs(t *testing.T, c *kfake.Cluster, group string, at int64, meta string) {
	t.Helper()
	adm, done := admin(t, c)
	defer done()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1, Metadata: meta})
	if r, err := adm.CommitOffsets(context.Background(), group, os); err != nil || r.Error() != nil {
		t.Fatalf("committing %d for group %s: %v %v", at, group, err, r.Error())
	}
}

// consumeAll runs a source of group on c until partition 0 is committed to
// hwm, and returns how many times each offset was handled and the feed's
// status.
func consumeAll(t *testing.T, c *kfake.Cluster, group string, hwm int64) ([]int, engine.FeedStatus) {
	t.Helper()
	src := newSource(t, c, group, nil)
	handled := make([]atomic.Int32, hwm)
	eng := startEngine(t, src, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		handled[ev.(*kafkasource.Record).Offset].Add(1)
		return nil
	}))
	testutil.PollUntil(t, time.Minute, "committed to the end", func() bool { return allCommitted(src, map[int32]int64{0: hwm}) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	got := make([]int, hwm)
	for i := range handled {
		got[i] = int(handled[i].Load())
	}
	return got, eng.Status().Feeds[0]
}

// onceEach fails unless every offset was handled once.
func onceEach(t *testing.T, handled []int) {
	t.Helper()
	for o, n := range handled {
		if n != 1 {
			t.Errorf("offset %d handled %d times, want 1", o, n)
		}
	}
}

// TestAGroupCommitPastThePartitionsEndIsALossOfUnknownSize: the group's
// commit of a partition is past the partition's log end: the broker lost
// records (an unclean leader election: the commit names the topic's own
// ID), or a commit naming no topic ID (of this topic, or of a deleted one
// of the same name: which is unknown). The records the log held past the
// commit, which the group never read, are gone and how many cannot be
// known: the source counts one loss (reason "truncated", the partition,
// From the commit, Items 0: unknown), reported to the group's observer
// (the recorder's LOST row), and the feed is not lossless. It reads the
// partition from its log start, each record once, and commits what it
// processed: the group's commit is the partition's end, not left past it.
// A partition with no record left returns nothing in a fetch: its end
// offsets show the loss. The loss is of the topic's epoch also when the
// partition is assigned, and the group's commit known, before the source's
// first duty cycle read the topic's ID (a run slow to start: the loss was
// reported under epoch 0).
func TestAGroupCommitPastThePartitionsEndIsALossOfUnknownSize(t *testing.T) {
	type tcase struct {
		name        string
		records     int
		commit      int64
		tagTopicsID bool // the commit's metadata names the topic's ID (as the source's commits do)
		early       bool // assigned, the commit fetched, before the first duty cycle
	}
	var cases []tcase
	for _, early := range []bool{false, true} {
		for _, tc := range []tcase{
			{"records the broker lost past a commit of the topic", 5, 50, true, false},
			{"a commit naming no topic ID", 50, 500, false, false},
			{"no record left below a commit of the topic", 0, 50, true, false},
		} {
			if tc.early = early; early {
				tc.name += ", assigned before the first duty cycle"
			}
			cases = append(cases, tc)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1)
			var end int64
			if tc.records > 0 {
				end = produce(t, c, tc.records, 5)[0]
			}
			meta := ""
			if tc.tagTopicsID {
				meta = topicTag(t, c)
			}
			const group = "gpast"
			commitAs(t, c, group, tc.commit, meta)
			src := newSource(t, c, group, nil)
			if tc.early {
				kafkasource.SetRunStarted(src, func(cl *kgo.Client) {
					testutil.PollUntil(t, time.Minute, "the partition assigned and the group's commit fetched", func() bool {
						_, ok := cl.CommittedOffsets()[topic][0]
						return ok
					})
				})
			}
			handled := make([]atomic.Int32, end)
			var mu sync.Mutex
			var lost []engine.SourceLoss
			eng, err := engine.New(engine.Config{
				Feeds: []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: 64}},
				Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"kafka"}, Processors: []engine.ProcessorConfig{{Name: "p",
					Processor: core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
						handled[ev.(*kafkasource.Record).Offset].Add(1)
						return nil
					})}}}},
				Observer: engine.Observer{Lost: func(_ string, l engine.SourceLoss) {
					mu.Lock()
					defer mu.Unlock()
					lost = append(lost, l)
				}},
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			var last string // what the poll saw last, said if it gives up
			defer func() {
				if t.Failed() {
					t.Logf("last seen: %s", last)
				}
			}()
			testutil.PollUntil(t, time.Minute, "the loss counted, every record committed", func() bool {
				mu.Lock()
				n := len(lost)
				mu.Unlock()
				settled := eng.Status().Settled
				last = fmt.Sprintf("%d losses, settled %v, partitions %+v", n, settled, src.Status().Partitions)
				return n > 0 && settled && (end == 0 || allCommitted(src, map[int32]int64{0: end}))
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := eng.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			for o := range handled {
				if n := handled[o].Load(); n != 1 {
					t.Errorf("offset %d handled %d times, want 1", o, n)
				}
			}
			fs := eng.Status().Feeds[0]
			if fs.Lossless || fs.Losses[kafkasource.LossTruncated] != 1 {
				t.Errorf("feed lossless %v, losses %v; want one %q loss", fs.Lossless, fs.Losses, kafkasource.LossTruncated)
			}
			mu.Lock()
			defer mu.Unlock()
			want := engine.Loss{Reason: kafkasource.LossTruncated, Items: 0, Epoch: topicEpoch(t, c), Key: topic + "/0", From: tc.commit, To: 0}
			if len(lost) != 1 {
				t.Fatalf("%d losses reported to the observer, want 1: %+v", len(lost), lost)
			}
			got := lost[0].Loss
			got.Detail = ""
			if got != want {
				t.Errorf("loss %+v, want %+v", got, want)
			}
			if d := lost[0].Detail; !strings.Contains(d, "unknown") || !strings.Contains(d, strconv.FormatInt(tc.commit, 10)) {
				t.Errorf("loss detail %q: want the commit and that the number of records lost is unknown", d)
			}
			if st := src.Status().Partitions; len(st) != 1 || st[0].Truncated != 1 {
				t.Errorf("partitions %+v: want partition 0 truncated once", st)
			}
			if got := committed(t, c, group); end > 0 && got[0] != end {
				t.Errorf("the group's commit %d, want the partition's end %d", got[0], end)
			}
		})
	}
}

// topicTag is the metadata the source commits an offset of topic with on
// c now: its topic ID.
func topicTag(t *testing.T, c *kfake.Cluster) string {
	t.Helper()
	id := topicID(t, c)
	return "blackbox topic-id=" + hex.EncodeToString(id[:])
}

// TestACommitOfADeletedTopicLandedOnTheTopicCreatedAgainSkipsNothing: the
// source commits each offset with its topic's ID in the commit's metadata.
// The topic is deleted and created again, and a commit of the first topic
// lands on the second (as a broker before Kafka 4.2 lets a member that
// still reads the first topic commit it by name), below the second's end:
// the client would start there and skip the records before it. The source
// sees that the commit names another topic ID and reads the partition
// from its log start: every record of the second topic once.
func TestACommitOfADeletedTopicLandedOnTheTopicCreatedAgainSkipsNothing(t *testing.T) {
	c := newCluster(t, 1)
	hwm := produce(t, c, 40, 5)
	consumeAll(t, c, "gland", hwm[0])
	adm, done := admin(t, c)
	offs, err := adm.FetchOffsets(context.Background(), "gland")
	done()
	if err != nil {
		t.Fatal(err)
	}
	first, ok := offs.Lookup(topic, 0)
	if !ok || !strings.HasPrefix(first.Metadata, "blackbox topic-id=") {
		t.Fatalf("the group's commit of the first topic %+v: want its metadata to name the topic ID", first)
	}
	recreateTopic(t, c, 1)
	hwm = produce(t, c, 80, 5)
	commitAs(t, c, "gland", 30, first.Metadata)
	handled, fs := consumeAll(t, c, "gland", hwm[0])
	onceEach(t, handled)
	if !fs.Lossless {
		t.Errorf("not lossless (%v): every record of the second topic was read", fs.Losses)
	}
}

// TestRecordsOfADeletedTopicStillQueuedAreNeverCommittedToTheTopicCreatedAgain:
// the processor is stuck at offset 50 with the topic's 100 records
// published (queued) when the topic is deleted and created again, and 3
// records produced to it. The source reads the new topic under its new
// epoch, and only then are the queued records of the first topic
// processed: their acknowledgements (positions up to 100, past the new
// topic's end) are of another incarnation, published before the partition
// was assigned again, and fenced. The new topic's commit is its end, 3:
// had they been committed, the group would hold a commit past the new
// topic's records, and the records produced to it later would be skipped.
func TestRecordsOfADeletedTopicStillQueuedAreNeverCommittedToTheTopicCreatedAgain(t *testing.T) {
	c := newCluster(t, 1)
	produce(t, c, 100, 10)
	firstEpoch := topicEpoch(t, c)
	src := newSource(t, c, "gfence", nil)
	gate, stuck := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	var firstSeen, secondSeen atomic.Int64
	eng := startEngineQueue(t, src, 256, core.ProcessorFunc(func(cy *core.Cycle, ev any) error {
		if ev.(*kafkasource.Record).Offset == 50 && once.CompareAndSwap(false, true) {
			close(stuck)
			<-gate
		}
		if cy.Delivery().Epoch == firstEpoch {
			firstSeen.Add(1)
		} else {
			secondSeen.Add(1)
		}
		return nil
	}))
	<-stuck
	testutil.PollUntil(t, time.Minute, "every record of the first topic published", func() bool {
		st := src.Status().Partitions
		return len(st) == 1 && st[0].Published == 100
	})
	recreateTopic(t, c, 1)
	produce(t, c, 3, 3)
	secondEpoch := topicEpoch(t, c)
	testutil.PollUntil(t, time.Minute, "the topic created again assigned and its records published", func() bool {
		st := src.Status().Partitions
		return len(st) == 1 && st[0].Owned && st[0].Epoch == secondEpoch && st[0].Published == 3
	})
	close(gate)
	testutil.PollUntil(t, time.Minute, "every record processed, the new topic's committed", func() bool {
		return firstSeen.Load() == 100 && secondSeen.Load() == 3 && committed(t, c, "gfence")[0] == 3 && eng.Status().Settled
	})
	if got := committed(t, c, "gfence")[0]; got != 3 {
		t.Errorf("the new topic's commit %d, want its end 3", got)
	}
	if src.Status().Fenced == 0 {
		t.Error("no acknowledgement fenced: the first topic's queued records were acknowledged into the new topic's")
	}
}
