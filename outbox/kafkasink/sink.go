package kafkasink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// Sentinel errors, wrapped by the errors the sink returns; match them with
// errors.Is.
var (
	// ErrConfig: a Config without brokers, topic or transactional id.
	ErrConfig = errors.New("kafkasink: bad configuration")
	// ErrNoTopic: the topic does not exist (the sink never creates it).
	ErrNoTopic = errors.New("kafkasink: no such topic")
	// ErrFenced: another producer initialised the sink's transactional
	// id (another process given the same id): this sink can commit
	// nothing more.
	ErrFenced = errors.New("kafkasink: fenced by another producer with the same transactional id")
	// ErrNotCommitted: a batch's transaction that the client reported
	// committed was aborted (a reader does not see it): franz-go v1.22.3
	// can end a transaction by an abort, and report success, when it lost
	// track of the partitions it produced to (seen on the first
	// transaction of a client). Deliver tries the batch again.
	ErrNotCommitted = errors.New("kafkasink: the transaction was aborted, not committed")
	// ErrClosed: the sink was closed.
	ErrClosed = errors.New("kafkasink: closed")
)

// The headers of every record the sink produces.
const (
	// HeaderOutbox is the transactional id of the sink that produced
	// the record: Delivered counts only its own records.
	HeaderOutbox = "blackbox-outbox"
	// HeaderBatch is the outbox's batch number, decimal.
	HeaderBatch = "blackbox-batch"
	// HeaderKey is the output's core.EffectKey as JSON: it names the
	// output for good (a reader may drop a key it has seen).
	HeaderKey = "blackbox-key"
	// HeaderStream is the processor stream that emitted the output.
	HeaderStream = "blackbox-stream"
)

// Defaults of Config.
const (
	DefaultTimeout            = time.Minute
	DefaultTransactionTimeout = time.Minute
	// DefaultScanWindow is the first window of offsets Delivered reads
	// back from the end of a partition.
	DefaultScanWindow = 256
)

// Config is a Sink's configuration. It is only read.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topic receives the outputs; it must exist.
	Topic string
	// TransactionalID is the producer's transactional id: one per
	// outbox (marks file), the same across its restarts, so that a
	// restart fences the process it follows and aborts its open
	// transaction. Two outboxes must never share one.
	TransactionalID string
	// TransactionTimeout is how long the brokers let a transaction stay
	// open before they abort it (a process that died and is not
	// restarted: read_committed readers of the topic wait that long);
	// default DefaultTransactionTimeout.
	TransactionTimeout time.Duration
	// Timeout bounds Open, one batch's transaction and one Delivered;
	// default DefaultTimeout.
	Timeout time.Duration
	// ScanWindow is the first window of offsets Delivered reads back
	// from the end of each partition (doubled until it finds a record of
	// the sink's); default DefaultScanWindow.
	ScanWindow int64
	// ClientOptions are added to the kgo client's (tests: a logger).
	ClientOptions []kgo.Opt
	// Logger receives warnings; default slog.Default().
	Logger *slog.Logger
}

// Sink is a transactional core.EffectSink that produces each output to a
// Kafka topic: each batch of the outbox is one Kafka transaction, and
// Delivered reads back, read_committed, the number of the last batch the
// topic holds (core.Transactional). Its methods are not safe for
// concurrent use: the outbox calls them from one goroutine at a time.
type Sink struct {
	cfg    Config
	cl     *kgo.Client
	log    *slog.Logger
	closed bool
}

// Open makes the sink's producer: it checks that the topic exists, then
// initialises the transactional id, which fences any earlier producer of
// that id (a killed run) and aborts its open transaction, so that neither
// read_committed readers nor Delivered wait for its timeout.
func Open(ctx context.Context, cfg Config) (*Sink, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" || cfg.TransactionalID == "" {
		return nil, fmt.Errorf("%w: want brokers, a topic and a transactional id", ErrConfig)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = DefaultTransactionTimeout
	}
	if cfg.ScanWindow <= 0 {
		cfg.ScanWindow = DefaultScanWindow
	}
	s := &Sink{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.TransactionTimeout(cfg.TransactionTimeout),
		kgo.RecordDeliveryTimeout(cfg.Timeout),
		kgo.ProducerLinger(0),
	}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.cl = cl
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if _, err := s.partitions(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafkasink: initialising transactional id %s: %w", cfg.TransactionalID, err)
	}
	return s, nil
}

