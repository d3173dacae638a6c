package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/engine"
)

// checkPartitions reads the partitions of the source's topics, at most
// once a second: a partition this member does not own, and that the
// group's assignment (DescribeGroups) gives no member, is read by no one
// (added to the topic since the last rebalance): the feed is BEHIND,
// naming it, and the client's metadata is refreshed at once so that the
// group's leader rebalances to assign it (the client alone would notice
// it at its next metadata refresh, minutes later). A topic whose
// incarnation the client consumes is gone (deleted, or deleted and
// created again: another topic ID) is retired (retire): the records of
// its partitions this member owned and had not read yet (up to the high
// watermark last seen) are counted lost (LossDeleted), and the client
// consumes the topic again from whatever incarnation exists next.
func (s *Source) checkPartitions(ctx context.Context, cl *kgo.Client) {
	s.mu.Lock()
	due := time.Since(s.listed) >= time.Second
	if due {
		s.listed = time.Now()
	}
	s.mu.Unlock()
	if due {
		s.listPartitions(ctx, cl, false)
	}
}

// stopCheck is the last checkPartitions, when Run ends: a partition added
// since the last check must not leave a stopped run settled, and the
// records of a topic deleted since are lost. When the partitions cannot
// be read, the feed is BEHIND (not known).
func (s *Source) stopCheck(cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	if err := s.listPartitions(ctx, cl, true); err != nil {
		s.mu.Lock()
		s.unconsumed = fmt.Sprintf("the partitions of %s not known at the stop: %v", strings.Join(s.opts.Topics, ", "), err)
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unconsumed != "" {
		s.setStateLocked(engine.StateBehind, s.unconsumed)
	}
}

// listPartitions is checkPartitions' read; it returns why the partitions
// could not be read (then nothing changes). At the stop, a retired topic
// is not consumed again.
func (s *Source) listPartitions(ctx context.Context, cl *kgo.Client, stopping bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CommitTimeout)
	defer cancel()
	ls, err := s.readTopics(ctx, cl)
	if err != nil {
		return err
	}
	for _, l := range ls.losses {
		s.log.Warn("kafkasource: topic deleted with records not read; counted lost",
			"group", s.opts.Group, "partition", l.Key, "from", l.From, "to", l.To, "records", l.Items)
		ls.in.AddLoss(l)
	}
	if len(ls.retired) > 0 && !stopping {
		// The client never consumes another incarnation of a topic it
		// consumed (its fetches fail, its commits are refused) until
		// the topic is purged from it and added again: the group then
		// assigns the partitions of what exists under the name next.
		cl.PurgeTopicsFromConsuming(ls.retired...)
		cl.AddConsumeTopics(ls.retired...)
	}
	adm := kadm.NewClient(cl)
	unassigned, theirs, err := s.assignment(ctx, adm, ls.unowned)
	if err != nil {
		return err
	}
	var others []string
	if s.opts.Drain && len(theirs) > 0 {
		if others, err = s.othersToRead(ctx, adm, theirs); err != nil {
			return err
		}
	}
	var why []string
	for _, t := range ls.missing {
		why = append(why, "topic "+t+" does not exist")
	}
	if len(unassigned) > 0 {
		why = append(why, fmt.Sprintf("partition %s not assigned to any member of group %s", strings.Join(unassigned, ", "), s.opts.Group))
		cl.ForceMetadataRefresh() // the group's leader rebalances once it sees the partition
	}
	if len(others) > 0 {
		why = append(why, "records not yet committed by the member of group "+s.opts.Group+" that owns "+strings.Join(others, ", "))
	}
	s.mu.Lock()
	s.unconsumed, s.gone = strings.Join(why, "; "), ls.deleted
	s.mu.Unlock()
	return nil
}

// topicListing is what readTopics found of the source's topics.
type topicListing struct {
	missing []string         // topics that do not exist, never seen by this source
	deleted []string         // topics that existed and no longer do
	retired []string         // topics whose incarnation the client consumed is gone
	unowned []topicPartition // partitions not owned here
	losses  []engine.Loss    // the records of the retired topics not read
	in      *engine.Intake   // the feed to report the losses to
}

