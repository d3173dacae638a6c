package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// kafkaTopic starts an in-process cluster with a topic of 3 partitions
// holding n ledger lines keyed by account, and returns its brokers and an
// admin client on it.
func kafkaTopic(t *testing.T, topic string, n int) (string, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	rs := make([]*kgo.Record, n)
	for i := range rs {
		acct := fmt.Sprintf("acct-%d", i%7)
		rs[i] = &kgo.Record{Key: []byte(acct), Value: fmt.Appendf(nil, "%s,%d", acct, i%50-10)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(c.ListenAddrs(), ","), kadm.NewClient(cl)
}

// TestRunKafkaConsumesTheTopicCommitsAfterProcessingAndTheRecordingReplays:
// `run --kafka --topic --group` (two workers) reads every record of the
// topic, ends once they are processed and committed (the group's offsets,
// read with kadm, are the end offsets), and its recording replays
// identical with no broker; a second run of the same group starts at the
// committed offsets: it reads nothing.
func TestRunKafkaConsumesTheTopicCommitsAfterProcessingAndTheRecordingReplays(t *testing.T) {
	const n = 300
	brokers, adm := kafkaTopic(t, "postings", n)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first := filepath.Join(dir, "first.csv")
	code, out := execute(t, ctx, "run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g",
		"--workers", "2", "--store", first)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d records", n)) {
		t.Fatalf("run: exit %d, want 0 and %d records read:\n%s", code, n, out)
	}
	ends, err := adm.ListEndOffsets(ctx, "postings")
	if err != nil {
		t.Fatal(err)
	}
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if got, ok := offs.Lookup("postings", e.Partition); !ok || got.At != e.Offset {
			t.Errorf("partition %d: committed %v, want the end offset %d", e.Partition, got.At, e.Offset)
		}
		// The run prints each partition's standing: committed to its end,
		// nothing left to read.
		if line := fmt.Sprintf("partition postings/%d: committed %d, processed %d, lag 0, paused no", e.Partition, e.Offset, e.Offset); !strings.Contains(out, line) {
			t.Errorf("the run's output has no line %q:\n%s", line, out)
		}
	})
	if code, out := execute(t, ctx, "replay", first); code != 0 {
		t.Fatalf("replay: exit %d, want 0:\n%s", code, out)
	}
	second := filepath.Join(dir, "second.csv")
	code, out = execute(t, ctx, "run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g",
		"--store", second)
	if code != 0 || !strings.Contains(out, ": 0 records") {
		t.Fatalf("second run: exit %d, want 0 and no record read:\n%s", code, out)
	}
}

