package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// Status is the feed status report: is the run complete (Settled) and is it
// whole (Lossless). It marshals to the JSON of docs/GUARANTEES.md. A plain
// value (as its parts): a copy made when Engine.Status returned it.
type Status struct {
	Settled  bool          `json:"settled"`
	Lossless bool          `json:"lossless"`
	Feeds    []FeedStatus  `json:"feeds"`
	Groups   []GroupStatus `json:"groups"`
	// Killed is the reason the engine was killed (Engine.Kill), omitted
	// while it was not: a killed run is never settled (kill.go).
	Killed string `json:"killed,omitempty"`
	// Sink is "live" when Config.Sink got the outputs as they were
	// emitted: at least once, possibly before any recording held them
	// (docs/GUARANTEES.md, "Effects"); omitted without one.
	Sink string `json:"sink,omitempty"`
}

// GroupStatus is one group's part of the Status: its workers and, for a
// group of several, its gap state, summed over its queues. The type of
// Status.Groups' elements. A plain value.
type GroupStatus struct {
	Group   string `json:"group"`
	Workers int    `json:"workers"`
	// InFlight counts the items handed to workers and not finished (and
	// the timers and drops handed to them).
	InFlight int64 `json:"inFlight"`
	// Gap counts the items completed beyond their queue's oldest pending
	// one; MaxGap is the bound per queue.
	Gap    int64 `json:"gap"`
	MaxGap int64 `json:"maxGap"`
	// OldestPending is the feed sequence of the oldest item taken and not
	// completed, 0 when none.
	OldestPending int64 `json:"oldestPending"`
	// GapBlocked is how long the group waited with a queue's gap full.
	GapBlocked time.Duration `json:"gapBlockedNs"`
	// StaleTokens counts completions and checkpoint marks refused for a
	// stale token.
	StaleTokens int64 `json:"staleTokens"`
	// Fenced says the group is fenced (Engine.Fence, a seek): it takes
	// nothing until Engine.Unfence or Engine.Resume; omitted while not.
	Fenced bool `json:"fenced,omitempty"`
	// Stalled names each worker that has not completed its item within
	// GroupConfig.StallAfter, and the item (feed, sequence, position),
	// "; "-joined; nil when none. It clears when the item completes.
	Stalled *string `json:"stalled"`
}

// FeedStatus is one feed's part of the Status. A plain value.
type FeedStatus struct {
	Feed     string    `json:"feed"`
	State    FeedState `json:"state"`
	Bounded  bool      `json:"bounded"`
	Sequence int64     `json:"sequence"`
	Detail   *string   `json:"detail"`
	Drained  bool      `json:"drained"`
	Settled  bool      `json:"settled"`
	Lossless bool      `json:"lossless"`
	Policy   string    `json:"policy"`
	// Dropped counts queue copies lost (drops and push fallbacks).
	Dropped int64 `json:"dropped"`
	// Refused counts BLOCK publishes refused.
	Refused int64 `json:"refused"`
	// Downgraded counts publishes that could neither wait nor pause.
	Downgraded int64 `json:"downgraded"`
	// Paused says TryPublish refuses items now; Pauses counts the pauses
	// (each begins with a refusal after an item was taken), PausedTime
	// is their time, the current one's so far included (TimerClock).
	Paused     bool          `json:"paused"`
	Pauses     int64         `json:"pauses"`
	PausedTime time.Duration `json:"pausedNs"`
	// Acknowledged is the highest sequence committed by the committer.
	Acknowledged int64 `json:"acknowledged"`
	// PendingAcks counts the items not yet committed: awaiting their
	// queues' dispatch, or told to the committer before a commit that has
	// not succeeded yet.
	PendingAcks int `json:"pendingAcks"`
	// OldestUncommitted is the age of the oldest of those, on the
	// TimerClock: since the feed took it (a positioned feed that
	// commits; a push feed commits nothing); 0, omitted, when none.
	OldestUncommitted time.Duration `json:"oldestUncommittedNs,omitempty"`
	Consumers         int           `json:"consumers"`
	// Stalled says why a positioned feed holds its position and cannot
	// complete, or that a consumer of any feed failed (an observer, the
	// recorder, could not write: "consumer G/F failed: ..."), or that a
	// worker has not completed an item of the feed within its group's
	// StallAfter (as GroupStatus.Stalled); nil otherwise.
	Stalled      *string `json:"stalled"`
	Unterminated int64   `json:"unterminated"`
	// CompletionFailures counts completion callbacks skipped after their
	// retries: their items were acknowledged without them (a loss).
	CompletionFailures int64 `json:"completionFailures"`
	// Failures counts items skipped after a processor's retries ran out.
	Failures int64 `json:"failures"`
	// Retries counts a processor's tries of an item after a failed one
	// (GroupConfig.Retry), those of items that then failed every try
	// included; omitted when none. Not a loss by itself.
	Retries int64 `json:"retries,omitempty"`
	// Losses counts the losses the source reported (Intake.AddLoss), by
	// reason (the source's: filesource.LossOversized, kafkasource.LossRetention ...); omitted when
	// none. Apart from Dropped: a queue's drops are items the feed
	// published, a source's losses input it never published. What a
	// source knows of its input that is neither an item nor a loss (a
	// file source's holes and replaced files, a Kafka source's
	// partitions) is in the source's own status, not here.
	Losses      map[string]int64   `json:"losses,omitempty"`
	Subscribers []SubscriberStatus `json:"subscribers"`
	// Released counts the items an operator released (Engine.Release) or
	// skipped (Engine.Seek): committed past without their queue's group
	// completing them (or making them durable); omitted when none. A
	// loss, apart from Dropped.
	Released int64 `json:"released,omitempty"`
	// GroupProgress says the feed's committer keeps each group's own
	// progress with its commit (GroupCommitter) and the feed honours it
	// (FeedConfig.SkipCompleted): a restart does not hand a group what it
	// completed ahead of the slowest one. False (omitted): a restart
	// delivers again to every group what the slowest had not completed (a
	// push feed commits nothing; a committer that keeps no group's
	// progress; a feed that does not honour it).
	GroupProgress bool `json:"groupProgress,omitempty"`
}

