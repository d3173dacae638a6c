package cli_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/cmd/cli"
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
// and no --input; --topic or --group alone is a usage error.
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
