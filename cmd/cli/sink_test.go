package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/outbox/kafkasink"
	"github.com/blackbox-audit/blackbox/store"
)

// sinkRecord is a record of a --sink topic as a test reads it.
type sinkRecord struct {
	Key   core.EffectKey
	Value string
	Part  int32
}

// readSinkTopic reads topic from its start with read_committed isolation
// to its end (the control markers kept to know where each partition
// ends) and returns its data records in each partition's order. It fails
// the test if a transaction is open: the last stable offset behind the
// high watermark, where a read_committed reader would stall.
func readSinkTopic(t *testing.T, brokers, topic string) []sinkRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seeds := kgo.SeedBrokers(strings.Split(brokers, ",")...)
	cl, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, _ := stable.Lookup(topic, o.Partition); s.Offset != o.Offset {
			t.Fatalf("%s/%d: last stable offset %d, high watermark %d: a transaction is open", topic, o.Partition, s.Offset, o.Offset)
		}
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var recs []sinkRecord
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: still to read to %v", topic, left)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("reading %s: %v", topic, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			rec := sinkRecord{Value: string(r.Value), Part: r.Partition}
			for _, h := range r.Headers {
				if h.Key == kafkasink.HeaderKey {
					if err := json.Unmarshal(h.Value, &rec.Key); err != nil {
						t.Fatalf("%s/%d at %d: key header %q: %v", topic, r.Partition, r.Offset, h.Value, err)
					}
				}
			}
			recs = append(recs, rec)
		})
	}
	return recs
}

// recordedValues is every OUTPUT row's payload of the recordings that
// exist among paths (a run killed before its first write has none); the
// rows a kill cut are skipped.
func recordedValues(t *testing.T, paths []string) map[string]bool {
	t.Helper()
	vals := map[string]bool{}
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			continue
		}
		r, err := store.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for e, err := range r.Rows() {
			var pr *store.Problem
			if errors.As(err, &pr) {
				continue
			} else if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if e.Kind == store.KindOutput {
				vals[string(e.Payload)] = true
			}
		}
		r.Close()
	}
	return vals
}

// killSinkRuns runs `blackbox run` (args(store) for the run's store) 5
// times in dir, each SIGKILLed at a random moment once the output topic
// of brokers grew by a random number of offsets (1 to growth) since the
// run started (records, aborted ones and transaction markers: the run
// delivered something), calling after() after each kill; then once more
// to its end, which must exit 0. It returns the runs' stores. growth,
// with a batch's records (one state-save interval of them) and those
// of the batch a kill aborts, must leave the fifth run more to deliver
// than growth, or it may end before its kill.
func killSinkRuns(t *testing.T, dir, brokers, topic string, growth int64, args func(store string) []string, after func()) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	size := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill moments drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	var stores []string
	for k := 1; k <= 5; k++ {
		store := filepath.Join(dir, fmt.Sprintf("run-%d.csv", k))
		stores = append(stores, store)
		target := size() + 1 + rng.Int64N(growth)
		cmd := exec.Command(blackboxBinary(t), args(store)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), childEnv+"=")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		tick := time.NewTicker(2 * time.Millisecond)
	watch:
		for {
			select {
			case err := <-exited:
				tick.Stop()
				t.Fatalf("run %d ended (%v) before the topic reached %d offsets:\n%s", k, err, target, out.String())
			case <-ctx.Done():
				cmd.Process.Kill()
				<-exited
				t.Fatalf("run %d: the topic did not reach %d offsets:\n%s", k, target, out.String())
			case <-tick.C:
				if size() >= target {
					break watch
				}
			}
		}
		tick.Stop()
		cmd.Process.Kill()
		<-exited
		t.Logf("run %d killed at %d offsets of %s", k, target, topic)
		after()
	}
	store := filepath.Join(dir, "run-6.csv")
	stores = append(stores, store)
	if out, code, _ := blackbox(t, dir, nil, args(store)...); code != 0 {
		t.Fatalf("the last run: exit %d, want 0:\n%s", code, out)
	}
	return stores
}

