package kafkasource_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/store"
)

// commitLog records every OffsetCommit the broker takes: who sent it and
// the offsets, in order.
type commitLog struct {
	mu      sync.Mutex
	commits []commitEntry
}

type commitEntry struct {
	member    string
	partition int32
	offset    int64
}

func (l *commitLog) watch(c interface {
	ControlKey(int16, func(kmsg.Request) (kmsg.Response, error, bool))
	KeepControl()
}) {
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				l.commits = append(l.commits, commitEntry{r.MemberID, p.Partition, p.Offset})
			}
		}
		return nil, nil, false
	})
}

func (l *commitLog) snapshot() []commitEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]commitEntry(nil), l.commits...)
}

// TestARevokedPartitionIsCommittedToItsProcessedPrefixAndItsQueuedRecordsAreFenced:
// consumer A owns every partition and is stuck with records of each queued;
// consumer B joins and the rebalance revokes some from A: A commits their
// processed prefix and B reads on from there, to the end. When A's records
// queued for the revoked partitions are processed after that, A never
// commits them (fenced): no commit of A for a partition follows B's first
// commit of it (it would move B's offsets back). At the end
// every record is processed, the committed offsets are the high
// watermarks, and the records processed twice are no more than those fenced.
//
// Over 100 lines: one rebalance scenario in order (A stuck, B joins, the
// revocation, A released), whose checks read the commit log every step
// added to.
func TestARevokedPartitionIsCommittedToItsProcessedPrefixAndItsQueuedRecordsAreFenced(t *testing.T) {
	const n = 4000
	c := newCluster(t, 4)
	// Small batches: a fetch returns a little of every partition.
	hwm := produce(t, c, n, 400, kgo.ProducerBatchMaxBytes(1<<10))
	var log commitLog
	log.watch(c)
	tl := newTally(hwm)
	small := kgo.FetchMaxPartitionBytes(2 << 10) // each fetch holds a little of every partition

	srcA, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "grebal",
		PollInterval: 10 * time.Millisecond, RevokeTimeout: 100 * time.Millisecond, MaxPollRecords: 64,
		Logger: slog.New(slog.DiscardHandler), ClientOptions: []kgo.Opt{small}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srcA.Close() })
	gate := make(chan struct{})
	var handledA atomic.Int64
	stuck := make(chan struct{})
	startEngine(t, srcA, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		if handledA.Add(1) == 200 {
			close(stuck)
			<-gate
		}
		tl.add(ev.(*kafkasource.Record))
		return nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case <-stuck:
	case <-ctx.Done():
		t.Fatal("A never handled 200 records")
	}
	testutil.PollUntil(t, time.Minute, "A committed what it processed before it got stuck", func() bool { return len(log.snapshot()) > 0 })
	memberA := log.snapshot()[0].member

	srcB := newSource(t, c, "grebal", nil, small)
	startEngine(t, srcB, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		tl.add(ev.(*kafkasource.Record))
		return nil
	}))
	testutil.PollUntil(t, time.Minute, "B owns partitions", func() bool {
		for _, p := range srcB.Status().Partitions {
			if p.Owned {
				return true
			}
		}
		return false
	})
	revoked := map[int32]bool{}
	for _, p := range srcB.Status().Partitions {
		if p.Owned {
			revoked[p.Partition] = true
		}
	}
	testutil.PollUntil(t, time.Minute, "B committed its partitions to their high watermarks", func() bool {
		got := committed(t, c, "grebal")
		for p := range revoked {
			if got[p] != hwm[p] {
				return false
			}
		}
		return true
	})
	close(gate) // A processes its records of the revoked partitions now, after B's commits
	testutil.PollUntil(t, time.Minute, "every partition committed to its high watermark", func() bool {
		return equalOffsets(committed(t, c, "grebal"), hwm)
	})

	stA := srcA.Status()
	if stA.Fenced == 0 {
		t.Fatalf("A fenced nothing: the revoked partitions %v had no queued record (status %+v)", revoked, stA)
	}
	bCommitted := map[int32]bool{}
	for _, e := range log.snapshot() {
		if e.member != memberA {
			bCommitted[e.partition] = true
			continue
		}
		if bCommitted[e.partition] {
			t.Errorf("A committed partition %d at %d after B's first commit of it", e.partition, e.offset)
		}
	}
	// Each partition's records processed twice are no more than A says it
	// fenced of that partition, and those counts add up to A's total.
	fencedOf := map[int32]int64{}
	var sum int64
	for _, p := range stA.Partitions {
		fencedOf[p.Partition] = p.Fenced
		sum += p.Fenced
	}
	if sum != stA.Fenced {
		t.Errorf("A's partitions fenced %v records, %d in all; its total says %d", fencedOf, sum, stA.Fenced)
	}
	var dups int64
	for p, offs := range tl.parts {
		var twice int64
		for o := range offs {
			switch k := offs[o].Load(); {
			case k == 0:
				t.Errorf("partition %d offset %d never processed", p, o)
			case k > 1:
				if !revoked[int32(p)] {
					t.Errorf("partition %d (not revoked) offset %d processed %d times", p, o, k)
				}
				twice += int64(k - 1)
			}
		}
		if twice > fencedOf[int32(p)] {
			t.Errorf("partition %d: %d records processed twice, more than the %d A fenced of it", p, twice, fencedOf[int32(p)])
		}
		dups += twice
	}
	if dups > stA.Fenced {
		t.Errorf("%d records processed twice, more than the %d fenced", dups, stA.Fenced)
	}
	t.Logf("revoked %v; A fenced %d; %d processed twice", revoked, stA.Fenced, dups)
}

