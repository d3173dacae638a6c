package kafkasource_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
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
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// offsets records the offsets a group's processor handled, in order; a
// hook (if set) is called with each record before it is noted.
type offsets struct {
	mu   sync.Mutex
	got  []int64
	hook func(r *kafkasource.Record)
}

func (o *offsets) processor() core.Processor {
	return core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		r := ev.(*kafkasource.Record)
		o.mu.Lock()
		hook := o.hook
		o.mu.Unlock()
		if hook != nil {
			hook(r)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		o.got = append(o.got, r.Offset)
		return nil
	})
}

func (o *offsets) seen() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

func (o *offsets) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.got)
}

// upTo is the offsets from, from+1 ... to-1.
func upTo(from, to int64) []int64 {
	var s []int64
	for o := from; o < to; o++ {
		s = append(s, o)
	}
	return s
}

// seekRig is a one-partition topic of n records read by a source of group
// into the feed "kafka" (honouring Intake.SkipCompleted) of the groups fast
// and slow, both having handled every record, the group's commit at the
// end.
type seekRig struct {
	c          *kfake.Cluster
	group      string
	src        *kafkasource.Source
	eng        *engine.Engine
	fast, slow *offsets
	n          int64
}

func newSeekRig(t *testing.T, group string, n int) *seekRig {
	t.Helper()
	r := &seekRig{c: newCluster(t, 1), group: group, fast: &offsets{}, slow: &offsets{}}
	r.n = produce(t, r.c, n, 1)[0]
	r.start(t)
	testutil.PollUntil(t, time.Minute, "both groups handled every record, committed to the end", func() bool {
		return r.fast.count() == int(r.n) && r.slow.count() == int(r.n) && committed(t, r.c, group)[0] == r.n
	})
	return r
}

// start runs a new source and engine over the rig's group.
func (r *seekRig) start(t *testing.T) {
	t.Helper()
	r.src = newSource(t, r.c, r.group, nil)
	r.eng = progressEngine(t, r.src, r.fast.processor(), r.slow.processor())
	eng := r.eng
	t.Cleanup(func() { eng.Stop(context.Background()) })
}

// stop stops the engine and closes the source.
func (r *seekRig) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.src.Close(); err != nil {
		t.Fatal(err)
	}
}

// gen is the generation of group's live queue of the feed.
func (r *seekRig) gen(t *testing.T, group string) int64 {
	t.Helper()
	return liveGen(t, r.eng, group)
}

// liveGen is the generation of group's live queue of the feed "kafka".
func liveGen(t *testing.T, eng *engine.Engine, group string) int64 {
	t.Helper()
	for _, q := range eng.Feed("kafka").Status().Subscribers {
		if q.Queue == group+"/kafka" && !q.Removed {
			return q.Generation
		}
	}
	t.Fatalf("no live queue of %s", group)
	return 0
}

// seekBack fences group and moves it back to seq (each record's seq is
// its offset+1 here: one partition read from its start), a dry run first;
// it returns the replacement queue's generation.
func (r *seekRig) seekBack(t *testing.T, group string, seq int64) int64 {
	t.Helper()
	if err := r.eng.Fence(group); err != nil {
		t.Fatal(err)
	}
	gen := r.gen(t, group)
	if _, err := r.eng.Seek("kafka", group, gen, engine.SeekTarget{Seq: seq}, engine.SeekOptions{DryRun: true, Reason: "test"}); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	p, err := r.eng.Seek("kafka", group, gen, engine.SeekTarget{Seq: seq}, engine.SeekOptions{Reason: "test"})
	if err != nil {
		t.Fatalf("seek: %v", err)
	}
	if !p.Redelivery || p.After != seq {
		t.Fatalf("plan %+v: want a re-delivery after seq %d", p, seq)
	}
	return p.Replacement
}