// checkSinkOnce checks what a read_committed reader of topic sees after
// the runs whose recordings are stores: each output once by key and by
// value, every value one a recording holds, the keys exactly want (one
// posting per input position), and per account the balances in the
// topic's order the running sums of amounts (each input applied and
// delivered once, in order).
func checkSinkOnce(t *testing.T, brokers, topic string, stores []string, want map[core.EffectKey]bool) {
	t.Helper()
	recs := readSinkTopic(t, brokers, topic)
	recorded := recordedValues(t, stores)
	keys, vals := map[core.EffectKey]int{}, map[string]int{}
	sums := map[string]int64{}
	var dups, unrecorded, bad int
	for _, r := range recs {
		keys[r.Key]++
		vals[r.Value]++
		if keys[r.Key] > 1 || vals[r.Value] > 1 {
			dups++
			t.Errorf("again: key %+v value %s", r.Key, r.Value)
		}
		if !recorded[r.Value] {
			unrecorded++
			t.Errorf("not in any recording: %s", r.Value)
		}
		var o ledgerOut
		if err := json.Unmarshal([]byte(r.Value), &o); err != nil || o.Account == "" {
			t.Fatalf("not a posting: %s", r.Value)
		}
		sums[o.Account] += o.Amount
		if o.Balance != sums[o.Account] {
			bad++
			t.Errorf("account %s: balance %d after the postings before it summing %d: out of order, twice or missing", o.Account, o.Balance, sums[o.Account])
		}
	}
	var missing, extra int
	for k := range want {
		if keys[k] == 0 {
			missing++
			t.Errorf("missing: %+v", k)
		}
	}
	for k := range keys {
		if !want[k] {
			extra++
			t.Errorf("an output of no input: %+v", k)
		}
	}
	t.Logf("%s: %d outputs read_committed, %d inputs; %d again, %d missing, %d of no input, %d not recorded, %d balances wrong",
		topic, len(recs), len(want), dups, missing, extra, unrecorded, bad)
}

// createTopic creates topic with 3 partitions.
func createTopic(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, r.Err)
	}
}

// TestARunWithAKafkaSinkKilledFiveTimesProducesEachOutputOnce: `run
// --kafka ... --sink kafka://.../out` (the ledger with --state, one
// posting per record) is SIGKILLed 5 times at random moments of its
// delivery, each restart fencing the killed run's producer, then run to
// the end: a read_committed reader of out (which never waits: no
// transaction is left open) sees each posting exactly once, by key and
// by value, every input's, in order per account, and the recordings hold
// every one of them.
func TestARunWithAKafkaSinkKilledFiveTimesProducesEachOutputOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process killed")
	}
	const n = 1500
	brokers, adm := kafkaTopic(t, "postings", n)
	createTopic(t, adm, "out")
	dir := t.TempDir()
	args := func(store string) []string {
		return []string{"run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g",
			"--state", filepath.Join(dir, "s.json"), "--store", store, "--sink", "kafka://" + brokers + "/out", "--delay", "500us", "--state-interval", "20ms"}
	}
	stores := killSinkRuns(t, dir, brokers, "out", n/10, args, func() { evictMembers(t, brokers, "g") })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, "postings")
	if err != nil {
		t.Fatal(err)
	}
	topics, err := adm.ListTopics(ctx, "postings")
	if err != nil {
		t.Fatal(err)
	}
	want := map[core.EffectKey]bool{}
	epoch := kafkasource.TopicEpoch(topics["postings"].ID)
	ends.Each(func(o kadm.ListedOffset) {
		for off := int64(1); off <= o.Offset; off++ {
			want[core.EffectKey{Feed: "input", Epoch: epoch, Position: core.Position{Key: fmt.Sprintf("postings/%d", o.Partition), Offset: off}, Index: 1}] = true
		}
	})
	checkSinkOnce(t, brokers, "out", stores, want)
}