// SubscriberStatus is one queue of a feed (a group's binding to it): the
// type of FeedStatus.Subscribers' elements. Durations are timed on the
// engine's TimerClock when a wait or a pause begins and ends. A plain
// value.
type SubscriberStatus struct {
	Queue string `json:"queue"`
	// Group is the queue's group (Queue is "GROUP/FEED"); not in the
	// JSON, which names the queue.
	Group      string `json:"-"`
	Policy     string `json:"policy"`
	Position   int64  `json:"position"`
	Dispatched int64  `json:"dispatched"`
	Drained    bool   `json:"drained"`
	// Dropped counts the items this queue lost (drops, push fallbacks, a
	// fenced group's, a failed journal's).
	Dropped int64 `json:"dropped"`
	// Refused counts the BLOCK publishes refused while this queue lacked
	// room (the last one a publish waited for).
	Refused int64 `json:"refused"`
	// Downgraded counts the publishes that found this PAUSE or BLOCK
	// queue full and could neither wait nor pause: each fell back to a
	// drop after the spin (dropped unless room came within it).
	Downgraded int64 `json:"downgraded"`
	// Blocked counts the BLOCK publishes' waits for room in this queue,
	// each ended by a delivery or a refusal; BlockedTime is their total
	// time, BlockedMax the longest.
	Blocked     int64         `json:"blocked"`
	BlockedTime time.Duration `json:"blockedNs"`
	BlockedMax  time.Duration `json:"blockedMaxNs"`
	// Paused says the feed is paused now and this queue was full (or its
	// group fenced or dead) when the pause began; Pauses counts the feed's
	// pauses it began so, PausedTime their time, the current one's so far
	// included.
	Paused     bool          `json:"paused"`
	Pauses     int64         `json:"pauses"`
	PausedTime time.Duration `json:"pausedNs"`
	Removed    bool          `json:"removed,omitempty"`
	// Released counts the items an operator released of this queue
	// (Engine.Release); omitted when none.
	Released int64 `json:"released,omitempty"`
	// AlreadyCompleted counts the items the feed did not hand to this
	// queue because its group completed them in an earlier run: the
	// progress a GroupCommitter kept, the source told at its start
	// (Intake.SkipCompleted). Not a loss; omitted when none.
	AlreadyCompleted int64 `json:"alreadyCompleted,omitempty"`
	// Loss is the loss state of the group's binding to the feed
	// (lossstate.go), shared by its queues of the run (a removed one and
	// the one that replaced it); omitted from the JSON while zero (UP
	// since the run began, nothing lost, never cleared).
	Loss LossStatus `json:"loss,omitzero"`
	// MoveBack is where a backwards seek of the queue's group on the feed
	// (Engine.Seek, SeekPlan.Redelivery) stands, on its live queue:
	// MoveBackPending from the seek until the source applied it (its
	// Rewinder.Rewind, at the source's next poll of the
	// acknowledgements: Seek does not wait for it), MoveBackFailed while
	// the source's Rewind failed (the feed takes nothing: FeedStatus.Stalled
	// says why); omitted once applied, and when there was none. The feed is
	// not settled meanwhile.
	MoveBack string `json:"moveBack,omitempty"`
	// Generation names the queue for Engine.Release, Engine.Seek and
	// Engine.Resume: a group subscribed again (or a queue a release or a
	// seek replaced) gets a queue of a new generation, and the old one keeps
	// its own. Not in the JSON: generations number the queues of every
	// engine of the process, so they differ from run to run.
	Generation int64 `json:"-"`
}

