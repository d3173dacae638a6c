package cli

import (
	"path/filepath"
	"reflect"
	"testing"
)

// TestParseSinkReadsBrokersTopicAndOptions: --sink's brokers are split at
// commas, the transactional id defaults to blackbox-TOPIC and the marks to
// TOPIC.kafka.outbox beside --store; txid and marks override them.
func TestParseSinkReadsBrokersTopicAndOptions(t *testing.T) {
	for _, tc := range []struct {
		raw, store string
		want       sinkConfig
	}{
		{"kafka://b1:9092/out", "runs/r.csv", sinkConfig{brokers: []string{"b1:9092"}, topic: "out", txid: "blackbox-out", marks: filepath.Join("runs", "out.kafka.outbox")}},
		{"kafka://b1:9092, b2:9093/o.v-1", "r.db", sinkConfig{brokers: []string{"b1:9092", "b2:9093"}, topic: "o.v-1", txid: "blackbox-o.v-1", marks: "o.v-1.kafka.outbox"}},
		{"kafka://b1:9092/out?txid=ledger-1&marks=m/out.outbox", "r.csv", sinkConfig{brokers: []string{"b1:9092"}, topic: "out", txid: "ledger-1", marks: "m/out.outbox"}},
	} {
		got, err := parseSink(tc.raw, tc.store)
		tc.want.raw = tc.raw
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseSink(%q, %q) = %+v, %v; want %+v", tc.raw, tc.store, got, err, tc.want)
		}
	}
}
