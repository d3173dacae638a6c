package kafkasource

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// Defaults of Options.
const (
	DefaultPollInterval   = 50 * time.Millisecond
	DefaultCommitInterval = 2 * time.Millisecond
	DefaultMaxPollRecords = 8192
	DefaultCommitTimeout  = 10 * time.Second
	DefaultRevokeTimeout  = 2 * time.Second
	DefaultVerifyInterval = time.Second
	DefaultSessionTimeout = 45 * time.Second
	// maxHeartbeat is the longest the source goes between heartbeats
	// (franz-go's default interval).
	maxHeartbeat = 3 * time.Second
)

// The engine.Loss reasons of a Source.
const (
	// LossRetention: records deleted (retention, DeleteRecords) before
	// the group read them.
	LossRetention = "retention"
	// LossDeleted: the records of a partition the source owned, not yet
	// read, when its topic was deleted.
	LossDeleted = "deleted"
	// LossTruncated: the group's commit of a partition is past the
	// partition's log end (the broker lost records: an unclean leader
	// election, a broker that lost its disk; or a commit, naming no topic
	// ID, of an earlier topic of the same name): the records past the
	// commit that the group never read are gone, and how many cannot be
	// known (Items 0, From the commit, To 0).
	LossTruncated = "truncated"
)

// Options configure a Source.
type Options struct {
	// Brokers are the seed brokers (host:port).
	Brokers []string
	// Topics are consumed; Group is the consumer group.
	Topics []string
	Group  string
	// InstanceID, when set, makes the member static (KIP-345): a restarted
	// member with the same id takes its partitions back at once instead of
	// waiting for the old session to expire.
	InstanceID string
	// PollInterval is the longest a duty cycle waits for records before it
	// polls acknowledgements (and commits) again. Default 50ms.
	PollInterval time.Duration
	// CommitInterval is the longest a duty cycle waits for records while
	// records are published and not yet committed (and the last commit
	// succeeded): the processed ones are committed that soon after the
	// fetches run dry. Default 2ms; never longer than PollInterval.
	CommitInterval time.Duration
	// MaxPollRecords bounds the records taken per poll. Default 8192.
	MaxPollRecords int
	// CommitTimeout bounds one offset commit. Default 10s.
	CommitTimeout time.Duration
	// VerifyInterval is how often the group's committed offsets are read
	// back and compared with what the source committed (a commit that
	// timed out may land late and move an offset back: it is committed
	// again). Default 1s.
	VerifyInterval time.Duration
	// RevokeTimeout bounds how long a revocation waits for the revoked
	// partitions' published records to be processed before it commits
	// their processed prefix; the rest is abandoned uncommitted (the new
	// owner reads it again). A member joining the group waits for it:
	// the rebalance completes once every revocation did. Default 2s.
	RevokeTimeout time.Duration
	// SessionTimeout is the member's session (kgo.SessionTimeout): a
	// member that stops heartbeating (killed with SIGKILL, hung) keeps its
	// partitions, unread by the others, until it expires; then the group
	// rebalances them. The source heartbeats every third of it, at most
	// every 3s (kgo.HeartbeatInterval). It must lie within the brokers'
	// group.min.session.timeout.ms and group.max.session.timeout.ms (6s and
	// 30min by default), else the group refuses the member (the feed
	// stays BEHIND, joining). Default 45s (franz-go's and Kafka's since
	// 3.0): a shorter session evicts a member whose heartbeats are late
	// (a pause, a slow network), and its partitions' uncommitted records
	// are delivered again. The group's rebalance timeout follows it (at
	// least twice RevokeTimeout and a second): a member killed in the
	// middle of a rebalance is removed only then (franz-go's default is a
	// fixed 60s).
	SessionTimeout time.Duration
	// Drain makes the feed caught up only once the group has read the
	// whole of its topics: every partition of another member committed
	// to its end too (records deleted before they were read aside). A
	// run that ends once settled (run --kafka without --follow) has then
	// read the topics to their end, whichever member read each part, and
	// waits for a partition held by a member that no longer reads it (one
	// killed, until its session expires and the group gives the
	// partition to a live member). Without it, a member is caught up with
	// the partitions it owns.
	Drain bool
	// Item, when set, builds the item published for a record (for an app
	// that reads lines: the value as a string). Default: the *Record.
	Item func(*Record) any
	// Logger receives warnings (a failed commit). Default slog.Default().
	Logger *slog.Logger
	// ClientOptions are passed to kgo.NewClient after the source's own
	// (TLS, SASL ...; the session is SessionTimeout). They must not enable
	// autocommitting, replace the partition callbacks, drop control
	// records, or move where a group without a commit starts
	// (ConsumeStartOffset, ConsumeResetOffset): the records before it
	// would be counted lost.
	ClientOptions []kgo.Opt
}

