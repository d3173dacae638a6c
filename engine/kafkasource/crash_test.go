package kafkasource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
)

// The crash test runs a child process (this test binary, re-executed with
// -test.run=^TestKafkaCrashChild$) consuming the parent's in-process
// cluster with a ledger-like processor: per partition it adds each record's
// value to a sum and counts it, keyed by partition and offset (a record at
// an offset below the partition's saved next offset was applied before: it
// is skipped), and saves the whole state atomically at each delivery's
// completion. The parent kills it with SIGKILL at random moments, restarts
// it, and checks the committed offsets against the state after each kill.
const (
	crashDirEnv     = "KAFKASOURCE_CRASH_DIR"
	crashBrokersEnv = "KAFKASOURCE_CRASH_BROKERS"
	crashTotalEnv   = "KAFKASOURCE_CRASH_TOTAL"
	crashGroup      = "crash"
	crashParts      = 4
	crashRecords    = 12_000
	crashProgress   = 250 // the child prints a line every crashProgress records applied
	crashKills      = 5
)

// ledgerState is the child's state: per partition key, the next offset to
// apply, the sum of the values applied and their count.
type ledgerState struct {
	Next  map[string]int64 `json:"next"`
	Sum   map[string]int64 `json:"sum"`
	Count map[string]int64 `json:"count"`
}

func readLedger(dir string) (ledgerState, error) {
	st := ledgerState{Next: map[string]int64{}, Sum: map[string]int64{}, Count: map[string]int64{}}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// ledger is the state the child's workers share (each worker applies the
// records of its own partitions).
type ledger struct {
	dir     string
	mu      sync.Mutex
	st      ledgerState
	applied int
	// next is the sum of st.Next: total once every record is applied,
	// then done is closed.
	next, total int64
	done        chan struct{}
}

func (l *ledger) apply(r *kafkasource.Record) (bool, error) {
	v, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil {
		return false, err
	}
	k := kafkasource.PartitionKey(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Offset < l.st.Next[k] {
		fmt.Println("redelivered") // applied before a crash: the parent counts these
		return false, nil
	}
	l.next += r.Offset + 1 - l.st.Next[k]
	l.st.Next[k] = r.Offset + 1
	if l.next == l.total {
		close(l.done)
	}
	l.st.Sum[k] += v
	l.st.Count[k]++
	l.applied++
	if l.applied%crashProgress == 0 {
		fmt.Println("progress", l.applied)
	}
	return true, nil
}

// Complete saves the whole state in one atomic replace.
func (l *ledger) Complete(*core.Delivery) error {
	l.mu.Lock()
	b, err := json.Marshal(l.st)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(l.dir, "state-*.tmp")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(l.dir, "state.json"))
}

func TestKafkaCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child of TestSIGKILLedConsumerAppliesEveryRecordOnceAndNeverCommitsAheadOfItsState")
	}
	total, err := strconv.ParseInt(os.Getenv(crashTotalEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	st, err := readLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{dir: dir, st: st, total: total, done: make(chan struct{})}
	for _, n := range st.Next {
		l.next += n
	}
	if l.next == total {
		close(l.done)
	}
	src, err := kafkasource.New(kafkasource.Options{Brokers: strings.Split(os.Getenv(crashBrokersEnv), ","),
		Topics: []string{topic}, Group: crashGroup, PollInterval: 10 * time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
		ClientOptions: []kgo.Opt{kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: 256}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"kafka"}, Workers: crashParts, Order: engine.OrderKey,
			Key: kafkasource.PartitionKey,
			Processors: []engine.ProcessorConfig{{Name: "ledger", New: func() (core.Processor, error) {
				return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
					applied, err := l.apply(ev.(*kafkasource.Record))
					if applied {
						c.OnComplete(l)
					}
					return err
				}), nil
			}}}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-l.done
	fmt.Println("done")
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	src.Close()
}

