package torture

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaSession is the session timeout of the runs' group members
// (run --session-timeout): a SIGKILLed member's partitions move after it.
const kafkaSession = 3 * time.Second

// kafkaInput is a scenario's Kafka input: an in-process cluster (kfake)
// persisting to a directory, so that a bounce (stopped, then started again
// on the same port) keeps its records and the group's offsets; one topic.
// Not safe for concurrent use: one goroutine applies the operations.
type kafkaInput struct {
	dir        string
	port       int
	cluster    *kfake.Cluster
	topic      string
	group      string
	partitions int
	gen        *lineGen
	keyOf      func(string) string
	// deleted marks the lines of records the harness deleted (retention)
	// before a run could have read them all: their loss must be counted.
	deleted map[int]bool
	// produced maps each partition's offsets to line ids, for the oracle.
	produced map[int32][]int
}

func newKafkaInput(dir string, partitions int, gen *lineGen, keyOf func(string) string) (*kafkaInput, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	k := &kafkaInput{dir: filepath.Join(dir, "kafka"), port: port, topic: "t", group: "g", partitions: partitions,
		gen: gen, keyOf: keyOf, deleted: map[int]bool{}, produced: map[int32][]int{}}
	if err := k.start(true); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *kafkaInput) start(seed bool) error {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(k.port), kfake.DataDir(k.dir),
		kfake.GroupMinSessionTimeout(kafkaSession)}
	if seed {
		opts = append(opts, kfake.SeedTopics(int32(k.partitions), k.topic))
	}
	c, err := kfake.NewCluster(opts...)
	if errors.Is(err, syscall.EADDRINUSE) {
		return &portTakenError{port: k.port, err: err}
	}
	if err != nil {
		return fmt.Errorf("torture: starting kfake on port %d: %w", k.port, err)
	}
	k.cluster = c
	return nil
}

// portTakenError is kfake's port taken by another process when the
// harness starts (or, after a bounce, restarts) the cluster on it: the
// port is chosen free, then closed and bound again by kfake, and a
// process of the scenario (a run's --listen on port 0) may be given it
// in between. Not the system under test: the scenario is inconclusive.
type portTakenError struct {
	port int
	err  error
}

func (e *portTakenError) Error() string {
	return fmt.Sprintf("torture: kfake's port %d was taken by another process before the cluster bound it (%v); the scenario is inconclusive", e.port, e.err)
}

func (e *portTakenError) Unwrap() error { return e.err }

func (*portTakenError) inconclusive() {}

func (k *kafkaInput) addr() string { return "127.0.0.1:" + strconv.Itoa(k.port) }

func (k *kafkaInput) close() {
	if k.cluster != nil {
		k.cluster.Close()
		k.cluster = nil
	}
}

func (k *kafkaInput) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.addr()), kgo.DefaultProduceTopic(k.topic),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.RequestTimeoutOverhead(5 * time.Second)}, opts...)...)
}

// produce produces lines keyed by their app key, so one key's lines go to
// one partition, in order.
func (k *kafkaInput) produce(ctx context.Context, lines []line) error {
	if len(lines) == 0 {
		return nil
	}
	cl, err := k.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Key: []byte(k.keyOf(l.text)), Value: []byte(l.text)}
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("torture: producing %d records: %w", len(recs), err)
	}
	for i, r := range recs {
		p := k.produced[r.Partition]
		for int64(len(p)) < r.Offset {
			p = append(p, 0) // offsets of records the harness did not write (none expected)
		}
		k.produced[r.Partition] = append(p, lines[i].id)
	}
	return nil
}

func (k *kafkaInput) admin(ctx context.Context, do func(context.Context, *kadm.Client) error) error {
	cl, err := k.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return do(actx, kadm.NewClient(cl))
}

// committed reads the group's committed offsets of the topic.
func (k *kafkaInput) committed(ctx context.Context) (map[int32]int64, error) {
	out := map[int32]int64{}
	err := k.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		os, err := adm.FetchOffsetsForTopics(ctx, k.group, k.topic)
		if err != nil {
			return err
		}
		os.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				out[o.Partition] = o.At
			}
		})
		return nil
	})
	return out, err
}