// TestARevokedPartitionsFencedRecordsLeaveNoCommitRowKafkaNeverHeld:
// consumer A, recorded, owns every partition and is stuck with records of
// each queued; B joins, the revocation times out, B commits the revoked
// partitions to their ends, and only then does A process its queued
// records of them: their acknowledgements are fenced, A commits nothing
// for them. A's recording then holds a COMMIT row only for a position A
// really committed (the broker took that offset from A): none claims an
// offset of a revoked partition that Kafka never held from A.
func TestARevokedPartitionsFencedRecordsLeaveNoCommitRowKafkaNeverHeld(t *testing.T) {
	const n = 4000
	c := newCluster(t, 4)
	hwm := produce(t, c, n, 400, kgo.ProducerBatchMaxBytes(1<<10))
	var log commitLog
	log.watch(c)
	small := kgo.FetchMaxPartitionBytes(2 << 10)

	srcA, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gfence",
		PollInterval: 10 * time.Millisecond, RevokeTimeout: 100 * time.Millisecond, MaxPollRecords: 64,
		Logger: slog.New(slog.DiscardHandler), ClientOptions: []kgo.Opt{small}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srcA.Close() })
	gate := make(chan struct{})
	stuck := make(chan struct{})
	var handledA atomic.Int64
	memA := store.NewMemory()
	runA := recordGroup(t, srcA, memA, func(*kafkasource.Record) {
		if handledA.Add(1) == 200 {
			close(stuck)
			<-gate
		}
	})
	select {
	case <-stuck:
	case <-time.After(time.Minute):
		t.Fatal("A never handled 200 records")
	}
	testutil.PollUntil(t, time.Minute, "A committed what it processed before it got stuck", func() bool { return len(log.snapshot()) > 0 })
	memberA := log.snapshot()[0].member

	srcB := newSource(t, c, "gfence", nil, small)
	startEngine(t, srcB, core.ProcessorFunc(func(*core.Cycle, any) error { return nil }))
	testutil.PollUntil(t, time.Minute, "B owns partitions", func() bool {
		for _, p := range srcB.Status().Partitions {
			if p.Owned {
				return true
			}
		}
		return false
	})
	revoked := map[int32]bool{}
	for _, p := range srcB.Status().Partitions {
		if p.Owned {
			revoked[p.Partition] = true
		}
	}
	testutil.PollUntil(t, time.Minute, "B committed its partitions to their high watermarks", func() bool {
		got := committed(t, c, "gfence")
		for p := range revoked {
			if got[p] != hwm[p] {
				return false
			}
		}
		return true
	})
	close(gate)
	testutil.PollUntil(t, time.Minute, "every partition committed to its high watermark", func() bool {
		return equalOffsets(committed(t, c, "gfence"), hwm)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if stopErr, recErr := runA.Stop(ctx); stopErr != nil || recErr != nil {
		t.Fatalf("stop A: %v; recording: %v", stopErr, recErr)
	}
	srcA.Close()
	if srcA.Status().Fenced == 0 {
		t.Fatal("A fenced nothing: no record of a revoked partition was queued")
	}

	byA := map[commitEntry]bool{}
	for _, e := range log.snapshot() {
		if e.member == memberA {
			byA[e] = true
		}
	}
	rows := 0
	for e, err := range memA.ReadOnly().Rows() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != store.KindCommit {
			continue
		}
		rows++
		var p int32
		if _, err := fmt.Sscanf(e.Key, topic+"/%d", &p); err != nil {
			t.Fatalf("commit key %q: %v", e.Key, err)
		}
		if !byA[commitEntry{memberA, p, e.Offset}] {
			t.Errorf("A's recording has a COMMIT row of partition %d at %d (seq %d, epoch %d), an offset A never committed (revoked %v)",
				p, e.Offset, e.Seq, e.Epoch, revoked[p])
		}
	}
	if rows == 0 {
		t.Fatal("A's recording holds no COMMIT row")
	}
}

