package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

var (
	_ engine.Rewinder      = committer{}
	_ engine.RewindChecker = committer{}
)

// rewindView is what CheckRewind reads of a partition: a copy the source
// makes under s.mu whenever one of these changes (refreshView), read
// without s.mu: CheckRewind runs under the engine's locks, which the
// source takes while it holds s.mu (publishing), so it must not take s.mu.
type rewindView struct {
	owned   bool  // owned and not being revoked
	fence   int64 // the feed's sequence number when this ownership began
	epoch   int64
	idKnown bool
	// uncertain: a commit of the partition had an unknown outcome (it may
	// still land, late, and move the commit past a move back).
	uncertain bool
	// groups are the feed's groups whose progress the partition's
	// commits may carry, of its current epoch.
	groups []string
	// published is the partition's part.pub: how far it is read now (a
	// move back lowered it to its target; the records read again raise it).
	published *atomic.Int64
}

// refreshView publishes the partitions' rewindView (s.mu held). Called
// where what it copies changes: an assignment, a revocation, a loss of
// ownership, the topic's ID learned, a commit's outcome unknown or known
// again, a group's progress kept for the first time: never per record.
func (s *Source) refreshView() {
	v := make(map[string]rewindView, len(s.parts))
	for key, p := range s.parts {
		rv := rewindView{owned: p.owned && !p.revoking, fence: p.fence, epoch: p.epoch, idKnown: p.id.known(),
			uncertain: !p.uncertain.IsZero(), published: &p.pub}
		if kp := s.progress[key]; kp != nil && kp.epoch == p.epoch {
			rv.groups = slices.Sorted(maps.Keys(kp.groups))
		}
		v[key] = rv
	}
	s.view.Store(&v)
}

// maxOffsetDigits is the widest offset a commit's metadata may carry (an
// int64's decimal digits): CheckRewind bounds the metadata a move back
// writes with it.
const maxOffsetDigits = 19

// checkRewind reports why the source could not apply r (nil: it can),
// from the partitions' rewindView.
func (s *Source) checkRewind(r engine.Rewind) error {
	key := r.To.Position.Key
	vp := s.view.Load()
	var v rewindView
	ok := false
	if vp != nil {
		v, ok = (*vp)[key]
	}
	switch {
	case !ok || !v.owned:
		return fmt.Errorf("%w: partition %q is not owned by this member now (a rebalance, or not a partition of the source)", ErrRewind, key)
	case r.To.Seq <= v.fence:
		return fmt.Errorf("%w: seq %d was published before this member's current ownership of partition %s (from seq %d on: a rebalance since)",
			ErrRewind, r.To.Seq, key, v.fence+1)
	case r.To.Epoch != v.epoch:
		return fmt.Errorf("%w: the target is of epoch %d, partition %s is read from epoch %d (the topic was deleted and created again)",
			ErrRewind, r.To.Epoch, key, v.epoch)
	case r.To.Position.Offset < 0:
		return fmt.Errorf("%w: offset %d of partition %s is no position", ErrRewind, r.To.Position.Offset, key)
	case r.To.Position.Offset > v.published.Load():
		// As Rewind refuses it: a target an earlier move back has not read
		// again yet (its seq is of the reading before that move back) is
		// ahead of where the partition is read now: committing there would
		// pass over the records in between (torture seed
		// 1796283069025892410, where the apply's refusal ended the run).
		return fmt.Errorf("%w: partition %s is read again from an earlier move back, through offset %d so far: the target (seq %d, offset %d) is not read again yet; seek again once it is, or to a target at or before it",
			ErrRewind, key, v.published.Load(), r.To.Seq, r.To.Position.Offset)
	case len(r.Others) > 0 && !v.idKnown:
		return fmt.Errorf("%w: the cluster gives no topic ID for partition %s: no group's own progress is kept, and a restart would hand groups %v again what they completed",
			ErrRewind, key, r.Others)
	case v.uncertain:
		return fmt.Errorf("%w: a commit of partition %s has an unknown outcome (it may still land, after the move back, past it): seek again once the commits succeed",
			ErrRewind, key)
	}
	// The commit written holds every group ahead of it: at most r.Group,
	// r.Others and those whose progress the partition's commits carry.
	names := map[string]bool{r.Group: true}
	for _, g := range r.Others {
		names[g] = true
	}
	for _, g := range v.groups {
		names[g] = true
	}
	if n := metaBound(names); len(r.Others) > 0 && n > maxMeta {
		return fmt.Errorf("%w: the commit of partition %s would carry the progress of %d groups in up to %d bytes of metadata, past the %d a commit holds (Kafka's offset.metadata.max.bytes is 4096 by default): a group would keep none",
			ErrRewind, key, len(names), n, maxMeta)
	}
	return nil
}

// metaBound is the longest metadata a commit carrying the progress of the
// groups named can take (commitMeta, each offset maxOffsetDigits wide).
func metaBound(names map[string]bool) int {
	n := len(commitTag(topicID{})) + len(groupsTag)
	for g := range names {
		n += len(url.QueryEscape(g)) + 1 + maxOffsetDigits + 1
	}
	return n
}

