package kafkasource

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
)

// brokerHook notes in Source.brokerErr whether the client's last request
// to a broker failed (the connection refused, closed or timed out: the
// broker went away) or succeeded, so that the feed is BEHIND with the
// reason while no broker answers. franz-go retries such failures itself:
// the fetches go on once the broker is back.
type brokerHook struct{ s *Source }

var (
	_ kgo.HookBrokerE2E        = brokerHook{}
	_ kgo.HookBrokerConnect    = brokerHook{}
	_ kgo.HookGroupManageError = brokerHook{}
)

// OnGroupManageError notes an error that broke the client out of the group
// (it joins again after a backoff): while no partition is assigned, the
// feed's detail says why.
func (h brokerHook) OnGroupManageError(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
		return
	}
	e := err.Error()
	h.s.groupErr.Store(&e)
}

// OnBrokerConnect notes a failed connection.
func (h brokerHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.failed(meta, err)
	}
}

// OnBrokerE2E notes a request's outcome: a failure, or a success that
// clears the last failure.
func (h brokerHook) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	if err := e2e.Err(); err != nil {
		h.failed(meta, err)
		return
	}
	h.s.brokerErr.Store(nil)
}

func (h brokerHook) failed(meta kgo.BrokerMetadata, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
		return // the caller gave up or the client is closing: not the broker
	}
	e := fmt.Sprintf("broker %s: %v", net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), err)
	h.s.brokerErr.Store(&e)
}

// assigned starts owning partitions: the acknowledgements of the items
// published before (up to the feed's sequence number now) are of earlier
// ownerships, fenced.
func (s *Source) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	_, gen := cl.GroupMetadata()
	s.groupErr.Store(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen = int64(gen)
	var fence int64
	if s.in != nil {
		fence = s.in.Seq()
	}
	for topic, ps := range assigned {
		for _, partition := range ps {
			key := partitionKey(topic, partition)
			p := s.parts[key]
			if p == nil {
				p = &part{topic: topic, partition: partition, key: key, committed: -1}
				s.parts[key] = p
			}
			p.owned, p.fence, p.id, p.epoch, p.stale = true, fence, s.ids[topic], TopicEpoch(s.ids[topic]), false
			p.published, p.acked, p.committed, p.hwm, p.next, p.gone, p.paused = 0, 0, -1, -1, -1, 0, false
			p.pub.Store(0)
			p.meta = ""
		}
	}
	s.refreshView()
}

// commitTagPrefix begins the metadata of every offset the source commits,
// followed by the topic ID in hex (commitTag), then, when groups of the
// feed are ahead of the commit, groupsTag and their progress.
const commitTagPrefix = "blackbox topic-id="

// groupsTag separates a commit's topic ID from the progress of the feed's
// groups ahead of it: comma-separated name=offset pairs, the names
// query-escaped (url.QueryEscape), the offsets the next record to read
// (each group completed the records before it).
const groupsTag = " groups="

// maxMeta bounds a commit's metadata: Kafka's offset.metadata.max.bytes
// defaults to 4096; a group whose progress would pass it keeps none.
const maxMeta = 4000

// commitTag is the metadata of an offset committed of the incarnation of
// a topic whose ID is id.
func commitTag(id topicID) string { return commitTagPrefix + hex.EncodeToString(id[:]) }

// commitMeta is commitTag followed by the progress of groups (by name),
// in name order, as far as maxMeta allows; left are the groups it could
// not hold.
func commitMeta(id topicID, groups map[string]int64) (meta string, left []string) {
	meta = commitTag(id)
	if len(groups) == 0 {
		return meta, nil
	}
	var b strings.Builder
	b.WriteString(meta)
	b.WriteString(groupsTag)
	n := 0
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		pair := url.QueryEscape(g) + "=" + strconv.FormatInt(groups[g], 10)
		if b.Len()+len(pair)+1 > maxMeta {
			left = append(left, g)
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pair)
		n++
	}
	if n == 0 {
		return meta, left
	}
	return b.String(), left
}