// TestSIGKILLedConsumerAppliesEveryRecordOnceAndNeverCommitsAheadOfItsState:
// a child consuming with the ledger is killed with SIGKILL 5 times at random
// moments and restarted against the same cluster: after each kill the
// group's committed offsets (kadm) are never ahead of the state's next
// offsets; at the end every record was applied exactly once (per
// partition, the count and the sum of the values are those produced).
func TestSIGKILLedConsumerAppliesEveryRecordOnceAndNeverCommitsAheadOfItsState(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process killed 5 times")
	}
	c := newShortSessionCluster(t, crashParts)
	wantSum, wantCount := produceManual(t, c, crashRecords, crashParts)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))

	lag := int64(-1) // the records applied and not committed after the last kill (-1: no kill yet)
	for run := 0; ; run++ {
		kill := run < crashKills
		after := 1 + rng.IntN(8) // progress lines before the kill
		cmd, sc := startChild(t, "TestKafkaCrashChild", crashDirEnv+"="+dir, crashBrokersEnv+"="+strings.Join(c.ListenAddrs(), ","),
			crashTotalEnv+"="+strconv.Itoa(crashRecords))
		seen, finished, redelivered := 0, false, int64(0)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "done":
				finished = true
			case line == "redelivered":
				redelivered++
			case strings.HasPrefix(line, "progress"):
				seen++
			}
			if kill && !finished && seen == after {
				break
			}
		}
		if kill && !finished {
			cmd.Process.Kill() // SIGKILL
		}
		drained := make(chan int64)
		go func() { // drain, so the child never blocks on a full pipe
			n := int64(0)
			for sc.Scan() {
				if sc.Text() == "redelivered" {
					n++
				}
			}
			drained <- n
		}()
		err := cmd.Wait()
		redelivered += <-drained
		if lag >= 0 && redelivered > lag {
			t.Fatalf("run %d: %d records delivered again, more than the commit lag of %d the last kill left", run, redelivered, lag)
		}
		st, rerr := readLedger(dir)
		if rerr != nil {
			t.Fatal(rerr)
		}
		got := committed(t, c, crashGroup)
		lag = 0
		for p, off := range got {
			next := st.Next[partitionKeyOf(p)]
			if off > next {
				t.Fatalf("run %d: partition %d committed at %d, ahead of the state's next offset %d", run, p, off, next)
			}
			lag += next - off
		}
		for p := range int32(crashParts) {
			if _, ok := got[p]; !ok {
				lag += st.Next[partitionKeyOf(p)] // nothing committed yet: all it applied is lag
			}
		}
		t.Logf("run %d (killed after %d progress lines: %v): committed %v, state next %v, delivered again %d", run, after, kill && !finished, got, st.Next, redelivered)
		if !kill || finished {
			if err != nil {
				t.Fatalf("the last child failed: %v", err)
			}
			if !finished {
				t.Fatal("the last child ended without applying every record")
			}
			for p := range int32(crashParts) {
				k := partitionKeyOf(p)
				if st.Sum[k] != wantSum[p] || st.Count[k] != wantCount[p] {
					t.Errorf("partition %d: applied %d records summing to %d, want %d summing to %d (each exactly once)",
						p, st.Count[k], st.Sum[k], wantCount[p], wantSum[p])
				}
			}
			return
		}
	}
}

func partitionKeyOf(p int32) string {
	return kafkasource.PartitionKey(&kafkasource.Record{Topic: topic, Partition: p})
}

// produceManual writes n records, value i to partition i mod parts, and
// returns per partition the sum of the values and their count.
func produceManual(t *testing.T, c *kfake.Cluster, n, parts int) (sum, count map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(n+1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sum, count = map[int32]int64{}, map[int32]int64{}
	rs := make([]*kgo.Record, n)
	for i := range rs {
		p := int32(i % parts)
		rs[i] = &kgo.Record{Partition: p, Value: []byte(strconv.Itoa(i))}
		sum[p] += int64(i)
		count[p]++
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return sum, count
}