// Source is a consumer-group source on franz-go: each assigned partition's
// records are published as *Record at core.Position{Key: "topic/partition",
// Offset: offset+1} (the next record to read: a committed position is the
// Kafka commit), under the epoch of its topic's incarnation (TopicEpoch of
// the topic ID). Offsets are committed only through the engine's
// acknowledgement window: per partition the contiguous processed prefix,
// never backwards. A Source is safe for concurrent use (Status from any
// goroutine); it runs one Run at a time. Close it after the engine stopped:
// the engine's final commit goes through its client.
type Source struct {
	opts Options
	log  *slog.Logger

	running atomic.Bool
	closed  atomic.Bool

	// mu guards everything below; never held across a commit request.
	mu    sync.Mutex
	cl    *kgo.Client
	in    *engine.Intake
	gen   int64
	parts map[string]*part // by PartitionKey
	buf   []polled         // polled records in poll order: buf[head:] are not published yet
	head  int
	epoch int64 // the feed's epoch: that of the last record published
	// ids holds, per topic, the ID of the incarnation the client consumes
	// (from its fetches, or the metadata before one): a topic deleted, or
	// deleted and created again under another ID, is retired (retire).
	ids       map[string]topicID
	paused    bool // owned partitions' fetches are paused
	state     engine.FeedState
	detail    string
	fetchErr  string
	lastError string
	verified  time.Time // the last periodic read-back
	seeded    time.Time // the last read of end offsets (seedEnds)
	started   time.Time // the last read of start offsets (checkStarts)
	listed    time.Time // the last read of the topics' partitions (checkPartitions)
	// unconsumed says why a partition of the topics is read by no one (a
	// partition no member of the group is assigned, a topic that does not
	// exist), "" when every one is owned: the feed is BEHIND while it is
	// set. gone are the topics deleted since this source saw them (their
	// records not read were counted lost; nothing is left to read): a
	// feed caught up names them.
	unconsumed string
	gone       []string
	// seen holds the topics this source has seen exist.
	seen map[string]bool
	// stale are the commits offsetsFetched found of another incarnation
	// of their topic, for adjustOffsets.
	stale []staleCommit

	// commitMu serialises commits (a poll's and a revocation's).
	commitMu       sync.Mutex
	commitFailures atomic.Int64
	fenced         atomic.Int64
	// brokerErr is the last failed request or connection to a broker
	// ("broker host:port: error"), nil once a request succeeds again: set
	// by brokerHook from the client's goroutines.
	brokerErr atomic.Pointer[string]
	// groupErr is the last error that broke the client out of the group
	// (a member the group refused: a session timeout out of the brokers'
	// bounds, not authorised), until a partition is assigned; set by
	// brokerHook.
	groupErr atomic.Pointer[string]

	items []any
	poss  []core.Position
}