// CheckRewind refuses, before the engine changes anything, a backwards
// seek the source could not apply (engine.RewindChecker): a partition this
// member does not own now (a rebalance, or the target published before its
// current ownership), a target of another epoch (the topic was deleted and
// created again), other groups on a cluster that gives no topic ID (no
// group's own progress is kept), a commit of the partition whose outcome is
// unknown, a target ahead of where the partition is read now (an earlier
// move back's, not read again yet), or a commit whose metadata could not
// hold every group's progress. The error wraps ErrRewind. It reads a copy
// the source keeps of what it checks, never s.mu: it is safe while the
// source runs.
func (c committer) CheckRewind(r engine.Rewind) error { return c.s.checkRewind(r) }

// Rewind applies a backwards seek of r.Group to r.To (engine.Rewinder),
// on the goroutine that polls: it commits the partition's offset at r.To
// (or keeps the commit where it is when it is lower: a slower group), its
// metadata holding each group of r.Others at least at the progress it had
// and r.Group at r.To, with CommitOffsetsSync, before anything is read
// again; then has the client fetch the partition from r.To again
// (kgo.Client.SetOffsets, which drops the fetches buffered or in flight),
// drops the partition's polled records not yet published, and returns the
// position of the last record it had published of the partition. During
// a revocation (the revoke's last poll applies a move back pending) the
// commit is made and nothing is fetched again: the partition's next owner
// reads from the commit, with the groups' progress. A failed commit is an
// ErrCommit, the move back retried at the next poll; a partition no longer
// owned an ErrRewind, which ends Run.
func (c committer) Rewind(r engine.Rewind) (core.Position, error) {
	s := c.s
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	key, to := r.To.Position.Key, r.To.Position.Offset
	s.mu.Lock()
	p := s.parts[key]
	switch {
	case p == nil || !p.owned:
		s.mu.Unlock()
		return core.Position{}, fmt.Errorf("%w: partition %q is no longer owned by this member (lost, or its topic deleted, after the seek was checked): the move back is not applied", ErrRewind, key)
	case r.To.Epoch != p.epoch || r.To.Seq <= p.fence || to > p.published:
		s.mu.Unlock()
		return core.Position{}, fmt.Errorf("%w: partition %s: the target (seq %d, epoch %d, offset %d) is no longer of its ownership (from seq %d, epoch %d, published to %d)",
			ErrRewind, key, r.To.Seq, r.To.Epoch, to, p.fence+1, p.epoch, p.published)
	}
	base := max(p.acked, p.committed, 0) // every group completed the records before it
	at := min(base, to)
	groups := map[string]int64{}
	if kp := s.progress[key]; kp != nil && kp.epoch == p.epoch {
		maps.Copy(groups, kp.groups)
	}
	for _, g := range r.Others {
		groups[g] = max(groups[g], base)
	}
	groups[r.Group] = to
	meta := ""
	if p.id.known() {
		ahead := map[string]int64{}
		for g, off := range groups {
			if off > at {
				ahead[g] = off
			}
		}
		var left []string
		if meta, left = commitMeta(p.id, ahead); len(left) > 0 {
			s.mu.Unlock()
			return core.Position{}, fmt.Errorf("%w: partition %s: the commit's metadata cannot hold the progress of groups %v", ErrRewind, key, left)
		}
	}
	topic, partition, revoking, cl := p.topic, p.partition, p.revoking, s.cl
	s.mu.Unlock()

	if err := s.commitOne(cl, topic, partition, at, meta); err != nil {
		return core.Position{}, err
	}
	if !revoking {
		// The fetches buffered or in flight are dropped (those of the
		// other partitions are fetched again from where they were).
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {partition: {Epoch: -1, Offset: to}}})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	through := core.Position{Key: key, Offset: p.published}
	p.committed, p.acked, p.meta = at, at, meta
	if !revoking {
		p.published, p.next, p.gone = to, to, 0
		p.pub.Store(to)
		s.dropBuffered(map[string]bool{key: true})
	}
	s.progress[key] = &keyProgress{epoch: p.epoch, groups: groups}
	s.refreshView()
	s.log.Warn("kafkasource: a backwards seek moved the group's commit back; the partition is read again from it",
		"group", s.opts.Group, "partition", key, "feed group", r.Group, "to", to, "committed", at, "through", through.Offset)
	return through, nil
}

// commitOne commits offset at of one partition with metadata meta
// (CommitOffsetsSync, bounded by CommitTimeout): an error wraps ErrCommit.
func (s *Source) commitOne(cl *kgo.Client, topic string, partition int32, at int64, meta string) error {
	if cl == nil {
		return fmt.Errorf("%w: no client", ErrCommit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	if meta != "" {
		ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
			for i := range req.Topics {
				for j := range req.Topics[i].Partitions {
					req.Topics[i].Partitions[j].Metadata = kmsg.StringPtr(meta)
				}
			}
			return nil
		})
	}
	var failed error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {partition: {Epoch: -1, Offset: at}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				failed = err
				return
			}
			for _, t := range resp.Topics {
				for _, rp := range t.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						failed = errors.Join(failed, fmt.Errorf("%s: %w", partitionKey(t.Topic, rp.Partition), err))
					}
				}
			}
		})
	if failed != nil {
		s.commitFailures.Add(1)
		return fmt.Errorf("%w: the move back of %s to %d: %w", ErrCommit, partitionKey(topic, partition), at, failed)
	}
	return nil
}