// TestAMemberJoiningABackloggedGroupIsAssignedWithinSeconds: A owns 4
// partitions with a slow processor (1ms a record) and a full poll of
// 8,192 records queued (the `run --kafka` defaults: the queue holds a
// poll), its buffer holding the next poll; B joins. The revocation of B's
// partitions hands back A's polled records of them at once and waits for
// their queued ones no longer than the default RevokeTimeout (2s): B owns
// partitions within 5s (the rest is the group's join rounds), where the
// revocation used to wait for A's whole backlog of them, records
// published while it waited included, up to 10s (members joined after
// 10-24s). Every record is processed, and each one A or B processed twice
// lies in a revoked partition (A's queued records of them, fenced).
func TestAMemberJoiningABackloggedGroupIsAssignedWithinSeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("a slow processor's backlog")
	}
	c := newCluster(t, 4)
	hwm := produce(t, c, 20000, 400, kgo.ProducerBatchMaxBytes(1<<10))
	fast := []kgo.Opt{kgo.FetchMaxPartitionBytes(2 << 10), kgo.HeartbeatInterval(100 * time.Millisecond)}
	srcA, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gjoin",
		PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), ClientOptions: fast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srcA.Close() })
	tl := newTally(hwm)
	var handledA atomic.Int64
	var slow atomic.Bool // until B owns partitions
	slow.Store(true)
	backlog := make(chan struct{})
	startEngineQueue(t, srcA, kafkasource.DefaultMaxPollRecords, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		if handledA.Add(1) == 100 {
			close(backlog) // the queue is full by now
		}
		if slow.Load() {
			time.Sleep(time.Millisecond) // the slow work
		}
		tl.add(ev.(*kafkasource.Record))
		return nil
	}))
	<-backlog
	srcB := newSource(t, c, "gjoin", nil, fast...)
	joined := time.Now()
	startEngine(t, srcB, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		tl.add(ev.(*kafkasource.Record))
		return nil
	}))
	owned := func(src *kafkasource.Source) map[int32]bool {
		m := map[int32]bool{}
		for _, p := range src.Status().Partitions {
			if p.Owned {
				m[p.Partition] = true
			}
		}
		return m
	}
	testutil.PollUntil(t, time.Minute, "B owns partitions", func() bool { return len(owned(srcB)) > 0 })
	took := time.Since(joined)
	slow.Store(false)
	revoked := owned(srcB)
	if bound := 5 * time.Second; took > bound {
		t.Errorf("B owned partitions %s after it joined, want within %s", took.Round(time.Millisecond), bound)
	}
	testutil.PollUntil(t, 2*time.Minute, "every partition committed to its high watermark", func() bool {
		return equalOffsets(committed(t, c, "gjoin"), hwm)
	})
	for p, offs := range tl.parts {
		for o := range offs {
			if k := offs[o].Load(); k == 0 || k > 1 && !revoked[int32(p)] {
				t.Errorf("partition %d (revoked from A: %v) offset %d processed %d times", p, revoked[int32(p)], o, k)
			}
		}
	}
	t.Logf("B owned %v %s after it joined; A fenced %d", revoked, took.Round(time.Millisecond), srcA.Status().Fenced)
}
