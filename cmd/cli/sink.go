package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/outbox/kafkasink"
)

// sinkConfig is `run --sink kafka://BROKERS/TOPIC[?txid=ID&marks=PATH]`:
// the outputs go through an outbox to a Kafka topic, each batch one
// transaction. It is only read.
type sinkConfig struct {
	raw     string // as given
	brokers []string
	topic   string
	txid    string // the transactional id: default blackbox-TOPIC
	marks   string // the outbox's marks: default TOPIC.kafka.outbox beside --store
}

func (s sinkConfig) on() bool { return s.raw != "" }

// String is the sink as the run's summary names it.
func (s sinkConfig) String() string {
	return "kafka://" + strings.Join(s.brokers, ",") + "/" + s.topic
}

// feeds reports whether the sink's topic is k's input topic: the same
// name on a broker both name.
func (s sinkConfig) feeds(k kafkaConfig) bool {
	if !k.on() || s.topic != k.topic {
		return false
	}
	for _, b := range k.brokerList() {
		if slices.Contains(s.brokers, b) {
			return true
		}
	}
	return false
}

// errSinkIDUsed: the topic holds batches of the sink's transactional id
// that its marks file, new, does not know.
var errSinkIDUsed = errors.New("the topic holds batches of this transactional id, and the marks file is new: its marks were lost, or another outbox uses the id (give each its own ?txid=)")

// topicName is a Kafka topic's legal name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// parseSink reads --sink (store: --store, beside which the marks go by
// default). Every refusal is a usage error.
func parseSink(raw, store string) (sinkConfig, error) {
	s := sinkConfig{raw: raw}
	rest, ok := strings.CutPrefix(raw, "kafka://")
	if !ok {
		return s, usagef("--sink %q: want kafka://BROKERS/TOPIC (BROKERS host:port, comma-separated)", raw)
	}
	rest, query, _ := strings.Cut(rest, "?")
	brokers, topic, ok := strings.Cut(rest, "/")
	for b := range strings.SplitSeq(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			s.brokers = append(s.brokers, b)
		}
	}
	if !ok || len(s.brokers) == 0 || !topicName.MatchString(topic) {
		return s, usagef("--sink %q: want kafka://BROKERS/TOPIC (BROKERS host:port, comma-separated; TOPIC of letters, digits, '.', '_', '-')", raw)
	}
	s.topic = topic
	q, err := url.ParseQuery(query)
	if err != nil {
		return s, usagef("--sink %q: %v", raw, err)
	}
	for k, v := range q {
		if len(v) != 1 || v[0] == "" {
			return s, usagef("--sink %q: %s wants one value", raw, k)
		}
		switch k {
		case "txid":
			s.txid = v[0]
		case "marks":
			s.marks = v[0]
		default:
			return s, usagef("--sink %q: unknown option %q (want txid or marks)", raw, k)
		}
	}
	if s.txid == "" {
		s.txid = "blackbox-" + topic
	}
	if s.marks == "" {
		s.marks = filepath.Join(filepath.Dir(store), topic+".kafka.outbox")
	}
	return s, nil
}

// openSinkOutbox opens --sink's producer and its outbox before the run
// creates anything else: kafkasink.Open fences the producer of a killed
// run with the same transactional id (aborting its open transaction),
// then the outbox first delivers what earlier runs recorded and committed
// but did not deliver. A topic that does not exist, a new marks file while
// the topic holds batches of the id (errSinkIDUsed) and marks the outbox
// refuses refuse the run before any work (exit 2); a marks file the run
// created is removed then.
func openSinkOutbox(ctx context.Context, cfg recordConfig, logger *slog.Logger) (*runOutbox, error) {
	s := cfg.sink
	o := &runOutbox{marks: s.marks, newMarks: missing(s.marks)}
	ks, err := kafkasink.Open(ctx, kafkasink.Config{Brokers: s.brokers, Topic: s.topic, TransactionalID: s.txid, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--sink %s: %w", s, err)
	}
	if o.newMarks {
		n, err := ks.Delivered()
		if err == nil && n > 0 {
			err = &fileError{s.marks, fmt.Errorf("%w (transactional id %s, batches up to %d)", errSinkIDUsed, s.txid, n)}
		}
		if err != nil {
			ks.Close()
			return nil, fmt.Errorf("--sink %s: %w", s, err)
		}
	}
	o.kafka = ks
	if o.box, err = outbox.Open(outbox.Config{Marks: s.marks, Sink: ks, Logger: logger}); err != nil {
		ks.Close()
		o.remove()
		var me *outbox.MarksError
		if errors.As(err, &me) { // it names the file and the line
			return nil, fmt.Errorf("--sink: %w", err)
		}
		return nil, &fileError{s.marks, fmt.Errorf("--sink %s: %w", s, err)}
	}
	return o, nil
}