// TestRunKafkaFlagsAreCheckedTogether: --kafka takes --topic and --group
// and no --input; --topic or --group alone is a usage error, and so are
// --poll-records, --revoke-timeout and --session-timeout without --kafka
// or not positive.
func TestRunKafkaFlagsAreCheckedTogether(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "run.csv")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"kafka and input", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--input", "in.txt"}},
		{"kafka without group", []string{"--kafka", "localhost:9092", "--topic", "t"}},
		{"kafka without topic", []string{"--kafka", "localhost:9092", "--group", "g"}},
		{"topic without kafka", []string{"--input", "in.txt", "--topic", "t"}},
		{"poll-records without kafka", []string{"--input", "in.txt", "--poll-records", "10"}},
		{"revoke-timeout without kafka", []string{"--input", "in.txt", "--revoke-timeout", "1s"}},
		{"poll-records 0", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--poll-records", "0"}},
		{"revoke-timeout 0", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--revoke-timeout", "0s"}},
		{"session-timeout without kafka", []string{"--input", "in.txt", "--session-timeout", "10s"}},
		{"session-timeout 0", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--session-timeout", "0s"}},
		{"session-timeout negative", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--session-timeout", "-1s"}},
		{"kafka and pointer", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--pointer", "s.json#w1"}},
		{"kafka and read", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--read", "earliest"}},
		{"kafka and max-line", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--max-line", "10"}},
		{"kafka and rotated", []string{"--kafka", "localhost:9092", "--topic", "t", "--group", "g", "--rotated", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--app", "ledger", "--store", store}, tc.args...)
			if code, out := execute(t, context.Background(), args...); code != cli.ExitFailure {
				t.Fatalf("exit %d, want %d (a usage error):\n%s", code, cli.ExitFailure, out)
			}
		})
	}
}

// TestDemoKafkaRecordsTheLedgerThroughAnInProcessClusterAndReplaysIt:
// `demo --kafka` needs no server: it produces the demo lines to an
// in-process cluster, records the ledger consuming them and proves the
// replay identical, complete and lossless.
func TestDemoKafkaRecordsTheLedgerThroughAnInProcessClusterAndReplaysIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, out := execute(t, ctx, "demo", "--kafka", "--dir", t.TempDir(), "--lines", "2000", "--format", "csv")
	if code != 0 || !strings.Contains(out, "Kafka topic ledger") ||
		!strings.Contains(out, "identical: yes  complete: yes  lossless: yes") {
		t.Fatalf("demo --kafka: exit %d, want 0 and a proven replay over Kafka:\n%s", code, out)
	}
}

// TestRunKafkaLedgerKilledAfterASaveAppliesEveryRecordOnce: `run --kafka
// --state` (one worker owning the topic's 3 partitions) is SIGKILLed right
// after a save of its state (killpoint state-saved), before the offsets
// that save covers are committed: the restart reads those records again
// (the commit lag) and the ledger, which keys what it applied by
// position space (the topic's epoch, which the restart's new generation
// keeps, and the partition) and offset, skips them. In the end every record was applied
// exactly once: the saved balances are the topic's sums and the applied
// count is the number of records. Saving per record and in batches.
func TestRunKafkaLedgerKilledAfterASaveAppliesEveryRecordOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process killed")
	}
	const n = 600
	for _, tc := range []struct {
		name string
		kill string // the N-th save dies
		args []string
	}{
		{"a save per record", killpoint.StateSaved + ":250", []string{"--state-every", "1"}},
		{"saves in batches", killpoint.StateSaved + ":3", []string{"--state-every", "20", "--delay", "1ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers, _ := kafkaTopic(t, "postings", n)
			want := map[string]int64{}
			for i := range n {
				want[fmt.Sprintf("acct-%d", i%7)] += int64(i%50 - 10)
			}
			dir := t.TempDir()
			state := filepath.Join(dir, "s.json")
			args := func(store string) []string {
				return append([]string{"run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g",
					"--state", state, "--store", filepath.Join(dir, store)}, tc.args...)
			}
			out, code, killed := blackbox(t, dir, []string{killpoint.Env + "=" + tc.kill}, args("run1.csv")...)
			if !killed {
				t.Fatalf("the first run was not killed at %s (exit %d):\n%s", tc.kill, code, out)
			}
			evictMembers(t, brokers, "g") // as its session expiring would, at once
			before := readLedgerState(t, state)
			if before.Applied == 0 || before.Applied >= n {
				t.Fatalf("the killed run applied %d of %d records: want some, not all", before.Applied, n)
			}
			out, code, _ = blackbox(t, dir, nil, args("run2.csv")...)
			if code != 0 {
				t.Fatalf("the restart: exit %d, want 0:\n%s", code, out)
			}
			var read int64
			if _, err := fmt.Sscanf(out[strings.Index(out, "):")+2:], "%d records", &read); err != nil {
				t.Fatalf("the restart's output has no record count: %v\n%s", err, out)
			}
			if read <= n-before.Applied {
				t.Fatalf("the restart read %d records, %d were left to apply: it read none again (no commit lag to prove anything)", read, n-before.Applied)
			}
			after := readLedgerState(t, state)
			if !maps.Equal(after.Balances, want) || after.Applied != n {
				t.Errorf("after the restart (which read %d records, %d left to apply): balances %v, applied %d; want %v, %d (each record applied once)",
					read, n-before.Applied, after.Balances, after.Applied, want, n)
			}
		})
	}
}

// readLedgerState reads a ledger state file.
func readLedgerState(t *testing.T, path string) apps.LedgerState {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st apps.LedgerState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return st
}

// evictMembers removes every member of group (a killed run's, whose
// session would expire after 45s) with LeaveGroup, as the session's
// expiry does: a restart joins at once. Given ids, it removes only the
// members of those ids (groupMembers) that are still members.
func evictMembers(t *testing.T, brokers, group string, ids ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	groups, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	for _, m := range groups[group].Members {
		if len(ids) > 0 && !slices.Contains(ids, m.MemberID) {
			continue
		}
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.MemberID
		req.Members = append(req.Members, lm)
	}
	if len(req.Members) == 0 {
		return
	}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("evicting the members of group %s: %v", group, err)
	}
}

// TestRunKafkaCountsRecordsDeletedBeforeTheyWereReadAsLost: the first 20
// records of a partition are deleted (retention) before the group read
// them: `run --kafka` reads the rest, says the partition lost 20 records
// and exits 3 (not lossless), its status counting a retention loss.
func TestRunKafkaCountsRecordsDeletedBeforeTheyWereReadAsLost(t *testing.T) {
	brokers, adm := kafkaTopic(t, "postings", 300)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var deleted kadm.Offsets
	deleted.Add(kadm.Offset{Topic: "postings", Partition: 0, At: 20})
	if resp, err := adm.DeleteRecords(ctx, deleted); err != nil || resp.Error() != nil {
		t.Fatalf("deleting records: %v %v", err, resp.Error())
	}
	dir := t.TempDir()
	status := filepath.Join(dir, "status.json")
	code, out := execute(t, ctx, "run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g",
		"--store", filepath.Join(dir, "run.csv"), "--status", status)
	if code != cli.ExitIncomplete || !strings.Contains(out, "lost 20") || !strings.Contains(out, "lossless: no") {
		t.Fatalf("run: exit %d, want %d, partition postings/0 lost 20, not lossless:\n%s", code, cli.ExitIncomplete, out)
	}
	var st struct {
		Feeds []struct {
			Losses map[string]int64 `json:"losses"`
		} `json:"feeds"`
	}
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Feeds) != 1 || st.Feeds[0].Losses["retention"] != 1 {
		t.Errorf("status losses %+v, want one retention loss", st.Feeds)
	}
}

