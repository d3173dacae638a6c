package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/engine/kafkasource"
)

// kafkaConfig is `run --kafka BROKERS --topic T --group G`: the feed is a
// consumer group of a Kafka topic instead of a file. It is only read.
type kafkaConfig struct {
	brokers string // comma-separated host:port
	topic   string
	group   string
	// pollRecords bounds the records a poll takes (--poll-records; the
	// default --queue with --kafka holds one poll); revokeTimeout bounds
	// a revocation's wait (--revoke-timeout). 0: the source's defaults.
	pollRecords   int
	revokeTimeout time.Duration
	// sessionTimeout is the member's session (--session-timeout): how
	// long a killed member holds its partitions.
	sessionTimeout time.Duration
}

func (k *kafkaConfig) flags(f *pflag.FlagSet) {
	f.StringVar(&k.brokers, "kafka", "", "consume a Kafka topic instead of --input: the seed `BROKERS` (host:port, comma-separated)")
	f.StringVar(&k.topic, "topic", "", "--kafka: the topic to consume")
	f.StringVar(&k.group, "group", "", "--kafka: the consumer group (its committed offsets are where a run starts)")
	f.IntVar(&k.pollRecords, "poll-records", kafkasource.DefaultMaxPollRecords, "--kafka: the most records a poll takes (the default --queue holds one poll)")
	f.DurationVar(&k.revokeTimeout, "revoke-timeout", kafkasource.DefaultRevokeTimeout,
		"--kafka: how long a rebalance waits for a revoked partition's queued records to be processed; the rest is left uncommitted to its new owner")
	f.DurationVar(&k.sessionTimeout, "session-timeout", kafkasource.DefaultSessionTimeout,
		"--kafka: the member's session: a member killed (or hung) holds its partitions this long before the group gives them to another; within the brokers' group.min/max.session.timeout.ms")
}

func (k kafkaConfig) on() bool { return k.brokers != "" }

// check refuses a half-given Kafka configuration, and --kafka with --input;
// changed says whether a flag was given.
func (k kafkaConfig) check(input string, changed func(flag string) bool) error {
	switch {
	case !k.on() && (k.topic != "" || k.group != ""):
		return usagef("--topic and --group need --kafka")
	case !k.on() && (changed("poll-records") || changed("revoke-timeout") || changed("session-timeout")):
		return usagef("--poll-records, --revoke-timeout and --session-timeout need --kafka")
	case !k.on():
		return nil
	case input != "":
		return usagef("--kafka and --input both name the input: give one")
	case changed("read") || changed("pointer") || changed("max-line") || changed("rotated"):
		// A file source's flags: given with --kafka they would do nothing
		// (a --pointer naming another file of the run least of all).
		return usagef("--read, --pointer, --max-line and --rotated are for a file input (--input), not --kafka")
	case k.topic == "" || k.group == "":
		return usagef("--kafka needs --topic and --group")
	case k.pollRecords < 1:
		return usagef("--poll-records must be at least 1, got %d", k.pollRecords)
	case k.revokeTimeout <= 0:
		return usagef("--revoke-timeout must be positive, got %s", k.revokeTimeout)
	case k.sessionTimeout <= 0:
		return usagef("--session-timeout must be positive, got %s", k.sessionTimeout)
	}
	return nil
}

// source is the consumer-group source of k. The built-in apps read lines:
// each record is published as its value, a string (the DELIVERY row
// carries its topic/partition, offset+1 and the topic's epoch). A run
// without --follow drains the topic: it is settled once the group has
// committed every partition to its end, the other members' too.
func (k kafkaConfig) source(logger *slog.Logger, follow bool, client ...kgo.Opt) (*kafkasource.Source, error) {
	return kafkasource.New(kafkasource.Options{Brokers: k.brokerList(), Topics: []string{k.topic}, Group: k.group,
		MaxPollRecords: k.pollRecords, RevokeTimeout: k.revokeTimeout, SessionTimeout: k.sessionTimeout, Drain: !follow,
		Logger: logger, Item: func(r *kafkasource.Record) any { return string(r.Value) }, ClientOptions: client})
}

// errNoTopic is a run without --follow given a topic that does not exist:
// it would have nothing to read, ever.
var errNoTopic = errors.New("no such topic: a run without --follow would wait for it forever (--follow waits for it)")

// checkTopic refuses, before any work, a topic the brokers say does not
// exist (a run without --follow: one with --follow waits for it). A
// broker that cannot be asked within a minute is an error too.
func (k kafkaConfig) checkTopic(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokerList()...))
	if err != nil {
		return usagef("--kafka %s: %v", k.brokers, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(k.topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafka %s: reading topic %s: %w", k.brokers, k.topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("kafka %s: topic %s: %w", k.brokers, k.topic, errNoTopic)
		}
	}
	return nil
}

// brokerList is --kafka split at its commas.
func (k kafkaConfig) brokerList() []string {
	var brokers []string
	for b := range strings.SplitSeq(k.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	return brokers
}

// demoTopic and demoGroup are what `demo --kafka` names its topic and group.
const (
	demoTopic      = "ledger"
	demoGroup      = "blackbox-demo"
	demoPartitions = 4
)