// apply does op to the topic: more lines, partitions added, a partition's
// records deleted (retention), the topic deleted and created again, the
// broker bounced.
func (k *kafkaInput) apply(ctx context.Context, op inputOp, committedUpTo func(int32) int64) error {
	switch op.Kind {
	case opAppend:
		return k.produce(ctx, k.gen.gen(op.N))
	case opPartitions:
		err := k.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			_, err := adm.CreatePartitions(ctx, op.N, k.topic)
			return err
		})
		if err == nil {
			k.partitions += op.N
		}
		return err
	case opRetention:
		p := int32(op.N % k.partitions)
		ids := k.produced[p]
		if len(ids) == 0 {
			return nil
		}
		// Records deleted past the group's commit are a loss the next run
		// must count; with no commit for the partition at all, the group
		// is a first reader again (it starts at the log start and cannot
		// know what was there: seed 1796340000000000174), as a file's
		// runs after runs that committed nothing: at risk.
		from := committedUpTo(p)
		for off := max(from, 0); off < int64(len(ids)); off++ {
			if from < 0 {
				k.gen.atRisk[ids[off]] = true
			} else {
				k.deleted[ids[off]] = true
			}
		}
		return k.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: k.topic, Partition: p, At: int64(len(ids))})
			rs, err := adm.DeleteRecords(ctx, os)
			if err != nil {
				return err
			}
			return rs.Error()
		})
	case opDeleteTopic:
		// The group's commits go with the topic: a run after the
		// deletion cannot know how many records it held, and one
		// following it counts lost only those it had seen exist. The
		// records past the commit are at risk.
		for p, ids := range k.produced {
			for off := max(committedUpTo(p), 0); off < int64(len(ids)); off++ {
				k.gen.atRisk[ids[off]] = true
			}
		}
		k.produced = map[int32][]int{}
		return k.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if _, err := adm.DeleteTopics(ctx, k.topic); err != nil {
				return err
			}
			for range 50 { // the deletion is asynchronous in kfake: retry the creation
				r, err := adm.CreateTopic(ctx, int32(k.partitions), 1, nil, k.topic)
				if err == nil && r.Err == nil {
					return nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			return fmt.Errorf("torture: topic %s not created again", k.topic)
		})
	case opBounce:
		before, err := k.bounds(ctx)
		if err != nil {
			return err
		}
		k.close()
		time.Sleep(time.Duration(50+k.gen.r.IntN(200)) * time.Millisecond)
		if err := k.start(false); err != nil {
			return err
		}
		after, err := k.bounds(ctx)
		if err != nil {
			return err
		}
		return k.checkBounce(before, after)
	}
	return fmt.Errorf("torture: %s is not an operation on a topic", op.Kind)
}

// logBounds is a partition's log start and end (high watermark) offsets.
type logBounds struct{ start, end int64 }

// bounds reads the log start and end offsets of the topic's partitions.
func (k *kafkaInput) bounds(ctx context.Context) (map[int32]logBounds, error) {
	out := map[int32]logBounds{}
	err := k.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		starts, err := adm.ListStartOffsets(ctx, k.topic)
		if err != nil {
			return err
		}
		ends, err := adm.ListEndOffsets(ctx, k.topic)
		if err != nil {
			return err
		}
		if err := starts.Error(); err != nil {
			return err
		}
		if err := ends.Error(); err != nil {
			return err
		}
		starts.Each(func(o kadm.ListedOffset) {
			b := out[o.Partition]
			b.start = o.Offset
			out[o.Partition] = b
		})
		ends.Each(func(o kadm.ListedOffset) {
			b := out[o.Partition]
			b.end = o.Offset
			out[o.Partition] = b
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("torture: reading the offsets of topic %s: %w", k.topic, err)
	}
	return out, nil
}

// checkBounce compares the partitions' log bounds before a bounce (a clean
// Close) and after the cluster started again on its DataDir: a partition
// whose log starts or ends at a lower offset than before lost what kfake
// promised to keep (its offsets are given to new records again), and the
// scenario cannot be carried out (*bounceLostError).
func (k *kafkaInput) checkBounce(before, after map[int32]logBounds) error {
	for _, p := range slices.Sorted(maps.Keys(before)) {
		b, a := before[p], after[p]
		if a.start < b.start || a.end < b.end {
			return &bounceLostError{topic: k.topic, partition: p, before: b, after: a}
		}
	}
	return nil
}

// bounceLostError is a Kafka scenario the harness cannot carry out: after a
// bounce (kfake closed cleanly, then started again on the same DataDir) a
// partition's log starts or ends below where it did before. kfake writes
// each partition's snapshot (log start, high watermark) on Close, but on
// start reads it only when a segment file of the partition is left
// (loadPartition: snapshotData != nil && len(segFiles) > 0); DeleteRecords
// up to the high watermark removes every segment file, so such a partition
// is reloaded empty at offset 0: the records deleted are forgotten (no
// consumer can see they existed), and the next records produced take
// offsets the group already committed. Kafka keeps the log start and end
// of a partition with no records across a restart. The scenario is
// inconclusive, not failed.
type bounceLostError struct {
	topic         string
	partition     int32
	before, after logBounds
}

func (e *bounceLostError) Error() string {
	why := "a kfake defect: its partitions' offsets are not kept across a clean restart"
	if e.before.start == e.before.end && e.before.end > 0 && e.after.end == 0 {
		why = "a kfake defect: a partition whose every record was deleted is reloaded without its snapshot, from offset 0"
	}
	return fmt.Sprintf("kfake lost the offsets of %s/%d across a bounce: log start %d, end %d before; start %d, end %d after (%s); the scenario is inconclusive",
		e.topic, e.partition, e.before.start, e.before.end, e.after.start, e.after.end, why)
}

func (*bounceLostError) inconclusive() {}

// ghosts counts the members of the group when no process of the scenario
// is left in it (the run waited for has just been killed, the second
// member is gone): members kfake keeps though their process died.
func (k *kafkaInput) ghosts(ctx context.Context) int {
	n := 0
	err := k.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		// The run being waited for is still a member: a second look after
		// a session lets a live member's departure be seen.
		gs, err := adm.DescribeGroups(ctx, k.group)
		if err != nil {
			return err
		}
		for _, g := range gs {
			n += len(g.Members)
		}
		return nil
	})
	if err != nil {
		return 0
	}
	return max(n-1, 0) // the run waited for is one of them
}