// taggedID is the topic ID a commit's metadata names, if it is a
// commitTag (with or without groups' progress after it).
func taggedID(meta *string) (topicID, bool) {
	id, _, ok := parseMeta(meta)
	return id, ok
}

// parseMeta reads a commit's metadata: the topic ID it names, and the
// progress of the groups it holds (nil when none, or when a pair cannot
// be read: a group's progress is taken whole or not at all).
func parseMeta(meta *string) (topicID, map[string]int64, bool) {
	if meta == nil {
		return topicID{}, nil, false
	}
	h, ok := strings.CutPrefix(*meta, commitTagPrefix)
	h, rest, _ := strings.Cut(h, groupsTag)
	var id topicID
	if !ok || hex.DecodedLen(len(h)) != len(id) {
		return topicID{}, nil, false
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil || !id.known() {
		return topicID{}, nil, false
	}
	if rest == "" {
		return id, nil, true
	}
	groups := map[string]int64{}
	for pair := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		off, perr := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || perr != nil || name == "" || off <= 0 {
			return id, nil, true
		}
		groups[name] = off
	}
	return id, groups, true
}

// offsetsFetched (kgo.OnOffsetsFetched) reads the group's commits of the
// partitions just assigned: a commit whose metadata names another topic ID
// than the topic's now (commitTag; read with a metadata request) is of an
// earlier incarnation of the topic, landed on this one by a broker before
// Kafka 4.2, and is no position of its log: adjustOffsets starts the
// partition at its log start instead, as for a group that never committed.
// A commit without the source's metadata (another client's, an older
// version's) is taken as it is.
func (s *Source) offsetsFetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	var tagged []staleCommit
	note := func(topic string, partition int32, offset int64, meta *string) {
		if id, groups, ok := parseMeta(meta); ok && topic != "" {
			tagged = append(tagged, staleCommit{topic, partition, id, offset, groups})
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.Offset >= 0 {
					note(t.Topic, p.Partition, p.Offset, p.Metadata)
				}
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Offset >= 0 {
				note(t.Topic, p.Partition, p.Offset, p.Metadata)
			}
		}
	}
	if len(tagged) == 0 {
		return nil
	}
	var topics []string
	for _, c := range tagged {
		if !slices.Contains(topics, c.topic) {
			topics = append(topics, c.topic)
		}
	}
	ids, err := topicIDs(ctx, cl, topics)
	if err != nil {
		s.log.Warn("kafkasource: the topics' IDs could not be read: the group's commits are taken as they are",
			"group", s.opts.Group, "err", err)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = s.stale[:0]
	for _, c := range tagged {
		now := ids[c.topic]
		switch {
		case now.known() && now != c.id:
			s.stale = append(s.stale, c)
		case now == c.id && len(c.groups) > 0:
			s.keptProgress(c)
		}
	}
	return nil
}

// keptProgress takes the progress of the feed's groups a commit of this
// incarnation of its topic holds (s.mu held): the feed is told
// (Intake.SkipCompleted), and it is carried on by the partition's next
// commits.
func (s *Source) keptProgress(c staleCommit) {
	key, epoch := partitionKey(c.topic, c.partition), TopicEpoch(c.id)
	kp := &keyProgress{epoch: epoch, groups: map[string]int64{}}
	for g, off := range c.groups {
		if off <= c.offset {
			continue // not ahead of the commit
		}
		kp.groups[g] = off
		if s.in != nil {
			s.in.SkipCompleted(g, epoch, core.Position{Key: key, Offset: off})
		}
	}
	s.progress[key] = kp
	s.refreshView()
}

// keyProgress is each group's progress in a partition, of one incarnation
// of its topic (epoch): the next record to read, each group having
// completed the records before it.
type keyProgress struct {
	epoch  int64
	groups map[string]int64
}

// staleCommit is a commit of a partition naming the incarnation of its
// topic it was made for, its offset, and the progress of the groups its
// metadata holds.
type staleCommit struct {
	topic     string
	partition int32
	id        topicID
	offset    int64
	groups    map[string]int64
}

