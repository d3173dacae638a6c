package kafkasource_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// deleteRecords deletes topic's records of partition 0 before offset
// (what retention does: the log start offset moves to offset).
func deleteRecords(t *testing.T, adm *kadm.Client, before int64) {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: before})
	resp, err := adm.DeleteRecords(context.Background(), os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting the records before %d: %v", before, err)
	}
}

// partitionLost is partition 0's Lost in the source's status.
func partitionLost(src *kafkasource.Source) int64 {
	for _, p := range src.Status().Partitions {
		if p.Partition == 0 {
			return p.Lost
		}
	}
	return -1
}

// TestRecordsDeletedBeforeTheGroupReadThemAreCountedLost: the group's
// committed offset (or, with no commit, offset 0) is below the
// partition's log start: the records between were deleted (retention)
// before the group read them. The source reads from the log start on and
// counts the deleted ones as a loss (reason "retention", the feed not
// lossless, Status: Lost); records deleted that the group had committed
// past are no loss.
func TestRecordsDeletedBeforeTheGroupReadThemAreCountedLost(t *testing.T) {
	const n = 100
	for _, tc := range []struct {
		name      string
		committed int64 // the group's commit before the run (-1: none)
		deleted   int64 // the log start offset
		wantLost  int64
	}{
		{"below the committed offset", 10, 60, 50},
		{"a group that never committed", -1, 30, 30},
		{"deleted only what the group had read", 40, 30, 0},
		{"every record deleted", 10, 100, 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1)
			hwm := produce(t, c, n, 10)
			adm, done := admin(t, c)
			defer done()
			if tc.committed >= 0 {
				var os kadm.Offsets
				os.Add(kadm.Offset{Topic: topic, Partition: 0, At: tc.committed, LeaderEpoch: -1})
				if _, err := adm.CommitOffsets(context.Background(), "gret", os); err != nil {
					t.Fatal(err)
				}
			}
			deleteRecords(t, adm, tc.deleted)
			src := newSource(t, c, "gret", nil)
			tl := newTally(hwm)
			eng := startEngine(t, src, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
				tl.add(ev.(*kafkasource.Record))
				return nil
			}))
			from := max(tc.committed, tc.deleted)
			// The source counts a loss in its own status before it
			// tells the engine (Intake.AddLoss, outside the source's
			// lock): two snapshots, awaited both.
			testutil.PollUntil(t, time.Minute, "every record left processed and committed, the deleted ones counted", func() bool {
				return partitionLost(src) == tc.wantLost && (eng.Status().Feeds[0].Losses["retention"] > 0) == (tc.wantLost > 0) &&
					(from == n || allCommitted(src, hwm))
			})
			for o := range int64(n) {
				want := int32(0)
				if o >= from {
					want = 1
				}
				if got := tl.parts[0][o].Load(); got != want {
					t.Errorf("offset %d processed %d times, want %d", o, got, want)
				}
			}
			fs := eng.Status().Feeds[0]
			if got := partitionLost(src); got != tc.wantLost {
				t.Errorf("partition lost %d records, want %d", got, tc.wantLost)
			}
			if lossless := tc.wantLost == 0; fs.Lossless != lossless || (fs.Losses["retention"] > 0) == lossless {
				t.Errorf("feed lossless %v, losses %v; want lossless %v", fs.Lossless, fs.Losses, lossless)
			}
		})
	}
}

// TestRecordsDeletedWhileTheConsumerIsBehindAreCountedLost: the processor
// is stuck at offset 20 with the fetches paused behind it; the records
// before offset 60 are deleted meanwhile. Once it goes on, the source
// finds its next offset below the log start (the client resumes at the log
// start): every record is either processed exactly once or counted lost,
// none both, and the feed is not lossless.
func TestRecordsDeletedWhileTheConsumerIsBehindAreCountedLost(t *testing.T) {
	const n, stuckAt, deleted = 100, 20, 60
	c := newCluster(t, 1)
	hwm := produce(t, c, n, 10, kgo.ProducerBatchMaxBytes(512))
	adm, done := admin(t, c)
	defer done()
	src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gbehind",
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
		if r.Offset == stuckAt && once.CompareAndSwap(false, true) {
			close(stuck)
			<-gate
		}
		tl.add(r)
		return nil
	}))
	<-stuck
	testutil.PollUntil(t, time.Minute, "the fetches paused behind the stuck processor", func() bool {
		for _, p := range src.Status().Partitions {
			if p.Paused {
				return true
			}
		}
		return false
	})
	deleteRecords(t, adm, deleted)
	close(gate)
	testutil.PollUntil(t, time.Minute, "every record left committed", func() bool { return allCommitted(src, hwm) })
	lost := partitionLost(src)
	var processed int64
	for o := range int64(n) {
		switch got := tl.parts[0][o].Load(); {
		case got > 1:
			t.Errorf("offset %d processed %d times", o, got)
		case got == 1:
			processed++
		}
	}
	if lost == 0 || processed+lost != n {
		t.Errorf("%d records processed and %d counted lost, want some lost and %d in all", processed, lost, n)
	}
	if fs := eng.Status().Feeds[0]; fs.Lossless || fs.Losses["retention"] == 0 {
		t.Errorf("feed lossless %v, losses %v; want a retention loss", fs.Lossless, fs.Losses)
	}
}