// part is one partition the source has owned.
type part struct {
	topic     string
	partition int32
	key       string
	owned     bool
	// fence is the feed's sequence number when this ownership began
	// (Intake.Seq): an acknowledgement at or before it is of an earlier
	// ownership and is fenced.
	fence int64
	// id is the ID of the topic's incarnation its records are read from
	// (unknown: a cluster without topic IDs), epoch the position space of
	// its records, TopicEpoch(id).
	id    topicID
	epoch int64
	// stale: the group's commit at the assignment is not a position of
	// this partition's log (a commit of another incarnation of its topic,
	// or past its end): the partition is read from its log start, as by a
	// group that never committed.
	stale     bool
	published int64 // offset+1 of the last record published (0: none)
	acked     int64 // the highest acknowledged position of this ownership
	committed int64 // the highest committed offset (-1: not known)
	hwm       int64 // the high watermark of the last fetch (-1: not known)
	// next is the offset of the next record the fetches should return
	// (the group's commit at the assignment, 0 without one; then the one
	// after the last record fetched); -1 until the first fetch of an
	// assignment. A fetch whose log start offset is past it shows records
	// deleted before they were read.
	next int64
	lost int64 // records deleted before they were read (all assignments)
	// truncated counts the group's commits found past the partition's log
	// end (all assignments): each a loss of records, how many unknown.
	truncated int64
	// fenced counts the acknowledgements of this partition's records
	// fenced (all assignments): records this member processed and never
	// committed, read again by the partition's next owner.
	fenced int64
	// gone is the log start offset a read of the start offsets found past
	// next (0: none): counted lost when the next read, a second later,
	// finds next still below it (checkStarts).
	gone   int64
	paused bool
	// revoking: a revocation of the partition is under way: its records
	// are no longer published, nor taken from the fetches.
	revoking bool
	// uncertain is set by a commit whose outcome is unknown: until then
	// (and until the offsets read back agree) each commit verifies them.
	uncertain time.Time
}