// The values of SubscriberStatus.MoveBack.
const (
	MoveBackPending = "pending"
	MoveBackFailed  = "failed"
)

// Status reports every feed. A feed is settled when its source is caught up
// or at its end, every live queue is drained, nothing is paused or awaiting
// acknowledgement, and it is not stalled; lossless when no queue of it
// dropped or refused an item within its loss window (the run, or since an
// operator last cleared its group's latch: Engine.ClearOverload), no item
// or completion was skipped after its retries, no consumer failed
// (Engine.Err), its source reported no loss (Intake.AddLoss, whatever the
// source and the reason), and no operator released anything
// (Engine.Release). Only a clear shortens the window: a DEGRADED binding's
// recovery does not (its losses were the policy's, the run lost them), nor
// does anything for the other losses, which stay the run's. Status applies
// the loss states' recoveries due (lossstate.go).
func (e *Engine) Status() Status {
	s := Status{Settled: true, Lossless: true, Feeds: []FeedStatus{}, Groups: []GroupStatus{}}
	for _, f := range e.feeds {
		fs := f.Status()
		s.Settled = s.Settled && fs.Settled
		s.Lossless = s.Lossless && fs.Lossless
		s.Feeds = append(s.Feeds, fs)
	}
	for _, g := range e.groups {
		s.Groups = append(s.Groups, g.status())
	}
	e.killedStatus(&s) // kill.go
	if e.cfg.Sink != nil {
		s.Sink = core.SinkLive
	}
	return s
}

// Status reports this feed (see Engine.Status). It applies the loss
// states' recoveries due (lossstate.go).
func (f *Feed) Status() FeedStatus {
	f.mu.Lock()
	fs := f.statusLocked()
	f.mu.Unlock()
	f.deliverChanges()
	return fs
}

