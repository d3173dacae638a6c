package kafkasource_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
)

// topicEpoch is the epoch of topic's records on c now: TopicEpoch of its
// topic ID.
func topicEpoch(t *testing.T, c *kfake.Cluster) int64 {
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
	return kafkasource.TopicEpoch(d.ID)
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
	eventually(t, time.Minute, "the topic created again", func() bool {
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
	eventually(t, time.Minute, "the first topic committed to its end", func() bool { return allCommitted(src, hwm) })
	recreateTopic(t, c, 2)
	hwm2 := produce(t, c, second, 5)
	secondEpoch := topicEpoch(t, c)
	if secondEpoch == firstEpoch {
		t.Fatalf("the topic created again has the epoch of the first, %d", firstEpoch)
	}
	eventually(t, time.Minute, "the second topic read and committed to its end", func() bool {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		return n >= first+second && allCommitted(src, hwm2)
	})
	eventually(t, 10*time.Second, "no commit failure left", func() bool { return src.Status().LastError == "" })
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
