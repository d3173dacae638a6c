package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"strconv"

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
	dec := kgo.DefaultDecompressor()
	for at := lo; at < hi; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 0
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
		if err != nil {
			return 0, fmt.Errorf("kafkasink: reading %s partition %d at %d: %w", s.cfg.Topic, p.id, at, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("kafkasink: reading %s partition %d at %d: a fetch response without the partition", s.cfg.Topic, p.id, at)
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: at, IsolationLevel: kgo.ReadCommitted(),
			Topic: s.cfg.Topic, Partition: p.id}, &resp.Topics[0].Partitions[0], dec, nil)
		if fp.Err != nil {
			return 0, fmt.Errorf("kafkasink: reading %s partition %d at %d: %w", s.cfg.Topic, p.id, at, fp.Err)
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