// adjustOffsets (kgo.AdjustFetchOffsetsFn) starts each partition whose
// commit offsetsFetched found of another incarnation of its topic at its
// log start, and marks it stale (its commit is none).
func (s *Source) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.stale {
		if _, ok := offsets[c.topic][c.partition]; !ok {
			continue
		}
		offsets[c.topic][c.partition] = kgo.NewOffset().AtStart()
		key := partitionKey(c.topic, c.partition)
		if p := s.parts[key]; p != nil {
			p.stale = true
		}
		s.log.Warn("kafkasource: the group's commit is of a deleted topic of the same name (its metadata names another topic ID); reading the partition from its log start",
			"group", s.opts.Group, "partition", key, "commit of topic ID", hex.EncodeToString(c.id[:]))
	}
	s.stale = s.stale[:0]
	return offsets, nil
}

// topicIDs reads the IDs of topics with a metadata request (unknown for a
// topic that does not exist, or a cluster without topic IDs).
func topicIDs(ctx context.Context, cl *kgo.Client, topics []string) (map[string]topicID, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ids := map[string]topicID{}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && rt.ErrorCode == 0 {
			ids[*rt.Topic] = rt.TopicID
		}
	}
	return ids, nil
}

// revoked hands the revoked partitions' polled records that are not
// published yet back at once (they are dropped and no more are published:
// the new owner reads them from the commit), then waits, bounded by
// RevokeTimeout, for their published records to be processed, commits
// their processed prefix and stops owning them: their records still
// queued are fenced (a later acknowledgement is not committed). The wait
// is for what the queues held when the revocation began, never for a
// poll's worth of records still to be published.
func (s *Source) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	s.handBack(revoked)
	if s.running.Load() {
		deadline := time.Now().Add(s.opts.RevokeTimeout)
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		for !s.processed(revoked) && time.Now().Before(deadline) {
			s.poll()
			timer.Reset(time.Millisecond)
			<-timer.C
		}
	}
	s.poll()
	s.disown(revoked)
}

// handBack marks partitions being revoked and drops their buffered
// records, not published.
func (s *Source) handBack(tps map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	back := map[string]bool{}
	for topic, ps := range tps {
		for _, partition := range ps {
			if p := s.parts[partitionKey(topic, partition)]; p != nil && p.owned {
				p.revoking = true
				back[p.key] = true
			}
		}
	}
	s.refreshView()
	s.dropBuffered(back)
}

// dropBuffered drops the buffered records of the partitions keyed in
// drop (s.mu held).
func (s *Source) dropBuffered(drop map[string]bool) {
	if len(drop) == 0 {
		return
	}
	clear(s.buf[:s.head])
	s.buf = slices.DeleteFunc(s.buf[s.head:], func(b polled) bool { return drop[partitionKey(b.r.Topic, b.r.Partition)] })
	s.head = 0
}

// lost stops owning partitions without committing: the session is gone,
// another member may own them already.
func (s *Source) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.disown(lost)
}

// processed reports whether every record published of tps is acknowledged.
func (s *Source) processed(tps map[string][]int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, ps := range tps {
		for _, partition := range ps {
			if p := s.parts[partitionKey(topic, partition)]; p != nil && p.owned && p.acked < p.published {
				return false
			}
		}
	}
	return true
}

func (s *Source) disown(tps map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone := map[string]bool{}
	resume := map[string][]int32{}
	for topic, ps := range tps {
		for _, partition := range ps {
			key := partitionKey(topic, partition)
			if p := s.parts[key]; p != nil {
				if p.paused {
					resume[topic] = append(resume[topic], partition)
				}
				p.owned, p.paused, p.revoking = false, false, false
				gone[key] = true
			}
		}
	}
	if len(resume) > 0 && s.cl != nil {
		// Not paused if it is assigned again.
		s.cl.ResumeFetchPartitions(resume)
	}
	s.refreshView()
	s.dropBuffered(gone)
}