// TestABackwardsSeekReReadsThePartitionForTheSoughtGroupOnly (Seek,
// backwards, Kafka): fast is moved back to seq 8 (offset 7 done): the
// source commits offset 8 with slow's progress (20) in the metadata, reads
// the partition again from offset 8, and the feed hands records 8-19 to
// fast again, none to slow; the group's commit ends at 20 again.
func TestABackwardsSeekReReadsThePartitionForTheSoughtGroupOnly(t *testing.T) {
	r := newSeekRig(t, "gseek", 20)
	repl := r.seekBack(t, "fast", 8)
	testutil.PollUntil(t, time.Minute, "the commit moved back to 8, slow's progress kept", func() bool {
		return committed(t, r.c, r.group)[0] == 8 && strings.HasSuffix(metadata(t, r.c, r.group), " groups=slow=20")
	})
	if err := r.eng.Resume("kafka", "fast", repl); err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "fast handled 8-19 again, committed to the end", func() bool {
		return r.fast.count() == 32 && committed(t, r.c, r.group)[0] == 20
	})
	if got, want := r.fast.seen(), append(upTo(0, 20), upTo(8, 20)...); !slices.Equal(got, want) {
		t.Errorf("fast handled %v, want %v", got, want)
	}
	if got := r.slow.seen(); !slices.Equal(got, upTo(0, 20)) {
		t.Errorf("slow handled %v, want each record once", got)
	}
	if fs := r.eng.Status().Feeds[0]; !fs.Lossless {
		t.Errorf("feed not lossless: %v", fs.Losses)
	}
}

// TestTheOthersProgressOutlivesARestartAfterABackwardsSeek (Seek,
// backwards, Kafka): fast is moved back to seq 5 and the run stops before
// it is resumed: a new source over the group hands fast records 5-19
// again, slow none (its progress was carried by the commit the move back
// wrote).
func TestTheOthersProgressOutlivesARestartAfterABackwardsSeek(t *testing.T) {
	r := newSeekRig(t, "grestart", 20)
	r.seekBack(t, "fast", 5)
	testutil.PollUntil(t, time.Minute, "the commit moved back to 5", func() bool { return committed(t, r.c, r.group)[0] == 5 })
	r.stop(t)
	r.fast, r.slow = &offsets{}, &offsets{}
	r.start(t)
	testutil.PollUntil(t, time.Minute, "fast handled 5-19, committed to the end", func() bool {
		return r.fast.count() == 15 && committed(t, r.c, r.group)[0] == 20
	})
	if got := r.fast.seen(); !slices.Equal(got, upTo(5, 20)) {
		t.Errorf("the restart handed fast %v, want %v", got, upTo(5, 20))
	}
	if got := r.slow.seen(); len(got) != 0 {
		t.Errorf("the restart handed slow %v, want nothing (it completed every record)", got)
	}
}