// Deliver produces the batch's effects in one transaction, committed
// before it returns. A record's value is the output (Effect.Payload), its
// key the input's position key (recordKey), its headers the batch number,
// the output's core.EffectKey, its stream and the transactional id. Once
// the client says the transaction committed, Deliver reads a record of it
// back, read_committed, and returns only once a reader sees it. A
// transaction that ended by an abort (its produce failed, or the brokers
// aborted it all the same: ErrNotCommitted) is made again, commitTries
// times in all; a Warn says so. On another error the transaction is
// aborted (or, if the error left its end unknown, left to the next Open to
// fence): Delivered says whether it committed.
func (s *Sink) Deliver(batch int64, effects []core.Effect) error {
	if s.closed {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	keys := make([][]byte, len(effects))
	for i, e := range effects {
		key, err := json.Marshal(e.Key)
		if err != nil {
			return fmt.Errorf("kafkasink: batch %d: %w", batch, err)
		}
		keys[i] = key
	}
	for try := 1; ; try++ {
		err := s.transact(ctx, batch, effects, keys)
		var again *againError
		if !errors.As(err, &again) {
			return err
		}
		if try == commitTries || ctx.Err() != nil {
			return again.err
		}
		s.log.Warn(fmt.Sprintf("%v: trying it again", again.err))
	}
}

// commitTries bounds the transactions Deliver makes of one batch.
const commitTries = 3

// againError is a transaction of a batch that ended by an abort (its
// produce failed, or the brokers aborted its commit): Deliver makes it
// again.
type againError struct{ err error }

func (e *againError) Error() string { return e.err.Error() }
func (e *againError) Unwrap() error { return e.err }

// transact is one transaction of the batch: its records produced and
// committed, and the commit read back.
func (s *Sink) transact(ctx context.Context, batch int64, effects []core.Effect, keys [][]byte) error {
	n := []byte(strconv.FormatInt(batch, 10))
	rs := make([]*kgo.Record, len(effects))
	for i, e := range effects {
		rs[i] = &kgo.Record{Key: recordKey(e), Value: e.Payload, Headers: []kgo.RecordHeader{
			{Key: HeaderOutbox, Value: []byte(s.cfg.TransactionalID)},
			{Key: HeaderBatch, Value: n},
			{Key: HeaderKey, Value: keys[i]},
			{Key: HeaderStream, Value: []byte(e.Stream)},
		}}
	}
	if err := s.cl.BeginTransaction(); err != nil {
		return s.wrap("beginning the transaction of batch "+string(n), err)
	}
	if err := s.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		s.abort(ctx)
		err = s.wrap(fmt.Sprintf("producing batch %d", batch), err)
		if errors.Is(err, ErrFenced) {
			return err
		}
		return &againError{err}
	}
	killpoint.ReachAt(killpoint.SinkProduced, batch) // tests only: dormant unless armed
	if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return s.wrap(fmt.Sprintf("committing batch %d", batch), err)
	}
	ok, err := s.committed(ctx, rs[0], batch)
	switch {
	case err != nil:
		return fmt.Errorf("kafkasink: reading batch %d back: %w", batch, err)
	case !ok:
		return &againError{fmt.Errorf("%w: batch %d (transactional id %s)", ErrNotCommitted, batch, s.cfg.TransactionalID)}
	}
	killpoint.ReachAt(killpoint.SinkCommitted, batch)
	return nil
}

// recordKey is the record key of e: its input's position key (a Kafka
// input's "topic/partition"), else its feed (a file input has one key),
// else, for an output without a source position, its processor stream. The
// outputs of one key go to one partition, in the outbox's order.
func recordKey(e core.Effect) []byte {
	switch {
	case e.Key.Position.Key != "":
		return []byte(e.Key.Position.Key)
	case e.Key.Feed != "":
		return []byte(e.Key.Feed)
	}
	return []byte(e.Stream)
}

// abort ends the open transaction by aborting it, its records still
// buffered dropped first; a failure is warned (the next Open fences the
// producer and the brokers abort it).
func (s *Sink) abort(ctx context.Context) {
	err := s.cl.AbortBufferedRecords(ctx)
	if err == nil {
		err = s.cl.EndTransaction(ctx, kgo.TryAbort)
	}
	if err != nil {
		s.log.Warn(fmt.Sprintf("kafkasink: aborting the transaction on %s: %v", s.cfg.Topic, err))
	}
}

// wrap is err of what, ErrFenced when another producer took the id.
func (s *Sink) wrap(what string, err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("%w (transactional id %s): %s: %w", ErrFenced, s.cfg.TransactionalID, what, err)
	}
	return fmt.Errorf("kafkasink: %s on %s: %w", what, s.cfg.Topic, err)
}

// Close closes the producer. An open transaction (a Deliver that failed
// without ending it) is aborted by the brokers, or by the next Open.
func (s *Sink) Close() {
	if !s.closed {
		s.closed = true
		s.cl.Close()
	}
}