// TestARunOfAFileWithAKafkaSinkKilledFiveTimesProducesEachOutputOnce: the
// same with a file input (--read committed): each line's posting is in
// the topic once.
func TestARunOfAFileWithAKafkaSinkKilledFiveTimesProducesEachOutputOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process killed")
	}
	const n = 1500
	brokers, adm := kafkaTopic(t, "unused", 0)
	createTopic(t, adm, "out")
	dir := t.TempDir()
	var in strings.Builder
	want := map[core.EffectKey]bool{}
	for i := range n {
		fmt.Fprintf(&in, "acct-%d,%d\n", i%7, i%50-10)
		want[core.EffectKey{Feed: "input", Position: core.Position{Offset: int64(in.Len())}, Index: 1}] = true
	}
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(store string) []string {
		return []string{"run", "--app", "ledger", "--input", "in.txt", "--state", "s.json", "--store", store,
			"--sink", "kafka://" + brokers + "/out", "--delay", "500us", "--state-interval", "20ms"}
	}
	stores := killSinkRuns(t, dir, brokers, "out", n/10, args, func() {})
	recs := readSinkTopic(t, brokers, "out")
	if len(recs) > 0 { // the file's epoch, the same in every key
		for k, v := range want {
			delete(want, k)
			k.Epoch = recs[0].Key.Epoch
			want[k] = v
		}
	}
	checkSinkOnce(t, brokers, "out", stores, want)
}

// TestRunSinkFlagsAreChecked: --sink wants kafka://BROKERS/TOPIC with the
// options txid and marks only, and is refused with --out and when it names
// --kafka's input topic (on a broker both name).
func TestRunSinkFlagsAreChecked(t *testing.T) {
	dir := t.TempDir()
	for _, sink := range []string{"localhost:9092/out", "kafka://localhost:9092", "kafka:///out", "kafka://localhost:9092/",
		"kafka://localhost:9092/a b", "kafka://localhost:9092/out?tx=1", "kafka://localhost:9092/out?txid=", "kafka://localhost:9092/out?txid=a&txid=b"} {
		t.Run(sink, func(t *testing.T) {
			code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store",
				filepath.Join(dir, "r.csv"), "--sink", sink)
			if code != cli.ExitFailure || !strings.Contains(out, "--sink") {
				t.Fatalf("exit %d, want %d naming --sink:\n%s", code, cli.ExitFailure, out)
			}
		})
	}
	code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store",
		filepath.Join(dir, "r.csv"), "--sink", "kafka://localhost:9092/out", "--out", filepath.Join(dir, "o.jsonl"))
	if code != cli.ExitFailure || !strings.Contains(out, "--sink and --out") {
		t.Fatalf("--sink with --out: exit %d, want %d:\n%s", code, cli.ExitFailure, out)
	}
	code, out = execute(t, context.Background(), "run", "--app", "ledger", "--kafka", "b2:9092,localhost:9092", "--topic", "in",
		"--group", "g", "--store", filepath.Join(dir, "r.csv"), "--sink", "kafka://localhost:9092/in")
	if code != cli.ExitFailure || !strings.Contains(out, "is the input topic of --kafka") {
		t.Fatalf("--sink naming the input topic: exit %d, want %d:\n%s", code, cli.ExitFailure, out)
	}
}

// TestRunSinkRefusesAMissingTopicAndMarksThatDoNotKnowTheTopic: a run with
// --sink prints the sink and what it produced; a topic that does not exist
// is refused before any work (exit 2), and so is a run whose marks file is
// new (lost here) while the topic holds batches of its transactional id:
// its batch numbers would start again at 1 under the ones the topic holds.
// Another transactional id runs.
func TestRunSinkRefusesAMissingTopicAndMarksThatDoNotKnowTheTopic(t *testing.T) {
	brokers, adm := kafkaTopic(t, "unused", 0)
	createTopic(t, adm, "out")
	dir := t.TempDir()
	t.Chdir(dir)
	writeLines(t, "in.txt", "alice,1", "bob,2")
	run := func(store, sink string) (int, string) {
		return execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--read", "earliest",
			"--store", store, "--sink", "kafka://"+brokers+"/"+sink)
	}
	code, out := run("r1.csv", "out")
	if want := "outputs   kafka://" + brokers + "/out (transactional id blackbox-out): 2 records produced"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want 0 and %q:\n%s", code, want, out)
	}
	if got := readSinkTopic(t, brokers, "out"); len(got) != 2 {
		t.Fatalf("the topic holds %d outputs, want 2", len(got))
	}
	if code, out := run("r2.csv", "nope"); code != cli.ExitFailure || !strings.Contains(out, "no such topic") || !missingFile("r2.csv") {
		t.Fatalf("a topic that does not exist: exit %d, want %d naming it, no recording:\n%s", code, cli.ExitFailure, out)
	}
	if err := os.Remove("out.kafka.outbox"); err != nil {
		t.Fatal(err)
	}
	code, out = run("r3.csv", "out")
	if code != cli.ExitFailure || !strings.Contains(out, "out.kafka.outbox") || !strings.Contains(out, "batches up to ") || !missingFile("r3.csv") || !missingFile("out.kafka.outbox") {
		t.Fatalf("lost marks: exit %d, want %d naming the marks, no recording, no marks:\n%s", code, cli.ExitFailure, out)
	}
	if code, out := run("r4.csv", "out?txid=second&marks=second.outbox"); code != 0 || missingFile("second.outbox") {
		t.Fatalf("another transactional id: exit %d, want 0 and its marks:\n%s", code, out)
	}
	if got := readSinkTopic(t, brokers, "out"); len(got) != 4 {
		t.Fatalf("the topic holds %d outputs, want 4", len(got))
	}
}

