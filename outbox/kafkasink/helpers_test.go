package kafkasink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/outbox/kafkasink"
)

const topic = "out"

// newCluster starts an in-process cluster (kfake: transactions and
// read_committed fetches) with topic of 3 partitions, closed at the end of
// the test.
func newCluster(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// openSink opens a sink on c's topic with transactional id txid (and
// cfg's window), closed at the end of the test.
func openSink(t testing.TB, c *kfake.Cluster, txid string, window int64) *kafkasink.Sink {
	t.Helper()
	s, err := kafkasink.Open(context.Background(), kafkasink.Config{Brokers: c.ListenAddrs(), Topic: topic,
		TransactionalID: txid, ScanWindow: window, Timeout: 20 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// effects makes n effects of inputs at offsets from, of the partitions
// "in/0".."in/2" by offset, each payload naming its key.
func effects(from, n int) []core.Effect {
	es := make([]core.Effect, n)
	for i := range es {
		off := int64(from + i)
		k := core.EffectKey{Feed: "input", Epoch: 1, Position: core.Position{Key: fmt.Sprintf("in/%d", off%3), Offset: off}, Index: 1}
		es[i] = core.Effect{Key: k, Stream: "ledger", Sink: "out", Payload: fmt.Appendf(nil, `{"offset":%d}`, off)}
	}
	return es
}

// output is a record of the topic as a test reads it.
type output struct {
	Batch int64
	Key   core.EffectKey
	Value string
	Part  int32
}

// readCommitted reads c's topic from its start with read_committed
// isolation to its end (every partition read to its high watermark: the
// control markers are kept to know it) and returns the data records. It
// fails the test if a transaction is left open (the last stable offset
// behind the high watermark: a reader would stall).
func readCommitted(t *testing.T, c *kfake.Cluster) []output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stable, err := kadm.NewClient(adm).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, _ := stable.Lookup(topic, o.Partition); s.Offset != o.Offset {
			t.Fatalf("partition %d: last stable offset %d, high watermark %d: a transaction is open", o.Partition, s.Offset, o.Offset)
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var outs []output
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: still to read to %v", topic, want)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("reading %s: %v", topic, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			o := output{Value: string(r.Value), Part: r.Partition}
			for _, h := range r.Headers {
				switch h.Key {
				case kafkasink.HeaderBatch:
					o.Batch, _ = strconv.ParseInt(string(h.Value), 10, 64)
				case kafkasink.HeaderKey:
					if err := json.Unmarshal(h.Value, &o.Key); err != nil {
						t.Errorf("offset %d: key header %q: %v", r.Offset, h.Value, err)
					}
				}
			}
			outs = append(outs, o)
		})
	}
	return outs
}
