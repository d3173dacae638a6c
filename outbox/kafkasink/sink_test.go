package kafkasink_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/outbox/kafkasink"
)

// checkOnce checks that outs holds each of want's effects once, with its
// batch, and nothing else; and that the outputs of one input key are in
// one partition.
func checkOnce(t *testing.T, outs []output, want map[core.EffectKey]int64) {
	t.Helper()
	seen := map[core.EffectKey]int{}
	part := map[string]int32{}
	for _, o := range outs {
		seen[o.Key]++
		b, ok := want[o.Key]
		switch {
		case !ok:
			t.Errorf("an output not delivered: %+v", o)
		case o.Batch != b:
			t.Errorf("output %+v: batch %d, want %d", o.Key, o.Batch, b)
		case o.Value != fmt.Sprintf(`{"offset":%d}`, o.Key.Position.Offset):
			t.Errorf("output %+v: value %s", o.Key, o.Value)
		}
		if p, ok := part[o.Key.Position.Key]; ok && p != o.Part {
			t.Errorf("the outputs of input key %s are in partitions %d and %d", o.Key.Position.Key, p, o.Part)
		}
		part[o.Key.Position.Key] = o.Part
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("output %+v read %d times, want once", k, seen[k])
		}
	}
}

// deliver delivers batch n of effects to s and notes them in want.
func deliver(t *testing.T, s *kafkasink.Sink, n int64, es []core.Effect, want map[core.EffectKey]int64) {
	t.Helper()
	if err := s.Deliver(n, es); err != nil {
		t.Fatalf("batch %d: %v", n, err)
	}
	for _, e := range es {
		want[e.Key] = n
	}
}