// TestTheMoveBackIsCommittedBeforeAnyRecordIsReadAgain (Seek, backwards,
// Kafka): when fast is handed its first record read again, the group's
// commit is already the target (a kill then loses no re-delivery).
func TestTheMoveBackIsCommittedBeforeAnyRecordIsReadAgain(t *testing.T) {
	r := newSeekRig(t, "gdurable", 20)
	at := make(chan int64, 1)
	r.fast.mu.Lock()
	r.fast.hook = func(rec *kafkasource.Record) {
		select {
		case at <- committed(t, r.c, r.group)[0]:
		default:
		}
	}
	r.fast.mu.Unlock()
	repl := r.seekBack(t, "fast", 12)
	if err := r.eng.Resume("kafka", "fast", repl); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-at:
		if got != 12 {
			t.Fatalf("the group's commit when fast was handled its first record again: %d, want 12", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("no record read again")
	}
}

// TestABackwardsSeekTheKafkaSourceCannotApplyIsRefusedAndChangesNothing
// (Seek, backwards, Kafka, RewindChecker): a move back whose commit could
// not carry every group's progress (groups whose names fill the metadata)
// is refused by Engine.Seek (ErrSeekUnsupported wrapping ErrRewind), dry
// run or not: the generation stays live, the group's commit and its
// metadata unchanged, nothing handed again. And the source refuses
// beforehand a partition it does not own, a target of another epoch or
// published before its ownership, or ahead of where the partition is read
// now (as Rewind would), a commit of unknown outcome aside.
func TestABackwardsSeekTheKafkaSourceCannotApplyIsRefusedAndChangesNothing(t *testing.T) {
	t.Run("metadata too long", func(t *testing.T) {
		c := newCluster(t, 1)
		n := produce(t, c, 10, 1)[0]
		long1, long2 := strings.Repeat("a", 2100), strings.Repeat("b", 2100)
		h1, h2 := &offsets{}, &offsets{}
		src := newSource(t, c, "glong", nil)
		g := func(name string, p core.Processor) engine.GroupConfig {
			return engine.GroupConfig{Name: name, Feeds: []string{"kafka"}, Processors: []engine.ProcessorConfig{{Name: "p" + name[:1], Processor: p}}}
		}
		eng, err := engine.New(engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: 64, SkipCompleted: true}},
			Groups: []engine.GroupConfig{g(long1, h1.processor()), g(long2, h2.processor())},
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Stop(context.Background()) })
		testutil.PollUntil(t, time.Minute, "every record handled and committed", func() bool {
			return h1.count() == int(n) && h2.count() == int(n) && committed(t, c, "glong")[0] == n
		})
		meta := metadata(t, c, "glong")
		if err := eng.Fence(long1); err != nil {
			t.Fatal(err)
		}
		gen := liveGen(t, eng, long1)
		for _, dry := range []bool{true, false} {
			_, err := eng.Seek("kafka", long1, gen, engine.SeekTarget{Seq: 3}, engine.SeekOptions{DryRun: dry, Reason: "x"})
			if !errors.Is(err, engine.ErrSeekUnsupported) || !errors.Is(err, kafkasource.ErrRewind) {
				t.Fatalf("dry run %t: %v, want ErrSeekUnsupported wrapping ErrRewind", dry, err)
			}
		}
		if err := eng.Resume("kafka", long1, gen); err != nil {
			t.Fatalf("the generation is not live after the refusals: %v", err)
		}
		if got := committed(t, c, "glong")[0]; got != n {
			t.Errorf("the group's commit %d after the refusals, want %d", got, n)
		}
		if got := metadata(t, c, "glong"); got != meta {
			t.Errorf("the commit's metadata %q after the refusals, want %q", got, meta)
		}
		if h1.count() != int(n) || h2.count() != int(n) {
			t.Errorf("handled %d and %d records, want %d each (nothing again)", h1.count(), h2.count(), n)
		}
	})
	r := newSeekRig(t, "grefuse", 10)
	epoch := topicEpoch(t, r.c)
	at := func(seq, epoch int64, key string, offset int64) engine.Commit {
		return engine.Commit{Seq: seq, Epoch: epoch, Position: core.Position{Key: key, Offset: offset}}
	}
	chk := kafkasource.Checker(r.src)
	if err := chk.CheckRewind(engine.Rewind{Group: "fast", To: at(4, epoch, topic+"/0", 4), Others: []string{"slow"}}); err != nil {
		t.Fatalf("a move back the source can apply refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		r    engine.Rewind
	}{
		{"a partition not owned", engine.Rewind{Group: "fast", To: at(4, epoch, topic+"/7", 4), Others: []string{"slow"}}},
		{"another epoch", engine.Rewind{Group: "fast", To: at(4, epoch+1, topic+"/0", 4), Others: []string{"slow"}}},
		{"published before the ownership", engine.Rewind{Group: "fast", To: at(0, epoch, topic+"/0", 0), Others: []string{"slow"}}},
		// Read through offset 10 (r.n): a target past it is one an earlier
		// move back has not read again yet (its seq of the reading before);
		// Rewind would refuse it once the engine had changed everything.
		{"ahead of where the partition is read", engine.Rewind{Group: "fast", To: at(10, epoch, topic+"/0", r.n+1), Others: []string{"slow"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := chk.CheckRewind(tc.r); !errors.Is(err, kafkasource.ErrRewind) {
				t.Fatalf("got %v, want ErrRewind", err)
			}
		})
	}
	if got := committed(t, r.c, r.group)[0]; got != r.n {
		t.Errorf("the group's commit %d after the checks, want %d", got, r.n)
	}
}

// TestABackwardsSeekDropsTheRecordsTheSourceHeldPastIt (Seek, backwards,
// Kafka): slow is stuck at offset 100 and its queue is full: the source
// holds polled records the feed refused, its fetches paused. fast, having
// handled every record published, is moved back to seq 51 (offset 50
// done): the records the source held are dropped, never published ahead
// of the records read again, so fast is handled 51-299 again in order
// after what it had, and slow every record once.
func TestABackwardsSeekDropsTheRecordsTheSourceHeldPastIt(t *testing.T) {
	c := newCluster(t, 1)
	n := produce(t, c, 300, 1)[0]
	fast, slow := &offsets{}, &offsets{}
	gate := make(chan struct{})
	slow.hook = func(r *kafkasource.Record) {
		if r.Offset == 100 {
			<-gate
		}
	}
	src := newSource(t, c, "gheld", nil)
	g := func(name string, p core.Processor) engine.GroupConfig {
		return engine.GroupConfig{Name: name, Feeds: []string{"kafka"}, Processors: []engine.ProcessorConfig{{Name: name + "-p", Processor: p}}}
	}
	eng, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: 16, SkipCompleted: true}},
		Groups: []engine.GroupConfig{g("fast", fast.processor()), g("slow", slow.processor())},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			close(gate)
		}
		eng.Stop(context.Background())
	})
	var published int64
	testutil.PollUntil(t, time.Minute, "the fetches paused, fast done with every record published", func() bool {
		st := src.Status().Partitions
		if len(st) != 1 || !st[0].Paused {
			return false
		}
		published = st[0].Published
		return int64(fast.count()) == published
	})
	if published >= n {
		t.Fatalf("every record published (%d): the source holds none", published)
	}
	if err := eng.Fence("fast"); err != nil {
		t.Fatal(err)
	}
	p, err := eng.Seek("kafka", "fast", liveGen(t, eng, "fast"), engine.SeekTarget{Seq: 51}, engine.SeekOptions{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Resume("kafka", "fast", p.Replacement); err != nil {
		t.Fatal(err)
	}
	close(gate)
	released = true
	testutil.PollUntil(t, time.Minute, "every record handled, committed to the end", func() bool {
		return fast.count() == int(published+n-51) && slow.count() == int(n) && committed(t, c, "gheld")[0] == n
	})
	if got, want := fast.seen(), append(upTo(0, published), upTo(51, n)...); !slices.Equal(got, want) {
		t.Errorf("fast handled %d records %v..., want %d: 0-%d, then 51-%d", len(got), got[:min(len(got), 5)], len(want), published-1, n-1)
	}
	if got := slow.seen(); !slices.Equal(got, upTo(0, n)) {
		t.Errorf("slow handled %d records, want each of the %d once, in order", len(got), n)
	}
}

// produceTo writes n records to partition of topic, values
// "p<partition>-<i>" for i from from on (its offsets when from is the
// partition's end).
func produceTo(t *testing.T, c *kfake.Cluster, partition int32, from, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Partition: partition, Value: []byte("p" + strconv.Itoa(int(partition)) + "-" + strconv.Itoa(from+i))}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// tallied returns the offsets of the groups fast and slow, each also
// counting, in handled (under mu), how many times it was handled each
// record's value.
func tallied() (fast, slow *offsets, handled map[string]map[string]int, mu *sync.Mutex) {
	fast, slow, mu = &offsets{}, &offsets{}, &sync.Mutex{}
	handled = map[string]map[string]int{"fast": {}, "slow": {}}
	note := func(group string) func(r *kafkasource.Record) {
		return func(r *kafkasource.Record) {
			mu.Lock()
			defer mu.Unlock()
			handled[group][string(r.Value)]++
		}
	}
	fast.hook, slow.hook = note("fast"), note("slow")
	return fast, slow, handled, mu
}

// TestABackwardsSeekOnATopicOfTwoPartitionsMovesTheTargetsPartitionOnly
// (Seek, backwards, Kafka): partition 1's 10 records are read, then
// partition 0's 20; fast is moved back to partition 0's offset 5 (the
// feed's records after it are all of partition 0: the engine moves one
// key back). Partition 0 is read again from offset 6 for fast only;
// partition 1, whose fetches SetOffsets interrupted, goes on: its 5 new
// records go to both groups once, and both partitions end committed.
func TestABackwardsSeekOnATopicOfTwoPartitionsMovesTheTargetsPartitionOnly(t *testing.T) {
	c := newCluster(t, 2)
	fast, slow, handled, mu := tallied()
	src := newSource(t, c, "gtwo", nil)
	eng := progressEngine(t, src, fast.processor(), slow.processor())
	t.Cleanup(func() { eng.Stop(context.Background()) })
	produceTo(t, c, 1, 0, 10)
	testutil.PollUntil(t, time.Minute, "partition 1 handled", func() bool { return fast.count() == 10 && slow.count() == 10 })
	produceTo(t, c, 0, 0, 20)
	testutil.PollUntil(t, time.Minute, "partition 0 handled, both committed", func() bool {
		got := committed(t, c, "gtwo")
		return fast.count() == 30 && slow.count() == 30 && got[0] == 20 && got[1] == 10
	})
	if err := eng.Fence("fast"); err != nil {
		t.Fatal(err)
	}
	// Seqs 1-10 are partition 1's, 11-30 partition 0's offsets 0-19.
	p, err := eng.Seek("kafka", "fast", liveGen(t, eng, "fast"), engine.SeekTarget{Seq: 16}, engine.SeekOptions{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "partition 0's commit moved back to 6", func() bool { return committed(t, c, "gtwo")[0] == 6 })
	produceTo(t, c, 1, 10, 5)
	if err := eng.Resume("kafka", "fast", p.Replacement); err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "every record handled, both partitions committed to their end", func() bool {
		got := committed(t, c, "gtwo")
		return fast.count() == 30+14+5 && slow.count() == 35 && got[0] == 20 && got[1] == 15
	})
	mu.Lock()
	defer mu.Unlock()
	for g, want := range map[string]func(v string) int{
		"fast": func(v string) int {
			if i, ok := strings.CutPrefix(v, "p0-"); ok {
				if n, _ := strconv.Atoi(i); n >= 6 {
					return 2
				}
			}
			return 1
		},
		"slow": func(string) int { return 1 },
	} {
		for v, n := range handled[g] {
			if n != want(v) {
				t.Errorf("%s handled %s %d times, want %d", g, v, n, want(v))
			}
		}
		if len(handled[g]) != 35 {
			t.Errorf("%s handled %d distinct records, want 35", g, len(handled[g]))
		}
	}
}

// TestABackwardsSeekOverRecordsOfTwoPartitionsMovesEachBack (Seek,
// backwards, Kafka, several keys): partition 0's offsets 0-9 are read,
// then partition 1's 0-9, then partition 0's 10-14; fast is moved back to
// partition 1's offset 4 (seq 15): the engine moves partition 1 back to
// offset 5 and partition 0 to offset 10 (its last record at or before the
// target), each committed there with slow's progress; fast is handed
// partition 1's 5-9 and partition 0's 10-14 again, slow nothing, and both
// partitions end committed.
func TestABackwardsSeekOverRecordsOfTwoPartitionsMovesEachBack(t *testing.T) {
	c := newCluster(t, 2)
	fast, slow, handled, mu := tallied()
	src := newSource(t, c, "gtwoback", nil)
	eng := progressEngine(t, src, fast.processor(), slow.processor())
	t.Cleanup(func() { eng.Stop(context.Background()) })
	for i, step := range []struct {
		partition int32
		from, n   int
	}{{0, 0, 10}, {1, 0, 10}, {0, 10, 5}} {
		produceTo(t, c, step.partition, step.from, step.n)
		want := []int{10, 20, 25}[i]
		testutil.PollUntil(t, time.Minute, "the records handled", func() bool { return fast.count() == want && slow.count() == want })
	}
	testutil.PollUntil(t, time.Minute, "both partitions committed", func() bool {
		got := committed(t, c, "gtwoback")
		return got[0] == 15 && got[1] == 10
	})
	if err := eng.Fence("fast"); err != nil {
		t.Fatal(err)
	}
	p, err := eng.Seek("kafka", "fast", liveGen(t, eng, "fast"), engine.SeekTarget{Seq: 15}, engine.SeekOptions{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "both partitions' commits moved back", func() bool {
		got := committed(t, c, "gtwoback")
		return got[0] == 10 && got[1] == 5
	})
	if err := eng.Resume("kafka", "fast", p.Replacement); err != nil {
		t.Fatal(err)
	}
	testutil.PollUntil(t, time.Minute, "every record handled, both partitions committed to their end", func() bool {
		got := committed(t, c, "gtwoback")
		return fast.count() == 35 && slow.count() == 25 && got[0] == 15 && got[1] == 10
	})
	mu.Lock()
	defer mu.Unlock()
	again := map[string]bool{}
	for i := 5; i < 10; i++ {
		again["p1-"+strconv.Itoa(i)] = true
	}
	for i := 10; i < 15; i++ {
		again["p0-"+strconv.Itoa(i)] = true
	}
	for g, hs := range handled {
		if len(hs) != 25 {
			t.Errorf("%s handled %d distinct records, want 25", g, len(hs))
		}
		for v, n := range hs {
			want := 1
			if g == "fast" && again[v] {
				want = 2
			}
			if n != want {
				t.Errorf("%s handled %s %d times, want %d", g, v, n, want)
			}
		}
	}
}