// missingFile reports whether nothing is at path.
func missingFile(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, os.ErrNotExist)
}

// TestARunKilledInsideItsKafkaSinkProducesEachOutputOnce: a ledger run
// over a file with --sink, killed (SIGKILL) at the first reach, from batch
// 2 on, of a point of a batch's delivery, then restarted armed the same
// way twice more, then unarmed, to its end: out-marked (the batch's mark
// written, no transaction begun: the restart's Delivered says the topic
// lacks it, and it is delivered again), sink-produced (its records
// produced in a transaction left open: the restart fences it, aborts it
// at once and delivers the batch again) and sink-committed (the
// transaction committed, the outbox not told: the restart's Delivered
// says the topic holds it, and it is not delivered again). A
// read_committed reader then sees each output once, every line's.
func TestARunKilledInsideItsKafkaSinkProducesEachOutputOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process killed")
	}
	for _, point := range []string{killpoint.OutMarked, killpoint.SinkProduced, killpoint.SinkCommitted} {
		t.Run(point, func(t *testing.T) {
			const n = 300
			brokers, adm := kafkaTopic(t, "unused", 0)
			createTopic(t, adm, "out")
			dir := t.TempDir()
			var in strings.Builder
			want := map[core.EffectKey]bool{}
			for i := range n {
				fmt.Fprintf(&in, "acct-%d,%d\n", i%7, i%50-10)
				want[core.EffectKey{Feed: "input", Position: core.Position{Offset: int64(in.Len())}, Index: 1}] = true
			}
			if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte(in.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			args := func(store string) []string {
				return []string{"run", "--app", "ledger", "--input", "in.txt", "--state", "s.json", "--store", store,
					"--sink", "kafka://" + brokers + "/out", "--delay", "200us", "--state-interval", "5ms"}
			}
			var stores []string
			ended := false
			for k := 1; k <= 3 && !ended; k++ {
				store := filepath.Join(dir, fmt.Sprintf("run-%d.csv", k))
				stores = append(stores, store)
				out, code, killed := blackbox(t, dir, []string{killpoint.Env + "=" + killpoint.ValueAt(point, 2)}, args(store)...)
				switch {
				case code == 0 && k > 1:
					ended = true // nothing left to deliver past the point
				case !killed:
					t.Fatalf("run %d was not killed at %s (exit %d):\n%s", k, point, code, out)
				}
			}
			if !ended {
				store := filepath.Join(dir, "run-4.csv")
				stores = append(stores, store)
				if out, code, _ := blackbox(t, dir, nil, args(store)...); code != 0 {
					t.Fatalf("the last run: exit %d, want 0:\n%s", code, out)
				}
			}
			recs := readSinkTopic(t, brokers, "out")
			if len(recs) > 0 {
				for k, v := range want {
					delete(want, k)
					k.Epoch = recs[0].Key.Epoch
					want[k] = v
				}
			}
			checkSinkOnce(t, brokers, "out", stores, want)
		})
	}
}