// TestRunKafkaJoinsTheGroupWithTheSessionTimeoutItIsGiven: the session a
// run's member asks the group for (its JoinGroup requests, seen by the
// broker) is --session-timeout, and franz-go's default, 45s, without it.
func TestRunKafkaJoinsTheGroupWithTheSessionTimeoutItIsGiven(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		want      time.Duration
		rebalance time.Duration // follows the session, leaving room for a revocation
	}{
		{"default", nil, 45 * time.Second, 45 * time.Second},
		{"given", []string{"--session-timeout", "1500ms"}, 1500 * time.Millisecond, 5 * time.Second},
		{"given with a revocation", []string{"--session-timeout", "10s", "--revoke-timeout", "1s"}, 10 * time.Second, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "empty"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			var (
				mu                   sync.Mutex
				sessions, rebalances []time.Duration
			)
			c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				mu.Lock()
				defer mu.Unlock()
				jr := req.(*kmsg.JoinGroupRequest)
				sessions = append(sessions, time.Duration(jr.SessionTimeoutMillis)*time.Millisecond)
				rebalances = append(rebalances, time.Duration(jr.RebalanceTimeoutMillis)*time.Millisecond)
				return nil, nil, false
			})
			dir := t.TempDir()
			args := append([]string{"run", "--app", "ledger", "--kafka", strings.Join(c.ListenAddrs(), ","), "--topic", "empty",
				"--group", "g", "--store", filepath.Join(dir, "r.csv")}, tc.args...)
			if code, out := execute(t, context.Background(), args...); code != 0 {
				t.Fatalf("exit %d, want 0:\n%s", code, out)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(sessions) == 0 {
				t.Fatal("the run never joined the group")
			}
			for _, got := range sessions {
				if got != tc.want {
					t.Errorf("JoinGroup with a session of %s, want %s", got, tc.want)
				}
			}
			for _, got := range rebalances {
				if got != tc.rebalance {
					t.Errorf("JoinGroup with a rebalance timeout of %s, want %s (a member killed in a rebalance is removed only then)", got, tc.rebalance)
				}
			}
		})
	}
}

