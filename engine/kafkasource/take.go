package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// take appends the polled records to the buffer (but control records,
// which only move the partition's next offset), notes the high watermarks
// and fetch errors, and reports as lost (LossRetention) the records a
// partition's log start offset moved past before they were read.
func (s *Source) take(fetches kgo.Fetches) {
	var errs []error
	fetches.EachError(func(topic string, partition int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		errs = append(errs, fmt.Errorf("%s: %w", partitionKey(topic, partition), err))
	})
	var losses []engine.Loss
	s.mu.Lock()
	in := s.in
	s.fetchErr = ""
	if len(errs) > 0 {
		s.fetchErr = "fetch: " + errors.Join(errs...).Error()
	}
	var committed map[string]map[int32]kgo.EpochOffset
	for _, f := range fetches {
		for i := range f.Topics {
			ft := &f.Topics[i]
			// The incarnation the records are read from: the fetch names
			// it (Kafka 3.1+); the client consumes one until it is
			// purged.
			id := topicID(ft.TopicID)
			if !id.known() {
				id = s.ids[ft.Topic]
			}
			for j := range ft.Partitions {
				losses = s.takePartition(kgo.FetchTopicPartition{Topic: ft.Topic, FetchPartition: ft.Partitions[j]}, id, &committed, losses)
			}
		}
	}
	s.mu.Unlock()
	for _, l := range losses {
		s.warnLoss(l)
		in.AddLoss(l)
	}
}

// takePartition takes one partition's fetch, read from the incarnation of
// its topic whose ID is id: the records to the buffer, the high watermark,
// and the loss of records deleted before they were read (added to losses);
// committed caches the client's committed offsets. s.mu held.
func (s *Source) takePartition(fp kgo.FetchTopicPartition, id topicID, committed *map[string]map[int32]kgo.EpochOffset, losses []engine.Loss) []engine.Loss {
	p := s.parts[partitionKey(fp.Topic, fp.Partition)]
	if p == nil || !p.owned || p.revoking {
		return losses
	}
	epoch := TopicEpoch(id)
	if p.id != id {
		p.id, p.epoch = id, epoch
		defer s.refreshView()
	}
	if id.known() {
		s.ids[p.topic] = id // what the client consumes, named by its fetches
	}
	if p.committed < 0 || p.next < 0 {
		// The offset the group had committed when it was assigned
		// (what this fetch started from), for the status and as
		// the first offset the fetches should return.
		if *committed == nil {
			*committed = s.cl.CommittedOffsets()
		}
		at, ok := p.groupCommit(*committed)
		if ok && p.committed < 0 {
			p.committed = at
		}
		if p.next < 0 {
			p.next = 0 // no commit: the group reads from offset 0, or what is left of it
			if ok && at > 0 {
				p.next = at
			}
		}
	}
	if !p.stale && p.published == 0 && len(fp.Records) > 0 && fp.Records[0].Offset < p.next {
		// The client resumed below the group's commit: the commit was
		// past the log's end and the client reset to the log start.
		losses = append(losses, s.truncated(p, p.next, fp.HighWatermark))
	}
	if l, ok := s.deleted(p, fp); ok {
		losses = append(losses, l)
	}
	if fp.HighWatermark > p.hwm {
		p.hwm = fp.HighWatermark
	}
	if len(fp.Records) > 0 {
		p.gone = 0 // the fetches move on: take sees the log start itself
	}
	for _, r := range fp.Records {
		p.next = max(p.next, r.Offset+1)
		if !r.Attrs.IsControl() {
			s.buf = append(s.buf, polled{r, epoch})
		}
	}
	return losses
}

// truncated is the loss of p's records past the group's commit at, found
// past the partition's log end (end: its high watermark): the broker lost
// them (or the commit, naming no topic ID, is of an earlier topic of the
// same name; a commit naming another topic ID is stale before any
// fetch). How many records were lost is unknown: those the log held past
// the commit before the loss, which the group never read. The partition
// is read from its log start as by a group that never committed (the
// records below the commit the log holds again are read again), and the
// commits go on from what is processed. s.mu held.
func (s *Source) truncated(p *part, at, end int64) engine.Loss {
	if id := s.ids[p.topic]; !p.id.known() && id.known() {
		// Assigned before the topic's ID was known, and nothing fetched
		// since: the loss is in the position space the ID now names.
		p.id, p.epoch = id, TopicEpoch(id)
		s.refreshView()
	}
	p.stale, p.committed, p.next = true, -1, 0
	p.truncated++
	return engine.Loss{Reason: LossTruncated, Epoch: p.epoch, Key: p.key, From: at,
		Detail: fmt.Sprintf("kafka %s: group %s's commit %d is past the partition's log end %d (records the broker lost, or a commit of an earlier topic of the same name): the records past the commit the group never read are lost, how many is unknown",
			p.key, s.opts.Group, at, end)}
}