// readTopics reads the source's topics (a metadata request of its own:
// the client's cached metadata, which kadm's listings use, may be seconds
// old) and, under the lock, notes the topics seen and their IDs and
// retires (retire) those whose incarnation the client consumed is gone.
func (s *Source) readTopics(ctx context.Context, cl *kgo.Client) (topicListing, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range s.opts.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return topicListing{}, err
	}
	var ls topicListing
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rt := range resp.Topics {
		t := ""
		if rt.Topic != nil {
			t = *rt.Topic
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			if !errors.Is(err, kerr.UnknownTopicOrPartition) {
				return topicListing{}, fmt.Errorf("topic %s: %w", t, err)
			}
			if !s.seen[t] {
				ls.missing = append(ls.missing, t)
				continue
			}
			ls.deleted = append(ls.deleted, t)
			if s.holds(t) {
				ls.retired = append(ls.retired, t)
				ls.losses = s.retire(t, "deleted", ls.losses)
			}
			continue
		}
		s.seen[t] = true
		switch id, held := topicID(rt.TopicID), s.ids[t]; {
		case !id.known():
		case !held.known():
			s.ids[t] = id // before a fetch names it
		case held != id:
			ls.retired = append(ls.retired, t)
			ls.losses = s.retire(t, "deleted and created again", ls.losses)
			s.ids[t] = id
		}
		for _, rp := range rt.Partitions {
			if p := s.parts[partitionKey(t, rp.Partition)]; p == nil || !p.owned {
				ls.unowned = append(ls.unowned, topicPartition{t, rp.Partition})
			}
		}
	}
	ls.in = s.in
	return ls, nil
}

// assignment splits the partitions not owned here (unowned) by the
// group's assignment (DescribeGroups): those no member is assigned, by
// name and sorted, and those another member owns.
func (s *Source) assignment(ctx context.Context, adm *kadm.Client, unowned []topicPartition) (unassigned []string, theirs []topicPartition, err error) {
	if len(unowned) == 0 {
		return nil, nil, nil
	}
	groups, err := adm.DescribeGroups(ctx, s.opts.Group)
	if err == nil {
		err = groups.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("group %s: %w", s.opts.Group, err)
	}
	assigned := groups.AssignedPartitions()
	for _, tp := range unowned {
		if !assigned.Lookup(tp.topic, tp.partition) {
			unassigned = append(unassigned, partitionKey(tp.topic, tp.partition))
		} else {
			theirs = append(theirs, tp)
		}
	}
	slices.Sort(unassigned)
	return unassigned, theirs, nil
}