// recreateTopic deletes topic and creates it again with 3 partitions (a
// new topic ID: its offsets start at 0 again), then produces n ledger lines
// to it keyed by account, amounts from base on; it returns the sums per
// account of what it produced.
func recreateTopic(t *testing.T, brokers string, adm *kadm.Client, topic string, n, base int) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := adm.DeleteTopics(ctx, topic); err != nil || resp.Error() != nil {
		t.Fatalf("deleting %s: %v %v", topic, err, resp.Error())
	}
	for { // the deletion completes asynchronously: the creation is refused until then
		r, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
		if err == nil && r.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("creating %s again: %v %v", topic, err, r.Err)
		}
		runtime.Gosched()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sums := map[string]int64{}
	rs := make([]*kgo.Record, n)
	for i := range rs {
		acct := fmt.Sprintf("acct-%d", i%7)
		rs[i] = &kgo.Record{Key: []byte(acct), Value: fmt.Appendf(nil, "%s,%d", acct, base+i)}
		sums[acct] += int64(base + i)
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// TestRunKafkaLedgerAppliesTheRecordsOfATopicCreatedAgain: `run --kafka
// --state` applies every record of a topic, then, while stopped, the topic
// is deleted and created again and records are produced to it: their
// offsets start at 0 again, under another epoch (the new topic ID). The
// next run applies each of them: the ledger keys what it applied by
// position space (epoch and partition), so the offsets it applied in the
// first topic do not make it skip the second's.
func TestRunKafkaLedgerAppliesTheRecordsOfATopicCreatedAgain(t *testing.T) {
	const n, m = 300, 120
	brokers, adm := kafkaTopic(t, "postings", n)
	want := map[string]int64{}
	for i := range n {
		want[fmt.Sprintf("acct-%d", i%7)] += int64(i%50 - 10)
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "s.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(store string) {
		t.Helper()
		code, out := execute(t, ctx, "run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g",
			"--state", state, "--store", filepath.Join(dir, store))
		if code != 0 {
			t.Fatalf("%s: exit %d, want 0:\n%s", store, code, out)
		}
	}
	run("run1.csv")
	for acct, sum := range recreateTopic(t, brokers, adm, "postings", m, 1000) {
		want[acct] += sum
	}
	run("run2.csv")
	if st := readLedgerState(t, state); !maps.Equal(st.Balances, want) || st.Applied != n+m {
		t.Errorf("after the topic was created again: balances %v, applied %d; want %v, %d (each record of both topics applied once)",
			st.Balances, st.Applied, want, n+m)
	}
}

// TestRunKafkaEndsWhenItsTopicIsDeletedUnderIt: a run without --follow is
// consuming a topic (slowly: --delay) when the topic is deleted. The
// records it had not read are gone: it counts them lost and, nothing being
// left to read, ends, exiting 3 (not lossless) and naming the deleted
// topic, instead of waiting forever for a topic that is no more.
func TestRunKafkaEndsWhenItsTopicIsDeletedUnderIt(t *testing.T) {
	const n = 600
	brokers, adm := kafkaTopic(t, "postings", n)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := execute(t, ctx, "run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g",
			"--delay", "5ms", "--poll-records", "20", "--store", filepath.Join(dir, "run.csv"))
		done <- result{code, out}
	}()
	// Once the run committed some records (it is at work), the topic goes.
	for committed := false; !committed; {
		offs, err := adm.FetchOffsets(ctx, "g")
		if err == nil { // GROUP_ID_NOT_FOUND until the run joined
			offs.Each(func(o kadm.OffsetResponse) { committed = committed || o.At > 0 })
		}
		if ctx.Err() != nil {
			t.Fatal("the run committed nothing")
		}
		runtime.Gosched()
	}
	if resp, err := adm.DeleteTopics(ctx, "postings"); err != nil || resp.Error() != nil {
		t.Fatalf("deleting the topic: %v %v", err, resp.Error())
	}
	select {
	case r := <-done:
		if r.code != cli.ExitIncomplete || !strings.Contains(r.out, "topic postings deleted") || !strings.Contains(r.out, "lossless: no") ||
			!strings.Contains(r.out, "lost deleted") {
			t.Errorf("exit %d, want %d, the records not read lost and the topic named deleted:\n%s", r.code, cli.ExitIncomplete, r.out)
		}
	case <-time.After(time.Minute):
		t.Fatal("the run did not end within a minute of its topic's deletion")
	}
}

// TestRunKafkaWithoutFollowRefusesATopicThatDoesNotExist: a topic deleted
// while no run was reading it (or never created) has nothing to read: a
// run without --follow is refused before any work (exit 2 naming the
// topic, no recording created) instead of waiting forever for it.
func TestRunKafkaWithoutFollowRefusesATopicThatDoesNotExist(t *testing.T) {
	brokers, adm := kafkaTopic(t, "postings", 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := adm.DeleteTopics(ctx, "postings"); err != nil || resp.Error() != nil {
		t.Fatalf("deleting the topic: %v %v", err, resp.Error())
	}
	store := filepath.Join(t.TempDir(), "run.csv")
	code, out := execute(t, ctx, "run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g", "--store", store)
	if code != cli.ExitFailure || !strings.Contains(out, "topic postings: no such topic") {
		t.Errorf("exit %d, want %d naming the topic that does not exist:\n%s", code, cli.ExitFailure, out)
	}
	if _, err := os.Stat(store); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused run left %s (%v)", store, err)
	}
}

// groupMembers returns the member ids of group's members now.
func groupMembers(t *testing.T, brokers, group string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	groups, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range groups[group].Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}
