package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// poll polls acknowledgements: the engine tells the committer, which
// commits. A failed commit is warned (once per distinct failure) and
// retried at the next poll: the committed offsets lag, records are
// re-delivered, never lost.
func (s *Source) poll() {
	s.mu.Lock()
	in := s.in
	s.mu.Unlock()
	_, err := in.PollAcks()
	if errors.Is(err, ErrRewind) {
		s.failed.CompareAndSwap(nil, &err)
	}
	if err == nil && s.unsure() {
		// Nothing new to commit, but an offset may have been moved back
		// by a late commit: verified (and committed again) now.
		err = s.commit()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.lastError = ""
	case err.Error() != s.lastError:
		s.lastError = err.Error()
		s.log.Warn("kafkasource: commit failed; retried at every duty cycle (the committed offsets lag: records are re-delivered, never lost)",
			"group", s.opts.Group, "err", err)
	}
}

// unsure reports whether the committed offsets are due for a read-back:
// every VerifyInterval, and at every poll while an owned partition's
// commit had an unknown outcome.
func (s *Source) unsure() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.verified) >= s.opts.VerifyInterval {
		return true
	}
	for _, p := range s.parts {
		if p.owned && !p.uncertain.IsZero() {
			return true
		}
	}
	return false
}

// committer is the source's engine.Committer.
type committer struct{ s *Source }

// Acknowledged raises the partition's acknowledged position; an
// acknowledgement of a partition not owned, of an item published before
// the assignment that owns it (at or before its fence), or of another
// incarnation of its topic, is fenced.
func (c committer) Acknowledged(seq, epoch int64, pos core.Position) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[pos.Key]
	if p == nil || !p.owned || seq <= p.fence || epoch != p.epoch {
		s.fenced.Add(1)
		if p != nil {
			p.fenced++
		}
		return
	}
	p.acked = max(p.acked, pos.Offset)
}

// Commit commits, per owned partition, the acknowledged position when it
// is past the committed one; a lower committed offset is never sent. The
// commit's metadata carries the progress of the groups ahead of it, and a
// commit at the committed offset is sent again when that progress moved.
func (c committer) Commit() error { return c.s.commit() }

var _ engine.GroupCommitter = committer{}

// GroupAcknowledged raises a group's progress in a partition
// (engine.GroupCommitter): of a record of the partition's current
// ownership and incarnation only, as Acknowledged.
func (c committer) GroupAcknowledged(group string, cm engine.Commit) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[cm.Position.Key]
	if p == nil || !p.owned || cm.Seq <= p.fence || cm.Epoch != p.epoch || !p.id.known() {
		return
	}
	kp := s.progress[p.key]
	if kp == nil || kp.epoch != p.epoch {
		kp = &keyProgress{epoch: p.epoch, groups: map[string]int64{}}
		s.progress[p.key] = kp
	}
	off, known := kp.groups[group]
	kp.groups[group] = max(off, cm.Position.Offset)
	if !known {
		s.refreshView()
	}
}

// metaOf is the metadata of a commit of p at offset (s.mu held): its
// topic's ID and the progress of the groups ahead of offset. A group the
// metadata cannot hold is warned of once.
func (s *Source) metaOf(p *part, offset int64) string {
	ahead := map[string]int64{}
	if kp := s.progress[p.key]; kp != nil && kp.epoch == p.epoch {
		for g, off := range kp.groups {
			if off > offset {
				ahead[g] = off
			}
		}
	}
	meta, left := commitMeta(p.id, ahead)
	for _, g := range left {
		if !s.unkept[g] {
			s.unkept[g] = true
			s.log.Warn("kafkasource: a commit's metadata cannot hold the progress of every group of the feed: this group keeps none (a restart delivers it again what the slowest group had not completed)",
				"group", s.opts.Group, "feed group", g, "partition", p.key)
		}
	}
	return meta
}

var _ engine.CommitReporter = committer{}

// Durable reports the offset this source committed for cm's partition
// while it owned it under the assignment cm was published in, in cm's
// incarnation of the topic (engine.CommitReporter), so that the engine
// claims a commit (a COMMIT row) only for a position Kafka holds from this
// member. It is not live once the partition is no longer owned, owned
// again under a later assignment, or read from another incarnation: cm's
// acknowledgement is fenced, never committed.
func (c committer) Durable(cm engine.Commit) (int64, bool) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[cm.Position.Key]
	if p == nil || cm.Seq <= p.fence || cm.Epoch != p.epoch {
		return -1, false
	}
	return p.committed, p.owned
}

