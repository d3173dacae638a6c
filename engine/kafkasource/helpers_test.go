package kafkasource_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
)

const topic = "events"

// newCluster starts an in-process cluster with topic of partitions
// partitions (and opts), closed at the end of the test, after the
// cleanups registered later: the test's sources leave their groups first.
func newCluster(t testing.TB, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newShortSessionCluster is newCluster whose groups take sessions down to
// 100ms (kfake's minimum is 6s): a killed member's partitions move on
// within a test.
func newShortSessionCluster(t testing.TB, partitions int32) *kfake.Cluster {
	t.Helper()
	return newCluster(t, partitions, kfake.GroupMinSessionTimeout(100*time.Millisecond))
}

// startChild starts this test binary again, running only the test named
// test, with env added to its environment and its standard error ours. It
// returns the child and a scanner of its standard output; the child is
// killed, if it still runs, when the test ends.
func startChild(t *testing.T, test string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // os.ErrProcessDone once the test waited for it
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(out)
}

// produce writes n records to topic, spread over its partitions by key
// (key "k<i mod keys>"), value "v<i>", and returns the high watermarks.
// opts are the producer's.
func produce(t testing.TB, c *kfake.Cluster, n, keys int, opts ...kgo.Opt) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(n + 1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Key: []byte("k" + strconv.Itoa(i%keys)), Value: []byte("v" + strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return highWatermarks(t, c)
}

// highWatermarks reads the end offsets of topic's partitions.
func highWatermarks(t testing.TB, c *kfake.Cluster) map[int32]int64 {
	t.Helper()
	adm, done := admin(t, c)
	defer done()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { got[o.Partition] = o.Offset })
	return got
}

// committed reads the group's committed offsets of topic with kadm.
func committed(t testing.TB, c *kfake.Cluster, group string) map[int32]int64 {
	t.Helper()
	adm, done := admin(t, c)
	defer done()
	os, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			got[o.Partition] = o.At
		}
	})
	return got
}

func admin(t testing.TB, c *kfake.Cluster) (*kadm.Client, func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	return kadm.NewClient(cl), cl.Close
}

// newSource returns a source on c's topic for group, closed at the end of
// the test.
func newSource(t testing.TB, c *kfake.Cluster, group string, log *slog.Logger, opts ...kgo.Opt) *kafkasource.Source {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: group,
		PollInterval: 10 * time.Millisecond, CommitTimeout: 2 * time.Second, Logger: log, ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// allCommitted reports whether the source committed every partition up to
// its high watermark in hwm.
func allCommitted(src *kafkasource.Source, hwm map[int32]int64) bool {
	got := map[int32]int64{}
	for _, p := range src.Status().Partitions {
		if p.Owned {
			got[p.Partition] = p.Committed
		}
	}
	for p, end := range hwm {
		if got[p] != end {
			return false
		}
	}
	return true
}

// countApp is an app that counts each partition's records and emits, at
// every 16th record of a partition, its partition key, offset, value and
// the count the instance has seen; seen (if not nil) is called for every
// record handled live.
func countApp(seen func(r *kafkasource.Record)) core.App {
	return core.App{
		Name: "count",
		New: func(map[string]string) (core.Processor, error) {
			n := map[string]int{}
			return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				r, ok := ev.(*kafkasource.Record)
				if !ok {
					return fmt.Errorf("not a record: %T", ev)
				}
				k := kafkasource.PartitionKey(r)
				n[k]++
				if seen != nil {
					seen(r)
				}
				if n[k]%16 == 0 { // an output per 16 records of a partition: the suite stays fast under -race
					c.Emit("out", fmt.Sprintf("%s@%d %s #%d", k, r.Offset, r.Value, n[k]))
				}
				return nil
			}), nil
		},
		Decode: kafkasource.Decode,
		Key:    kafkasource.PartitionKey,
	}
}

// tally counts each (partition, offset) handled.
type tally struct {
	parts [][]atomic.Int32
}

func newTally(hwm map[int32]int64) *tally {
	t := &tally{parts: make([][]atomic.Int32, len(hwm))}
	for p, end := range hwm {
		t.parts[p] = make([]atomic.Int32, end)
	}
	return t
}

func (t *tally) add(r *kafkasource.Record) { t.parts[r.Partition][r.Offset].Add(1) }

// check fails unless every record was handled exactly once.
func (t *tally) check(tb testing.TB) {
	tb.Helper()
	bad := 0
	for p, offs := range t.parts {
		for o := range offs {
			if n := offs[o].Load(); n != 1 {
				if bad++; bad <= 5 {
					tb.Errorf("partition %d offset %d handled %d times, want 1", p, o, n)
				}
			}
		}
	}
}