// statusLocked is Status with f.mu held.
func (f *Feed) statusLocked() FeedStatus {
	f.observeLosses()
	var ongoing time.Duration // of the current pause, if timed
	var now time.Time
	if f.paused && !f.pausedAt.IsZero() {
		now = f.eng.cfg.TimerClock.Now()
		ongoing = max(0, now.Sub(f.pausedAt))
	}
	fs := FeedStatus{
		Feed: f.name, State: f.state, Bounded: f.bounded, Sequence: f.seq, Policy: string(f.policy.Kind),
		Refused: 0, Downgraded: f.downgradedPub.Load(), Paused: f.paused, Pauses: f.pauses, PausedTime: f.pausedTime + ongoing,
		Acknowledged: f.acknowledged.Load(), PendingAcks: f.win.Len() + f.uncommitted, Unterminated: f.unterminated,
		CompletionFailures: f.completionFailures.Load(), Failures: f.failures.Load(), Retries: f.retries.Load(),
		Losses:  f.lossCounts(),
		Drained: true, Subscribers: []SubscriberStatus{},
	}
	if f.detail != "" {
		d := f.detail
		fs.Detail = &d
	}
	if oldest := f.oldestUncommitted(); !oldest.IsZero() {
		if now.IsZero() {
			now = f.eng.cfg.TimerClock.Now()
		}
		fs.OldestUncommitted = max(0, now.Sub(oldest))
	}
	live := map[*binding]bool{}
	for _, b := range f.targets {
		live[b] = true
	}
	var stalled string
	failed, lostInWindow := false, false
	positioned := f.committer != nil
	_, fs.GroupProgress = f.committer.(GroupCommitter)
	fs.GroupProgress = fs.GroupProgress && f.honourCompleted
	for _, b := range f.all {
		if fe := b.group.failure.Load(); fe != nil {
			failed = true
			if stalled == "" {
				stalled = fmt.Sprintf("consumer %s failed: %v", b.name, fe.cause)
			}
		}
		pos, disp := b.q.Tail(), b.dispatched.Load()
		ss := SubscriberStatus{Queue: b.name, Group: b.group.name, Policy: string(b.policy.Kind), Position: pos, Dispatched: disp,
			Drained: disp >= pos, Dropped: b.dropped.Load(), Refused: b.refused.Load(), Downgraded: b.downgraded.Load(),
			Blocked: b.blocked, BlockedTime: b.blockedTime, BlockedMax: b.blockedMax,
			Paused: b.pausing, Pauses: b.pauses, PausedTime: b.pausedTime, Removed: !live[b]}
		if b.pausing {
			ss.PausedTime += ongoing
		}
		ss.Released, ss.Generation = b.released.Load(), b.gen
		ss.AlreadyCompleted = b.completed.Load()
		ss.Loss = f.lossStatus(b.group.name)
		if rq := f.rewind; rq != nil && live[b] && rq.rs[0].Group == b.group.name {
			ss.MoveBack = MoveBackPending
			if rq.failed != nil {
				ss.MoveBack = MoveBackFailed
			}
		}
		lostInWindow = lostInWindow || b.lostInWindow()
		fs.Released += ss.Released
		fs.Dropped += ss.Dropped
		fs.Refused += ss.Refused
		fs.Subscribers = append(fs.Subscribers, ss)
		if live[b] {
			if b.fenced() {
				if positioned && stalled == "" {
					stalled = fmt.Sprintf("consumer %s fenced or dead", b.name)
				}
			} else {
				fs.Consumers++
			}
			fs.Drained = fs.Drained && ss.Drained
		} else if ack := b.AckPoint(); positioned && ack < pos && stalled == "" && f.win.WaitsFor(b) {
			if ack < disp {
				stalled = fmt.Sprintf("removed consumer %s left %d processed items not made durable", b.name, pos-ack)
			} else {
				stalled = fmt.Sprintf("removed consumer %s left %d unprocessed items", b.name, pos-disp)
			}
		}
	}
	if positioned && len(f.targets) == 0 && stalled == "" {
		stalled = "no live consumer"
	}
	for _, b := range f.targets {
		if stalled != "" {
			break
		}
		stalled = b.stuck()
	}
	if rq := f.rewind; rq != nil && rq.failed != nil { // first: the feed takes nothing more
		stalled = fmt.Sprintf("the source failed to move group %s back to seq %d: %v", rq.rs[rq.done].Group, rq.rs[rq.done].To.Seq, rq.failed)
	}
	if stalled != "" {
		fs.Stalled = &stalled
	}
	fs.Lossless = !lostInWindow && fs.CompletionFailures == 0 && fs.Failures == 0 && !failed &&
		len(fs.Losses) == 0 && fs.Released == 0
	fs.Settled = (f.state == StateCaughtUp || f.state == StateEndOfStream) && fs.Drained && !f.paused &&
		fs.PendingAcks == 0 && fs.Stalled == nil && f.rewind == nil
	f.killedStatus(&fs, positioned) // kill.go
	return fs
}

// oldestUncommitted is when the oldest item not committed yet was taken
// (lock held): the first told to the committer since its last commit, else
// the ack window's oldest; zero when none (or not timed).
func (f *Feed) oldestUncommitted() time.Time {
	switch {
	case f.uncommitted > 0:
		return f.uncommittedAt
	case f.win.Len() > 0:
		return f.win.At(0).At
	}
	return time.Time{}
}

// status reports the group's workers and gap.
func (g *group) status() GroupStatus {
	gs := GroupStatus{Group: g.name, Workers: len(g.workers), StaleTokens: g.stale.Load(), Fenced: g.fenced.Load()}
	if len(g.workers) == 1 {
		return gs
	}
	var stuck []string
	for _, w := range g.workers {
		if s := w.stuckOn(); s != nil {
			stuck = append(stuck, s.reason)
		}
	}
	if len(stuck) > 0 {
		s := strings.Join(stuck, "; ")
		gs.Stalled = &s
	}
	gs.MaxGap, gs.GapBlocked = g.maxGap, g.gapWait()
	for _, w := range g.workers {
		gs.InFlight += w.inflight.Load()
	}
	gs.InFlight += g.sharedItems.Load() // handed out, not yet taken by a worker
	for _, b := range *g.bindings.Load() {
		gs.Gap += b.gap.beyond.Load()
		if seq := b.gap.oldestPending(b.dispatched.Load()); seq > 0 && (gs.OldestPending == 0 || seq < gs.OldestPending) {
			gs.OldestPending = seq
		}
	}
	return gs
}
