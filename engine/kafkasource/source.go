package kafkasource

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// Defaults of Options: each is its field's value when the field is not
// set (zero or negative).
const (
	// DefaultPollInterval is Options.PollInterval's default.
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultCommitInterval is Options.CommitInterval's default.
	DefaultCommitInterval = 2 * time.Millisecond
	// DefaultMaxPollRecords is Options.MaxPollRecords' default.
	DefaultMaxPollRecords = 8192
	// DefaultCommitTimeout is Options.CommitTimeout's default.
	DefaultCommitTimeout = 10 * time.Second
	// DefaultRevokeTimeout is Options.RevokeTimeout's default.
	DefaultRevokeTimeout = 2 * time.Second
	// DefaultVerifyInterval is Options.VerifyInterval's default.
	DefaultVerifyInterval = time.Second
	// DefaultSessionTimeout is Options.SessionTimeout's default.
	DefaultSessionTimeout = 45 * time.Second
	// maxHeartbeat is the longest the source goes between heartbeats
	// (franz-go's default interval).
	maxHeartbeat = 3 * time.Second
)

// The engine.Loss reasons of a Source: keys of engine.FeedStatus.Losses.
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
	// progress is each partition's groups' progress (by PartitionKey):
	// what the group's commit held at the assignment, raised by what the
	// engine tells (engine.GroupCommitter); each commit's metadata carries
	// what is ahead of its offset. unkept names the groups a commit could
	// not hold, warned of.
	progress map[string]*keyProgress
	unkept   map[string]bool

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

	// view is what CheckRewind reads of the partitions (refreshView),
	// without s.mu. failed is a move back the source could not apply
	// after it was checked (ErrRewind): Run returns it.
	view   atomic.Pointer[map[string]rewindView]
	failed atomic.Pointer[error]

	items []any
	poss  []core.Position

	// runStarted, when set (by the tests), is called by Run with the
	// client before its first duty cycle.
	runStarted func(*kgo.Client)
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
	// pub mirrors published for CheckRewind, which reads no s.mu: stored
	// once per published batch, at an assignment and at a move back.
	pub       atomic.Int64
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
	// meta is the metadata of this ownership's last successful commit: a
	// commit is sent again at the same offset when the groups' progress
	// it would carry changed.
	meta string
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
	return &Source{opts: opts, log: log, parts: map[string]*part{}, ids: map[string]topicID{}, seen: map[string]bool{},
		progress: map[string]*keyProgress{}, unkept: map[string]bool{}}, nil
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
	s.failed.Store(nil)
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
	if s.runStarted != nil {
		s.runStarted(cl)
	}
	for {
		s.poll()
		if err := s.failed.Load(); err != nil {
			cl.AllowRebalance()
			return *err
		}
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

// rebalanceTimeout is how long the group waits for its members to join a
// rebalance (kgo.RebalanceTimeout): a member killed between its JoinGroup
// and its SyncGroup is removed only then, whatever its session, so it
// follows the session (franz-go's default is a fixed 60s); it always
// leaves room for a revocation (RevokeTimeout) and a join.
func rebalanceTimeout(session, revoke time.Duration) time.Duration {
	return max(session, 2*revoke+time.Second)
}