// warnLoss warns of a loss the source counted.
func (s *Source) warnLoss(l engine.Loss) {
	switch l.Reason {
	case LossTruncated:
		s.log.Warn("kafkasource: the group's commit is past the partition's log end (records the broker lost, or a commit of an earlier topic of the same name); the records past the commit are counted lost, how many is unknown; reading the partition from its log start",
			"group", s.opts.Group, "partition", l.Key, "committed", l.From, "detail", l.Detail)
	default:
		s.log.Warn("kafkasource: records deleted before they were read (retention); counted lost",
			"group", s.opts.Group, "partition", l.Key, "from", l.From, "to", l.To, "records", l.Items)
	}
}

// deleted is the loss of p's records that fp shows deleted before they
// were read: from the next offset expected up to the fetch's log start
// offset (the client resumes there when its offset fell below it), or up
// to its first record when that is lower (read before the deletion). It
// moves p past them. s.mu held.
func (s *Source) deleted(p *part, fp kgo.FetchTopicPartition) (engine.Loss, bool) {
	to := fp.LogStartOffset
	if len(fp.Records) > 0 {
		to = min(to, fp.Records[0].Offset)
	}
	if p.next < 0 || to <= p.next {
		return engine.Loss{}, false
	}
	l := engine.Loss{Reason: LossRetention, Items: to - p.next, Epoch: p.epoch, Key: p.key, From: p.next, To: to,
		Detail: fmt.Sprintf("kafka %s: offsets %d-%d deleted (log start %d) before group %s read them",
			p.key, p.next, to-1, fp.LogStartOffset, s.opts.Group)}
	p.lost += l.Items
	p.next, p.gone = to, 0
	return l, true
}

// checkStarts reads, at most once a second while an owned partition that
// is not paused has records left to read, the start offsets of their
// topics: a partition whose every record left was deleted returns none in
// a fetch, so take never sees its log start. A log start found past the
// partition's next offset is noted; found so again a second later, with
// no fetch having moved the partition on meanwhile (a fetch answered
// before the deletion would have), the records up to the log start first
// noted are counted lost, as take counts them.
func (s *Source) checkStarts(ctx context.Context, cl *kgo.Client) {
	s.mu.Lock()
	var topics []string
	if time.Since(s.started) >= time.Second {
		for _, p := range s.parts {
			if p.owned && !p.paused && p.hwm > max(p.next, p.published, p.committed, 0) && !slices.Contains(topics, p.topic) {
				topics = append(topics, p.topic)
			}
		}
	}
	if len(topics) > 0 {
		s.started = time.Now()
	}
	in := s.in
	s.mu.Unlock()
	if len(topics) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CommitTimeout)
	defer cancel()
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topics...)
	if err != nil {
		return // read again in a second
	}
	ids := s.learnIDs(ctx, cl, topics)
	committed := cl.CommittedOffsets()
	var losses []engine.Loss
	s.mu.Lock()
	s.noteIDs(ids)
	starts.Each(func(o kadm.ListedOffset) {
		p := s.parts[partitionKey(o.Topic, o.Partition)]
		if o.Err != nil || p == nil || !p.owned {
			return
		}
		if p.next < 0 { // not fetched yet: from the group's commit
			p.next = 0
			if at, ok := p.groupCommit(committed); ok && at > 0 {
				p.next = at
			}
		}
		switch {
		case o.Offset <= p.next:
			p.gone = 0
		case p.gone == 0:
			p.gone = o.Offset // noted: counted if still so at the next read
		default:
			n := p.gone - p.next
			losses = append(losses, engine.Loss{Reason: LossRetention, Items: n, Epoch: p.epoch, Key: p.key, From: p.next, To: p.gone,
				Detail: fmt.Sprintf("kafka %s: offsets %d-%d deleted (log start %d) before group %s read them",
					p.key, p.next, p.gone-1, o.Offset, s.opts.Group)})
			p.lost += n
			p.next, p.gone = p.gone, 0
			if o.Offset > p.next {
				p.gone = o.Offset
			}
		}
	})
	s.mu.Unlock()
	for _, l := range losses {
		s.warnLoss(l)
		in.AddLoss(l)
	}
}

// publish offers the buffered records in order, each under the epoch of
// its topic's incarnation (the feed's epoch is set before a batch whose
// epoch differs from the last). It reports how many the feed took and
// whether it took them all (those it refused stay buffered).
func (s *Source) publish() (took int, all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.head < len(s.buf) {
		end, epoch := min(len(s.buf), s.head+256), s.buf[s.head].epoch
		for i := s.head + 1; i < end; i++ {
			if s.buf[i].epoch != epoch {
				end = i
				break
			}
		}
		if epoch != s.epoch {
			s.in.SetEpoch(epoch)
			s.epoch = epoch
		}
		batch := s.buf[s.head:end]
		n := len(batch)
		items, poss := s.items[:0], s.poss[:0]
		// One allocation for the batch's records: a record a processor
		// keeps keeps its batch. Its key, value and headers are the
		// client's (headers: see recordHeaders).
		recs := make([]Record, n)
		var p *part
		for i, b := range batch {
			r := b.r
			if p == nil || p.partition != r.Partition || p.topic != r.Topic {
				p = s.parts[partitionKey(r.Topic, r.Partition)]
			}
			rec := &recs[i]
			*rec = Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
				Headers: recordHeaders(r.Headers)}
			var item any = rec
			if s.opts.Item != nil {
				item = s.opts.Item(rec)
			}
			items = append(items, item)
			poss = append(poss, core.Position{Key: p.key, Offset: r.Offset + 1})
		}
		k := s.in.TryPublishBatch(items, poss)
		p = nil
		for i := range k {
			if p == nil || p.key != poss[i].Key {
				if p != nil {
					p.pub.Store(p.published)
				}
				p = s.parts[poss[i].Key]
			}
			p.published = poss[i].Offset
		}
		if p != nil {
			p.pub.Store(p.published)
		}
		clear(items)
		s.items, s.poss = items, poss
		s.head += k
		took += k
		if k < n {
			return took, false
		}
	}
	// Every buffered record is published: the buffer is reused.
	clear(s.buf)
	s.buf, s.head = s.buf[:0], 0
	return took, true
}