// New returns a source for opts; the client is created by Run.
func New(opts Options) (*Source, error) {
	switch {
	case len(opts.Brokers) == 0:
		return nil, fmt.Errorf("%w: no broker", ErrOptions)
	case len(opts.Topics) == 0:
		return nil, fmt.Errorf("%w: no topic", ErrOptions)
	case opts.Group == "":
		return nil, fmt.Errorf("%w: no group", ErrOptions)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.CommitInterval <= 0 {
		opts.CommitInterval = DefaultCommitInterval
	}
	opts.CommitInterval = min(opts.CommitInterval, opts.PollInterval)
	if opts.MaxPollRecords <= 0 {
		opts.MaxPollRecords = DefaultMaxPollRecords
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = DefaultCommitTimeout
	}
	if opts.VerifyInterval <= 0 {
		opts.VerifyInterval = DefaultVerifyInterval
	}
	if opts.RevokeTimeout <= 0 {
		opts.RevokeTimeout = DefaultRevokeTimeout
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Source{opts: opts, log: log, parts: map[string]*part{}, ids: map[string]topicID{}, seen: map[string]bool{}}, nil
}

// groupCommit is the offset the group had committed for p when it was
// assigned (the client's committed offsets), but for a stale commit (not
// a position of p's log), which is none.
func (p *part) groupCommit(committed map[string]map[int32]kgo.EpochOffset) (int64, bool) {
	eo, ok := committed[p.topic][p.partition]
	if !ok || p.stale {
		return -1, false
	}
	return eo.Offset, true
}

// polled is a record taken from a fetch and the epoch of its topic's
// incarnation.
type polled struct {
	r     *kgo.Record
	epoch int64
}

// DefaultPolicy is PAUSE: a full queue pauses the partitions' fetches,
// never drops a record.
func (s *Source) DefaultPolicy() engine.Policy { return engine.Pause() }

// Run joins the group and publishes its partitions' records into in until
// ctx is done. The client stays open when Run returns (the engine's last
// commit uses it): Close closes it.
func (s *Source) Run(ctx context.Context, in *engine.Intake) error {
	if s.closed.Load() || !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	s.mu.Lock()
	s.in = in
	s.epoch = 0
	in.SetEpoch(0)
	cl := s.cl
	s.mu.Unlock()
	in.SetCommitter(committer{s})
	s.setState(engine.StateBehind, "joining group "+s.opts.Group)
	if cl == nil {
		var err error
		if cl, err = s.newClient(); err != nil {
			return err
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var refused time.Time // since when the feed refuses the buffered records
	for {
		s.poll()
		if ctx.Err() != nil {
			cl.AllowRebalance()
			s.stopCheck(cl)
			return nil
		}
		if took, all := s.publish(); !all {
			// A queue full for a moment does not stop the fetches
			// (pausing drops what the client buffered): one that takes
			// nothing for a poll interval does.
			if refused.IsZero() || took > 0 {
				refused = time.Now()
				s.setState(engine.StateBehind, "paused: a subscriber's queue is full")
			} else if time.Since(refused) >= s.opts.PollInterval {
				s.pause(cl)
			}
			cl.AllowRebalance()
			timer.Reset(s.opts.PollInterval)
			select {
			case <-ctx.Done():
			case <-in.Ready():
				timer.Stop()
			case <-timer.C:
			}
			continue
		}
		refused = time.Time{}
		s.resume(cl)
		s.seedEnds(ctx, cl)
		s.checkStarts(ctx, cl)
		s.checkPartitions(ctx, cl)
		s.report()
		cl.AllowRebalance()
		pctx, cancel := context.WithTimeout(ctx, s.pollWait())
		fetches := cl.PollRecords(pctx, s.opts.MaxPollRecords)
		cancel()
		if fetches.IsClientClosed() {
			return nil
		}
		s.take(fetches)
	}
}

// pollWait is how long a duty cycle waits for records: CommitInterval
// while published records wait for their commit (and the last commit did
// not fail: a failed one is retried every PollInterval), PollInterval
// otherwise.
func (s *Source) pollWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastError == "" {
		for _, p := range s.parts {
			if p.owned && p.published > max(p.committed, 0) {
				return s.opts.CommitInterval
			}
		}
	}
	return s.opts.PollInterval
}

// newClient creates the group client with the partition callbacks.
func (s *Source) newClient() (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.opts.Brokers...),
		kgo.ConsumeTopics(s.opts.Topics...),
		kgo.ConsumerGroup(s.opts.Group),
		kgo.DisableAutoCommit(),
		kgo.KeepControlRecords(), // they move a partition's next offset (take)
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(4 * s.opts.PollInterval),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
		kgo.OnOffsetsFetched(s.offsetsFetched),
		kgo.AdjustFetchOffsetsFn(s.adjustOffsets),
		kgo.WithHooks(brokerHook{s}),
		kgo.SessionTimeout(s.opts.SessionTimeout),
		kgo.RebalanceTimeout(rebalanceTimeout(s.opts.SessionTimeout, s.opts.RevokeTimeout)),
		kgo.HeartbeatInterval(min(maxHeartbeat, s.opts.SessionTimeout/3)),
	}
	if s.opts.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(s.opts.InstanceID))
	}
	cl, err := kgo.NewClient(append(opts, s.opts.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	s.mu.Lock()
	s.cl = cl
	s.mu.Unlock()
	return cl, nil
}

// Close leaves the group (the revocation commits the processed prefix) and
// closes the client. Call it once the engine has stopped; a Source is not
// run again after Close.
func (s *Source) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	cl := s.cl
	s.mu.Unlock()
	if cl != nil {
		cl.CloseAllowingRebalance()
	}
	return nil
}

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
	p.id, p.epoch = id, epoch
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
	committed := cl.CommittedOffsets()
	var losses []engine.Loss
	s.mu.Lock()
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
		// One allocation for the batch's records and one for their
		// headers: a record a processor keeps keeps its batch.
		recs := make([]Record, n)
		nh := 0
		for _, b := range batch {
			nh += len(b.r.Headers)
		}
		var hs []Header
		if nh > 0 {
			hs = make([]Header, 0, nh)
		}
		var p *part
		for i, b := range batch {
			r := b.r
			if p == nil || p.partition != r.Partition || p.topic != r.Topic {
				p = s.parts[partitionKey(r.Topic, r.Partition)]
			}
			rec := &recs[i]
			*rec = Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
			if len(r.Headers) > 0 {
				for _, h := range r.Headers {
					hs = append(hs, Header{Key: h.Key, Value: h.Value})
				}
				rec.Headers = hs[len(hs)-len(r.Headers) : len(hs) : len(hs)]
			}
			var item any = rec
			if s.opts.Item != nil {
				item = s.opts.Item(rec)
			}
			items = append(items, item)
			poss = append(poss, core.Position{Key: p.key, Offset: r.Offset + 1})
		}
		k := s.in.TryPublishBatch(items, poss)
		for i := range k {
			if p == nil || p.key != poss[i].Key {
				p = s.parts[poss[i].Key]
			}
			p.published = poss[i].Offset
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
	committed := cl.CommittedOffsets()
	var losses []engine.Loss
	s.mu.Lock()
	in := s.in
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
	// A metadata request of its own: the client's cached metadata (which
	// kadm's listings use) may be seconds old.
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range s.opts.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var (
		missing []string         // topics that do not exist, never seen by this source
		deleted []string         // topics that existed and no longer do
		retired []string         // topics whose incarnation the client consumed is gone
		unowned []topicPartition // partitions not owned here
		losses  []engine.Loss
	)
	s.mu.Lock()
	for _, rt := range resp.Topics {
		t := ""
		if rt.Topic != nil {
			t = *rt.Topic
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			if !errors.Is(err, kerr.UnknownTopicOrPartition) {
				s.mu.Unlock()
				return fmt.Errorf("topic %s: %w", t, err)
			}
			if !s.seen[t] {
				missing = append(missing, t)
				continue
			}
			deleted = append(deleted, t)
			if s.holds(t) {
				retired = append(retired, t)
				losses = s.retire(t, "deleted", losses)
			}
			continue
		}
		s.seen[t] = true
		switch id, held := topicID(rt.TopicID), s.ids[t]; {
		case !id.known():
		case !held.known():
			s.ids[t] = id // before a fetch names it
		case held != id:
			retired = append(retired, t)
			losses = s.retire(t, "deleted and created again", losses)
			s.ids[t] = id
		}
		for _, rp := range rt.Partitions {
			if p := s.parts[partitionKey(t, rp.Partition)]; p == nil || !p.owned {
				unowned = append(unowned, topicPartition{t, rp.Partition})
			}
		}
	}
	in := s.in
	s.mu.Unlock()
	for _, l := range losses {
		s.log.Warn("kafkasource: topic deleted with records not read; counted lost",
			"group", s.opts.Group, "partition", l.Key, "from", l.From, "to", l.To, "records", l.Items)
		in.AddLoss(l)
	}
	if len(retired) > 0 && !stopping {
		// The client never consumes another incarnation of a topic it
		// consumed (its fetches fail, its commits are refused) until
		// the topic is purged from it and added again: the group then
		// assigns the partitions of what exists under the name next.
		cl.PurgeTopicsFromConsuming(retired...)
		cl.AddConsumeTopics(retired...)
	}
	adm := kadm.NewClient(cl)
	var unassigned, others []string
	var theirs []topicPartition // partitions other members own
	if len(unowned) > 0 {
		groups, err := adm.DescribeGroups(ctx, s.opts.Group)
		if err == nil {
			err = groups.Error()
		}
		if err != nil {
			return fmt.Errorf("group %s: %w", s.opts.Group, err)
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
	}
	if s.opts.Drain && len(theirs) > 0 {
		if others, err = s.othersToRead(ctx, adm, theirs); err != nil {
			return err
		}
	}
	var why []string
	for _, t := range missing {
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
	s.unconsumed, s.gone = strings.Join(why, "; "), deleted
	s.mu.Unlock()
	return nil
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

func (s *Source) setState(st engine.FeedState, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setStateLocked(st, detail)
}

func (s *Source) setStateLocked(st engine.FeedState, detail string) {
	if s.in == nil || (st == s.state && detail == s.detail) {
		return
	}
	s.state, s.detail = st, detail
	s.in.SetState(st, detail)
}

// poll polls acknowledgements: the engine tells the committer, which
// commits. A failed commit is warned (once per distinct failure) and
// retried at the next poll: the committed offsets lag, records are
// re-delivered, never lost.
func (s *Source) poll() {
	s.mu.Lock()
	in := s.in
	s.mu.Unlock()
	_, err := in.PollAcks()
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
		}
	}
}

// commitTagPrefix begins the metadata of every offset the source commits,
// followed by the topic ID in hex (commitTag).
const commitTagPrefix = "blackbox topic-id="

// commitTag is the metadata of an offset committed of the incarnation of
// a topic whose ID is id.
func commitTag(id topicID) string { return commitTagPrefix + hex.EncodeToString(id[:]) }

// taggedID is the topic ID a commit's metadata names, if it is a
// commitTag.
func taggedID(meta *string) (topicID, bool) {
	if meta == nil {
		return topicID{}, false
	}
	h, ok := strings.CutPrefix(*meta, commitTagPrefix)
	var id topicID
	if !ok || hex.DecodedLen(len(h)) != len(id) {
		return topicID{}, false
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil || !id.known() {
		return topicID{}, false
	}
	return id, true
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
	note := func(topic string, partition int32, meta *string) {
		if id, ok := taggedID(meta); ok && topic != "" {
			tagged = append(tagged, staleCommit{topic, partition, id})
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.Offset >= 0 {
					note(t.Topic, p.Partition, p.Metadata)
				}
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Offset >= 0 {
				note(t.Topic, p.Partition, p.Metadata)
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
		if now := ids[c.topic]; now.known() && now != c.id {
			s.stale = append(s.stale, c)
		}
	}
	return nil
}

// staleCommit is a commit of a partition naming the incarnation of its
// topic it was made for.
type staleCommit struct {
	topic     string
	partition int32
	id        topicID
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
	s.dropBuffered(gone)
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
// is past the committed one; a lower committed offset is never sent.
func (c committer) Commit() error { return c.s.commit() }

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
		if p.owned && p.acked > 0 && p.acked > p.committed { // acked 0: nothing processed yet
			if offsets[p.topic] == nil {
				offsets[p.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[p.topic][p.partition] = kgo.EpochOffset{Epoch: -1, Offset: p.acked}
			if p.id.known() {
				tags[p.key] = commitTag(p.id)
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
	return nil
}

// Status is where a Source stands.
type Status struct {
	// Generation is the group generation of the last assignment, -1
	// before one.
	Generation int64
	// Partitions are every partition the source has owned, by topic and
	// partition.
	Partitions []PartitionStatus
	// CommitFailures counts failed commits (each retried); LastError is
	// the last one while it is not resolved.
	CommitFailures int64
	LastError      string
	// Fenced counts acknowledgements not committed because their
	// partition was revoked or lost after they were published.
	Fenced int64
}

// PartitionStatus is one partition's standing.
type PartitionStatus struct {
	Topic     string
	Partition int32
	// Epoch is the position space of its records: TopicEpoch of the ID
	// of the topic's incarnation they were read from (0: not known, or a
	// cluster without topic IDs).
	Epoch int64
	Owned bool
	// Committed is the committed offset (the next record to read), -1
	// when this source has not committed nor read it; Processed the
	// acknowledged position (offset+1 of the last processed record of the
	// contiguous prefix), Published the position of the last record
	// published, HighWatermark the partition's end at the last fetch (-1
	// unknown).
	Committed, Processed, Published, HighWatermark int64
	// Lag is HighWatermark minus Committed (-1 when either is unknown).
	Lag    int64
	Paused bool
	// Lost counts the records of the partition deleted (retention,
	// DeleteRecords) before the group read them: a loss.
	Lost int64
	// Truncated counts the times the group's commit was found past the
	// partition's log end (LossTruncated): each a loss of records past
	// the commit, how many unknown.
	Truncated int64
	// Fenced counts the partition's records this source published and
	// processed but never committed (all its ownerships): records still
	// queued when the partition was revoked or lost, or of an incarnation
	// of the topic since deleted. The partition's next owner reads them
	// again: they are processed twice, possibly after the next owner
	// committed them. Status.Fenced is their sum.
	Fenced int64
}

// Status returns the source's status; safe to call at any time.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Generation: -1, CommitFailures: s.commitFailures.Load(), LastError: s.lastError, Fenced: s.fenced.Load()}
	if s.cl != nil || len(s.parts) > 0 {
		st.Generation = s.gen
	}
	for _, p := range s.parts {
		ps := PartitionStatus{Topic: p.topic, Partition: p.partition, Epoch: p.epoch, Owned: p.owned, Committed: p.committed,
			Processed: p.acked, Published: p.published, HighWatermark: p.hwm, Lag: -1, Paused: p.paused, Lost: p.lost, Truncated: p.truncated, Fenced: p.fenced}
		if p.hwm >= 0 && p.committed >= 0 {
			ps.Lag = p.hwm - p.committed
		}
		st.Partitions = append(st.Partitions, ps)
	}
	slices.SortFunc(st.Partitions, func(a, b PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return st
}

// rebalanceTimeout is how long the group waits for its members to join a
// rebalance (kgo.RebalanceTimeout): a member killed between its JoinGroup
// and its SyncGroup is removed only then, whatever its session, so it
// follows the session (franz-go's default is a fixed 60s); it always
// leaves room for a revocation (RevokeTimeout) and a join.
func rebalanceTimeout(session, revoke time.Duration) time.Duration {
	return max(session, 2*revoke+time.Second)
}
