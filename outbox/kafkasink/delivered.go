package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partition is where one partition of the topic is read from.
type partition struct {
	id     int32
	leader int32
}

// topicInfo is the topic's ID and partitions.
type topicInfo struct {
	id    [16]byte
	parts []partition
}

// partitions reads the topic's metadata: ErrNoTopic when it does not
// exist.
func (s *Sink) partitions(ctx context.Context) (topicInfo, error) {
	md, err := kadm.NewClient(s.cl).Metadata(ctx, s.cfg.Topic)
	if err != nil {
		return topicInfo{}, fmt.Errorf("kafkasink: reading topic %s: %w", s.cfg.Topic, err)
	}
	td, ok := md.Topics[s.cfg.Topic]
	switch {
	case !ok, errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return topicInfo{}, fmt.Errorf("%w: %s", ErrNoTopic, s.cfg.Topic)
	case td.Err != nil:
		return topicInfo{}, fmt.Errorf("kafkasink: reading topic %s: %w", s.cfg.Topic, td.Err)
	}
	info := topicInfo{id: td.ID}
	for _, p := range td.Partitions.Sorted() {
		if p.Err != nil {
			return topicInfo{}, fmt.Errorf("kafkasink: topic %s partition %d: %w", s.cfg.Topic, p.Partition, p.Err)
		}
		info.parts = append(info.parts, partition{id: p.Partition, leader: p.Leader})
	}
	return info, nil
}

// Delivered is the number of the last batch the topic holds committed (0:
// none): the highest batch header of the sink's records (its
// transactional id) that a read_committed reader sees. A batch is one
// transaction, so it is in every partition it wrote to or in none: the
// last committed batch is the highest one found at the tail of any
// partition. Each partition is read from its last stable offset back, a
// window at a time (doubled each time), until a record of the sink's is
// found or the log's start; aborted records and control markers occupy
// offsets and are skipped. It is what the outbox asks after a crash
// (core.Transactional); Open fenced the earlier producer first, so no
// transaction of it is left open.
func (s *Sink) Delivered() (int64, error) {
	if s.closed {
		return 0, ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	info, err := s.partitions(ctx)
	if err != nil {
		return 0, err
	}
	adm := kadm.NewClient(s.cl)
	starts, err := adm.ListStartOffsets(ctx, s.cfg.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("kafkasink: listing the start offsets of %s: %w", s.cfg.Topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, s.cfg.Topic) // the last stable offsets
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("kafkasink: listing the stable offsets of %s: %w", s.cfg.Topic, err)
	}
	var last int64
	for _, p := range info.parts {
		start, _ := starts.Lookup(s.cfg.Topic, p.id)
		end, _ := ends.Lookup(s.cfg.Topic, p.id)
		n, err := s.lastBatch(ctx, info.id, p, max(start.Offset, 0), end.Offset)
		if err != nil {
			return 0, err
		}
		last = max(last, n)
	}
	return last, nil
}

// lastBatch is the highest batch header of the sink's committed records
// in [start, end) of partition p, read back from end a window at a time.
func (s *Sink) lastBatch(ctx context.Context, id [16]byte, p partition, start, end int64) (int64, error) {
	w := s.cfg.ScanWindow
	for hi := end; hi > start; w *= 2 {
		lo := max(start, hi-w)
		n, err := s.scan(ctx, id, p, lo, hi)
		if err != nil || n > 0 {
			return n, err
		}
		hi = lo
	}
	return 0, nil
}

// scan reads [lo, hi) of partition p read_committed and returns the
// highest batch header of the sink's records there (0: none).
func (s *Sink) scan(ctx context.Context, id [16]byte, p partition, lo, hi int64) (int64, error) {
	var last int64
	for at := lo; at < hi; {
		fp, next, err := s.fetch(ctx, id, p, at, 0)
		if err != nil {
			return 0, err
		}
		for _, r := range fp.Records {
			if r.Offset >= hi {
				break
			}
			if n, ok := s.batchOf(r); ok {
				last = max(last, n)
			}
		}
		if next <= at {
			// Nothing below the stable offset came back: the window
			// cannot be read to its end (never, from a broker that
			// keeps its last stable offset).
			return 0, fmt.Errorf("kafkasink: reading %s partition %d: no progress at offset %d below %d", s.cfg.Topic, p.id, at, hi)
		}
		at = next
	}
	return last, nil
}

// committed reports whether a read_committed reader sees r, a record of
// batch just produced and committed: it reads r's partition from r's
// offset, waiting for the transaction's marker (which brokers may write
// after they answer the commit), until r comes back (committed) or an
// offset past it does (r aborted).
func (s *Sink) committed(ctx context.Context, r *kgo.Record, batch int64) (bool, error) {
	info, err := s.partitions(ctx)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(info.parts, func(p partition) bool { return p.id == r.Partition })
	if i < 0 {
		return false, fmt.Errorf("kafkasink: topic %s has no partition %d", s.cfg.Topic, r.Partition)
	}
	var wait time.Duration // none at first: the marker is usually written
	for at := r.Offset; ; wait = time.Second {
		fp, next, err := s.fetch(ctx, info.id, info.parts[i], at, wait)
		if err != nil {
			return false, err
		}
		for _, rec := range fp.Records {
			if rec.Offset == r.Offset {
				n, ok := s.batchOf(rec)
				return ok && n == batch, nil
			}
		}
		if next > r.Offset {
			return false, nil // passed over: aborted
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		at = max(at, next)
	}
}

// fetch reads partition p at offset at read_committed, waiting up to wait
// for something to read, and returns what it read and the next offset to
// read (at when nothing below the last stable offset came back).
func (s *Sink) fetch(ctx context.Context, id [16]byte, p partition, at int64, wait time.Duration) (kgo.FetchPartition, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MinBytes = 0
	if wait > 0 {
		req.MinBytes = 1
	}
	req.MaxBytes = 8 << 20
	req.IsolationLevel = 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = s.cfg.Topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.id, at, 4<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.cl.Broker(int(p.leader)))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = errors.New("a fetch response without the partition")
	}
	if err != nil {
		return kgo.FetchPartition{}, at, fmt.Errorf("kafkasink: reading %s partition %d at %d: %w", s.cfg.Topic, p.id, at, err)
	}
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: at, IsolationLevel: kgo.ReadCommitted(),
		Topic: s.cfg.Topic, Partition: p.id}, &resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		return kgo.FetchPartition{}, at, fmt.Errorf("kafkasink: reading %s partition %d at %d: %w", s.cfg.Topic, p.id, at, fp.Err)
	}
	return fp, next, nil
}

// batchOf is the batch header of r if the sink produced it.
func (s *Sink) batchOf(r *kgo.Record) (int64, bool) {
	var mine bool
	var batch int64 = -1
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderOutbox:
			mine = string(h.Value) == s.cfg.TransactionalID
		case HeaderBatch:
			if n, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && n > 0 {
				batch = n
			}
		}
	}
	return batch, mine && batch > 0
}