// othersToRead names the partitions of tps (owned by other members of the
// group) whose records are not all committed: the group's commit (or the
// log start, past a commit or without one) below the end offset, each
// with the count ("t/3: 12 records").
func (s *Source) othersToRead(ctx context.Context, adm *kadm.Client, tps []topicPartition) ([]string, error) {
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.topic) {
			topics = append(topics, tp.topic)
		}
	}
	commits, err := adm.FetchOffsets(ctx, s.opts.Group)
	if err == nil {
		err = commits.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("the commits of group %s: %w", s.opts.Group, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("the start offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("the end offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	var left []string
	for _, tp := range tps {
		end, ok := ends.Lookup(tp.topic, tp.partition)
		if !ok {
			continue
		}
		from := int64(0)
		if start, ok := starts.Lookup(tp.topic, tp.partition); ok {
			from = start.Offset
		}
		if c, ok := commits.Lookup(tp.topic, tp.partition); ok && c.Err == nil {
			from = max(from, c.At)
		}
		if n := end.Offset - from; n > 0 {
			left = append(left, fmt.Sprintf("%s: %d records", partitionKey(tp.topic, tp.partition), n))
		}
	}
	slices.Sort(left)
	return left, nil
}

// holds reports whether the source consumes an incarnation of topic t: it
// knows its ID or owns one of its partitions (s.mu held).
func (s *Source) holds(t string) bool {
	if s.ids[t].known() {
		return true
	}
	for _, p := range s.parts {
		if p.owned && p.topic == t {
			return true
		}
	}
	return false
}

// retire stops consuming the incarnation of topic t the client consumed,
// gone (why: deleted, or deleted and created again): the records of its
// owned partitions not read yet, up to the high watermark last seen, are
// appended to losses (LossDeleted), and the partitions are no longer
// owned, their buffered records dropped (counted lost with the rest):
// the acknowledgements of their records still queued are fenced (their
// offsets name records of a log that no longer exists). s.mu held.
func (s *Source) retire(t, why string, losses []engine.Loss) []engine.Loss {
	drop := map[string]bool{}
	for _, p := range s.parts {
		if !p.owned || p.topic != t {
			continue
		}
		from := s.unread(p)
		if p.hwm > from {
			losses = append(losses, engine.Loss{Reason: LossDeleted, Items: p.hwm - from, Epoch: p.epoch, Key: p.key, From: from, To: p.hwm,
				Detail: fmt.Sprintf("kafka %s: offsets %d-%d not read when topic %s was %s", p.key, from, p.hwm-1, p.topic, why)})
			p.lost += p.hwm - from
			p.next = p.hwm
		}
		p.owned, p.paused, p.revoking = false, false, false
		drop[p.key] = true
	}
	s.dropBuffered(drop)
	delete(s.ids, t)
	s.refreshView()
	return losses
}

// unread is the first offset of p not published: its first buffered
// record's, or the next to fetch (s.mu held).
func (s *Source) unread(p *part) int64 {
	for _, b := range s.buf[s.head:] {
		if b.r.Partition == p.partition && b.r.Topic == p.topic {
			return b.r.Offset
		}
	}
	return max(p.next, p.published, p.committed, 0)
}

// topicPartition names a partition.
type topicPartition struct {
	topic     string
	partition int32
}

// pause pauses the fetches of every owned partition (the feed refused a
// record: PAUSE).
func (s *Source) pause(cl *kgo.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		return
	}
	s.paused = true
	tps := map[string][]int32{}
	for _, p := range s.parts {
		if p.owned {
			p.paused = true
			tps[p.topic] = append(tps[p.topic], p.partition)
		}
	}
	if len(tps) > 0 {
		cl.PauseFetchPartitions(tps)
	}
	s.setStateLocked(engine.StateBehind, "paused: a subscriber's queue is full")
}

// resume resumes the paused fetches once the buffer is published.
func (s *Source) resume(cl *kgo.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused {
		return
	}
	s.paused = false
	tps := map[string][]int32{}
	for _, p := range s.parts {
		if p.paused {
			p.paused = false
			tps[p.topic] = append(tps[p.topic], p.partition)
		}
	}
	if len(tps) > 0 {
		cl.ResumeFetchPartitions(tps)
	}
}

// report sets the feed's state from the lag: CAUGHT_UP once every owned
// partition's records up to its high watermark are published (or were
// deleted before they were read, counted lost) and every partition of the
// topics is owned by a member of the group (checkPartitions). Run calls it
// once the buffer is published.
func (s *Source) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetchErr != "" {
		s.setStateLocked(engine.StateBehind, s.fetchErr)
		return
	}
	if e := s.brokerErr.Load(); e != nil {
		s.setStateLocked(engine.StateBehind, *e)
		return
	}
	if s.unconsumed != "" {
		s.setStateLocked(engine.StateBehind, s.unconsumed)
		return
	}
	var lag int64
	owned := 0
	for _, p := range s.parts {
		if !p.owned {
			continue
		}
		owned++
		if p.hwm < 0 {
			s.setStateLocked(engine.StateBehind, "partition "+p.key+": high watermark not known yet")
			return
		}
		// The buffer is published (report runs then): every record
		// fetched, up to next, is published or a control record, or was
		// deleted before it was read (counted lost).
		lag += max(0, p.hwm-max(p.published, p.committed, p.next))
	}
	switch {
	case owned == 0 && !s.allDeleted():
		detail := "no partition assigned in group " + s.opts.Group
		if e := s.groupErr.Load(); e != nil {
			detail += ": " + *e
		}
		s.setStateLocked(engine.StateBehind, detail)
	case lag > 0:
		s.setStateLocked(engine.StateBehind, fmt.Sprintf("%d records to read", lag))
	default:
		var detail []string
		for _, t := range s.gone {
			detail = append(detail, "topic "+t+" deleted")
		}
		s.setStateLocked(engine.StateCaughtUp, strings.Join(detail, "; "))
	}
}

// allDeleted reports whether every topic of the source was deleted under
// it: nothing is left to read (s.mu held).
func (s *Source) allDeleted() bool {
	for _, t := range s.opts.Topics {
		if !slices.Contains(s.gone, t) {
			return false
		}
	}
	return true
}