// seedEnds reads the end offsets of owned partitions whose high watermark
// is not known yet, and takes the group's committed offsets of those it
// has not read from (a partition without new records returns none in a
// fetch), at most once a second, so that such a partition counts as
// caught up. A group's commit found past such a partition's end is a loss
// (truncated), as take counts it for a partition whose fetch returns
// records below the commit.
func (s *Source) seedEnds(ctx context.Context, cl *kgo.Client) {
	s.mu.Lock()
	var topics []string
	if time.Since(s.seeded) >= time.Second {
		for _, p := range s.parts {
			if p.owned && (p.hwm < 0 || p.committed < 0 && p.published == 0) && !slices.Contains(topics, p.topic) {
				topics = append(topics, p.topic)
			}
		}
	}
	if len(topics) > 0 {
		s.seeded = time.Now()
	}
	s.mu.Unlock()
	if len(topics) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CommitTimeout)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		return // known at the next fetch or the next try
	}
	ids := s.learnIDs(ctx, cl, topics)
	committed := cl.CommittedOffsets()
	var losses []engine.Loss
	s.mu.Lock()
	in := s.in
	s.noteIDs(ids)
	for _, p := range s.parts {
		if at, ok := p.groupCommit(committed); ok && p.owned && p.committed < 0 {
			p.committed = at
		}
	}
	ends.Each(func(o kadm.ListedOffset) {
		p := s.parts[partitionKey(o.Topic, o.Partition)]
		if o.Err != nil || p == nil || !p.owned {
			return
		}
		// A commit past the end, with nothing fetched since the
		// assignment (a partition with no record left returns none in a
		// fetch, so take never sees it): the log ends below the commit.
		if at, ok := p.groupCommit(committed); ok && p.published == 0 && at > o.Offset && (p.next < 0 || p.next == at) {
			losses = append(losses, s.truncated(p, at, o.Offset))
		}
		if p.hwm < 0 {
			p.hwm = o.Offset
		}
	})
	s.mu.Unlock()
	for _, l := range losses {
		s.warnLoss(l)
		in.AddLoss(l)
	}
}

// The conversion of a kgo.RecordHeader to a Header compiles only while
// their fields are the same (names, types and order: tags aside), and then
// so is their memory layout: what recordHeaders relies on.
var _ = Header(kgo.RecordHeader{})

// recordHeaders is hs as Headers, without a copy: the client's headers, as
// the record's key and value are the client's bytes (the client never
// writes them once it returned them). Its capacity is its length, so that
// an append to it never writes into the client's array.
func recordHeaders(hs []kgo.RecordHeader) []Header {
	if len(hs) == 0 {
		return nil
	}
	return unsafe.Slice((*Header)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}

// learnIDs reads the IDs of those of topics whose incarnation the source
// does not know yet (a metadata request; nil when it knows them all or the
// request fails), for noteIDs: a loss seen before any fetch named the
// topic's ID, or before checkPartitions read it (the partition assigned
// before the first duty cycle read the topics), is of the incarnation the
// group is assigned, never of epoch 0.
func (s *Source) learnIDs(ctx context.Context, cl *kgo.Client, topics []string) map[string]topicID {
	s.mu.Lock()
	var unknown []string
	for _, t := range topics {
		if !s.ids[t].known() {
			unknown = append(unknown, t)
		}
	}
	s.mu.Unlock()
	if len(unknown) == 0 {
		return nil
	}
	ids, err := topicIDs(ctx, cl, unknown)
	if err != nil {
		return nil // a cluster without topic IDs gives none either
	}
	return ids
}

// noteIDs takes the topic IDs learnIDs read where the source knows none
// yet (as readTopics does, before a fetch names them), and gives them to
// the owned partitions assigned before they were known that have
// published nothing (their records' epoch). s.mu held.
func (s *Source) noteIDs(ids map[string]topicID) {
	for t, id := range ids {
		if id.known() && !s.ids[t].known() {
			s.ids[t] = id
		}
	}
	for _, p := range s.parts {
		if id := s.ids[p.topic]; p.owned && p.published == 0 && !p.id.known() && id.known() {
			p.id, p.epoch = id, TopicEpoch(id)
			s.refreshView()
		}
	}
}