// delivered is s.Delivered, failing the test on an error.
func delivered(t *testing.T, s *kafkasink.Sink) int64 {
	t.Helper()
	n, err := s.Delivered()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEachBatchIsOneCommittedTransaction: an empty topic holds no batch
// (Delivered 0); each batch delivered is committed before Deliver
// returns: a read_committed reader sees each output once, with its batch
// and key headers, the outputs of one input key in one partition, and
// Delivered is the last batch, whatever window it reads back with.
func TestEachBatchIsOneCommittedTransaction(t *testing.T) {
	for _, window := range []int64{1, 3, kafkasink.DefaultScanWindow} {
		t.Run(strconv.FormatInt(window, 10), func(t *testing.T) {
			c := newCluster(t)
			s := openSink(t, c, "tx", window)
			if got := delivered(t, s); got != 0 {
				t.Fatalf("Delivered on an empty topic: %d, want 0", got)
			}
			want := map[core.EffectKey]int64{}
			for n := int64(1); n <= 4; n++ {
				deliver(t, s, n, effects(int(n)*10, int(n)+1), want)
				if got := delivered(t, s); got != n {
					t.Fatalf("Delivered after batch %d: %d", n, got)
				}
			}
			checkOnce(t, readCommitted(t, c), want)
		})
	}
}

// killedTransaction opens a transaction with txid on c, as a Sink's
// Deliver of batch n does, produces es in it and leaves it open: a
// process killed before its EndTransaction. It returns the client, whose
// later commit the test may try.
func killedTransaction(t *testing.T, c *kfake.Cluster, txid string, n int64, es []core.Effect) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID(txid), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, e := range es {
		r := &kgo.Record{Key: []byte(e.Key.Position.Key), Value: e.Payload, Headers: []kgo.RecordHeader{
			{Key: kafkasink.HeaderOutbox, Value: []byte(txid)}, {Key: kafkasink.HeaderBatch, Value: []byte(strconv.FormatInt(n, 10))}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

// TestARestartFencesAKilledTransaction: a process killed inside batch 3's
// transaction (its records written, no commit) leaves it open; the
// restart's Open fences it and aborts it at once (no transaction open: a
// read_committed reader reads to the end without waiting for the
// minute-long transaction timeout), Delivered says 2 (the aborted records
// and the abort marker at the tail are skipped, whatever the window), the
// killed producer's late commit is refused, and batch 3 delivered again is
// in the topic once.
func TestARestartFencesAKilledTransaction(t *testing.T) {
	for _, window := range []int64{1, kafkasink.DefaultScanWindow} {
		t.Run(strconv.FormatInt(window, 10), func(t *testing.T) {
			c := newCluster(t)
			want := map[core.EffectKey]int64{}
			first := openSink(t, c, "tx", window)
			deliver(t, first, 1, effects(0, 5), want)
			deliver(t, first, 2, effects(5, 5), want)
			first.Close()
			third := effects(10, 20)
			killed := killedTransaction(t, c, "tx", 3, third)

			s := openSink(t, c, "tx", window)
			if got := delivered(t, s); got != 2 {
				t.Fatalf("Delivered after the killed batch 3: %d, want 2", got)
			}
			checkOnce(t, readCommitted(t, c), want) // fails if the killed transaction is still open
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := killed.EndTransaction(ctx, kgo.TryCommit); err == nil {
				t.Fatal("the fenced producer committed its transaction")
			}
			deliver(t, s, 3, third, want)
			if got := delivered(t, s); got != 3 {
				t.Fatalf("Delivered after batch 3 again: %d, want 3", got)
			}
			checkOnce(t, readCommitted(t, c), want)
		})
	}
}

// TestAFencedSinkCommitsNothingAndDeliveredIsTheLastCommittedBatch: a sink
// fenced by a second one with its transactional id (a restart while the
// first still runs) fails its next batch with ErrFenced, and nothing of
// that batch is visible; Delivered, asked of the second, is the first's
// last committed batch.
func TestAFencedSinkCommitsNothingAndDeliveredIsTheLastCommittedBatch(t *testing.T) {
	c := newCluster(t)
	want := map[core.EffectKey]int64{}
	first := openSink(t, c, "tx", 0)
	deliver(t, first, 1, effects(0, 4), want)
	deliver(t, first, 2, effects(4, 4), want)
	second := openSink(t, c, "tx", 0)
	if err := first.Deliver(3, effects(8, 4)); !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("the fenced sink's batch 3: %v, want ErrFenced", err)
	}
	if got := delivered(t, second); got != 2 {
		t.Fatalf("Delivered: %d, want 2", got)
	}
	checkOnce(t, readCommitted(t, c), want)
}

// TestDeliveredCountsOnlyItsOwnRecords: records of other producers (plain,
// and another transactional id's batches, numbered higher) follow the
// sink's in the topic: Delivered reads back past them, window after
// window, to its own last batch; with none of its own it is 0.
func TestDeliveredCountsOnlyItsOwnRecords(t *testing.T) {
	c := newCluster(t)
	s := openSink(t, c, "tx", 2)
	if err := s.Deliver(1, effects(0, 3)); err != nil {
		t.Fatal(err)
	}
	other := openSink(t, c, "other", 0)
	for n := int64(1); n <= 5; n++ {
		if err := other.Deliver(n+10, effects(100, 4)); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for i := range 30 {
		r := &kgo.Record{Key: []byte("in/0"), Value: []byte("x"), Headers: []kgo.RecordHeader{{Key: kafkasink.HeaderBatch, Value: []byte("99")}}}
		if i%2 == 0 {
			r.Key = []byte("in/1")
		}
		if err := plain.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := delivered(t, s); got != 1 {
		t.Errorf("Delivered: %d, want 1 (the other producers' batches are not its own)", got)
	}
	if got := delivered(t, openSink(t, c, "none", 2)); got != 0 {
		t.Errorf("Delivered of an id without records: %d, want 0", got)
	}
}

// TestOpenRefusesAMissingTopicAndAnIncompleteConfig.
func TestOpenRefusesAMissingTopicAndAnIncompleteConfig(t *testing.T) {
	c := newCluster(t)
	for _, tc := range []struct {
		name string
		cfg  kafkasink.Config
		want error
	}{
		{"no brokers", kafkasink.Config{Topic: topic, TransactionalID: "tx"}, kafkasink.ErrConfig},
		{"no topic", kafkasink.Config{Brokers: c.ListenAddrs(), TransactionalID: "tx"}, kafkasink.ErrConfig},
		{"no transactional id", kafkasink.Config{Brokers: c.ListenAddrs(), Topic: topic}, kafkasink.ErrConfig},
		{"a topic that does not exist", kafkasink.Config{Brokers: c.ListenAddrs(), Topic: "nope", TransactionalID: "tx"}, kafkasink.ErrNoTopic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = slog.New(slog.DiscardHandler)
			s, err := kafkasink.Open(context.Background(), tc.cfg)
			if !errors.Is(err, tc.want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestABatchThatFailsIsAbortedWhole: batch 2 holds an output too large for
// the topic after outputs that fit: Deliver fails, nothing of batch 2 is
// visible to a read_committed reader, Delivered stays 1, and batch 2
// delivered again (as the next run's recovery does) is there once.
func TestABatchThatFailsIsAbortedWhole(t *testing.T) {
	c := newCluster(t)
	s := openSink(t, c, "tx", 0)
	want := map[core.EffectKey]int64{}
	deliver(t, s, 1, effects(0, 3), want)
	second := effects(3, 6)
	huge := append([]core.Effect(nil), second...)
	huge[5].Payload = make([]byte, 2<<20)
	if err := s.Deliver(2, huge); err == nil {
		t.Fatal("a batch with a 2 MiB record delivered")
	}
	if got := delivered(t, s); got != 1 {
		t.Fatalf("Delivered after the failed batch 2: %d, want 1", got)
	}
	checkOnce(t, readCommitted(t, c), want)
	deliver(t, s, 2, second, want)
	checkOnce(t, readCommitted(t, c), want)
}

// abortCommits makes the cluster abort the next n transactions its
// clients ask to commit (each EndTxn request turned into an abort, its
// answer a success): the client believes them committed, as franz-go
// does when it ends a transaction by an abort of its own.
func abortCommits(c *kfake.Cluster, n int) {
	left := n
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if r := req.(*kmsg.EndTxnRequest); r.Commit && left > 0 {
			r.Commit = false
			left--
		}
		return nil, nil, false
	})
}

// TestACommitTheBrokersAbortedIsTriedAgain: a batch's transaction that the
// client reports committed but the brokers aborted is not taken for
// delivered: Deliver reads it back, finds it aborted and makes it again
// (a reader sees it once), and warns; aborted every time, Deliver fails
// with ErrNotCommitted and Delivered stays at the batch before.
func TestACommitTheBrokersAbortedIsTriedAgain(t *testing.T) {
	c := newCluster(t)
	var logs testutil.Logs
	s, err := kafkasink.Open(context.Background(), kafkasink.Config{Brokers: c.ListenAddrs(), Topic: topic,
		TransactionalID: "tx", Timeout: 20 * time.Second, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[core.EffectKey]int64{}
	deliver(t, s, 1, effects(0, 4), want)
	abortCommits(c, 1)
	deliver(t, s, 2, effects(4, 4), want)
	if got := delivered(t, s); got != 2 {
		t.Fatalf("Delivered after batch 2 tried again: %d, want 2", got)
	}
	if !logs.Has("batch 2") || logs.Count() != 1 {
		t.Fatalf("want one warning of batch 2 tried again, got:\n%s", logs.String())
	}
	abortCommits(c, 3)
	if err := s.Deliver(3, effects(8, 4)); !errors.Is(err, kafkasink.ErrNotCommitted) {
		t.Fatalf("batch 3 aborted 3 times: %v, want ErrNotCommitted", err)
	}
	if got := delivered(t, s); got != 2 {
		t.Fatalf("Delivered after batch 3 failed: %d, want 2", got)
	}
	checkOnce(t, readCommitted(t, c), want)
}