func (s *Source) commit() error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if err := s.verify(); err != nil {
		return err
	}
	s.mu.Lock()
	cl := s.cl
	offsets := map[string]map[int32]kgo.EpochOffset{}
	tags := map[string]string{} // by partition key
	for _, p := range s.parts {
		if !p.owned || p.acked <= 0 && p.committed < 0 { // acked 0: nothing processed yet
			continue
		}
		off := max(p.acked, p.committed)
		meta := ""
		if p.id.known() {
			meta = s.metaOf(p, off)
		}
		if p.acked > p.committed || meta != p.meta && p.committed >= 0 {
			if offsets[p.topic] == nil {
				offsets[p.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[p.topic][p.partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
			if meta != "" {
				tags[p.key] = meta
			}
		}
	}
	s.mu.Unlock()
	if len(offsets) == 0 || cl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	// Each offset committed names the incarnation of the topic it is a
	// position of (its metadata): a broker before Kafka 4.2 may land a
	// commit of a deleted topic on the topic created again under its
	// name, and offsetsFetched then knows it for another's.
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				if tag, ok := tags[partitionKey(rt.Topic, rt.Partitions[j].Partition)]; ok {
					rt.Partitions[j].Metadata = kmsg.StringPtr(tag)
				}
			}
		}
		return nil
	})
	var failed []error
	done := map[string]int64{}
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			// The request may still land, late (a timeout): until a
			// read-back shows otherwise for a while, its partitions
			// are checked at every commit.
			until := time.Now().Add(2 * s.opts.CommitTimeout)
			s.mu.Lock()
			for t, ps := range offsets {
				for partition := range ps {
					if p := s.parts[partitionKey(t, partition)]; p != nil {
						p.uncertain = until
					}
				}
			}
			s.refreshView()
			s.mu.Unlock()
			failed = append(failed, err)
			return
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				key := partitionKey(t.Topic, rp.Partition)
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					failed = append(failed, fmt.Errorf("%s: %w", key, err))
					continue
				}
				done[key] = offsets[t.Topic][rp.Partition].Offset
			}
		}
	})
	s.mu.Lock()
	for key, off := range done {
		if p := s.parts[key]; p != nil {
			p.committed = max(p.committed, off) // a late, lower answer never moves it back
			if p.committed == off {
				p.meta = tags[key]
			}
		}
	}
	s.mu.Unlock()
	if len(failed) > 0 {
		s.commitFailures.Add(1)
		return fmt.Errorf("%w: %w", ErrCommit, errors.Join(failed...))
	}
	return nil
}

// verify reads back the group's committed offsets of the owned partitions
// every VerifyInterval, and at every commit those a commit with an unknown
// outcome covered (a timeout: the request may still land, after a later
// commit, and move the offset back), until 2×CommitTimeout after the
// failure. Where the group's offset is behind the one this source
// committed, the committed offset is lowered to it, so that this commit
// sends the acknowledged one again: a late commit never leaves an offset
// behind for longer than VerifyInterval.
func (s *Source) verify() error {
	s.mu.Lock()
	cl := s.cl
	due := time.Since(s.verified) >= s.opts.VerifyInterval
	var check []*part
	for _, p := range s.parts {
		if p.owned && p.committed >= 0 && (due || !p.uncertain.IsZero()) {
			check = append(check, p)
		}
	}
	s.mu.Unlock()
	if len(check) == 0 || cl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	got, err := kadm.NewClient(cl).FetchOffsets(ctx, s.opts.Group)
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		s.commitFailures.Add(1)
		return fmt.Errorf("%w: reading back the committed offsets after a failed commit: %w", ErrCommit, err)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if due {
		s.verified = now
	}
	for _, p := range check {
		at := int64(-1)
		if o, ok := got.Lookup(p.topic, p.partition); ok {
			at = o.At
		}
		switch {
		case at < p.committed:
			s.log.Warn("kafkasource: a late commit moved an offset back; committing the processed offset again",
				"group", s.opts.Group, "partition", p.key, "committed", at, "processed", p.acked)
			p.committed = at
		case now.After(p.uncertain):
			p.uncertain = time.Time{}
		}
	}
	s.refreshView()
	return nil
}
