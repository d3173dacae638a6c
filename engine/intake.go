package engine

import (
	"context"

	"github.com/blackbox-audit/blackbox/core"
)

// Intake is a source's handle on its feed, handed to Source.Run: what a
// source, and only a source, does with a feed (publish with positions,
// commit through a Committer, report its state and what it could not
// publish). It is safe for concurrent use, but a source calls it from its
// own goroutine.
type Intake struct{ f *Feed }

// Name is the feed's name.
func (in *Intake) Name() string { return in.f.name }

// Publish publishes a push item (no source position), as Feed.Publish.
func (in *Intake) Publish(ctx context.Context, item any) error { return in.f.Publish(ctx, item) }

// TryPublish publishes an item of a re-readable source at pos, under the
// feed's current epoch. It returns false, committing nothing (no sequence,
// no journal entry, no queue holds it), when the item cannot be taken now:
// a PAUSE or BLOCK queue is full, the acknowledgement window is at its cap,
// or (for a feed with a committer) no consumer is live or one is fenced. The
// source keeps the item and offers it again on its next duty cycle. DROP
// queues of the feed still drop after their spin. While the feed's Journal
// runs (a TryPublish from inside Append), it takes nothing and returns
// false at once, without waiting for the lock Append runs under.
func (in *Intake) TryPublish(item any, pos core.Position) bool { return in.f.tryPublish(item, pos) }

// TryPublishBatch offers items[i] at pos[i], in order, as TryPublish would
// each, under one acquisition of the lock. It returns how many it took: a
// prefix of items; the source keeps the rest and offers them again. The
// groups see the items taken when it returns (earlier, before a journal
// stores one or while a full DROP queue is waited for). From inside the
// feed's Journal it takes nothing (see TryPublish).
func (in *Intake) TryPublishBatch(items []any, pos []core.Position) int {
	return in.f.tryPublishBatch(items, pos)
}

// SetCommitter makes this a positioned feed: items published with
// TryPublish are held in the acknowledgement window until every queue they
// were offered to has dispatched them, and c is told in order (PollAcks).
func (in *Intake) SetCommitter(c Committer) { in.f.setCommitter(c) }

// SkipCompleted says that group completed, in an earlier run, every item
// of the position space (epoch, pos.Key) at or before pos.Offset: its
// progress the source kept with its commit (GroupCommitter). A feed
// configured to honour it (FeedConfig.SkipCompleted; else it is ignored)
// does not hand such an item to the group's queues again: it counts it
// (SubscriberStatus.AlreadyCompleted; the first of a queue is logged)
// and the item waits for the feed's other queues only. A source calls it
// before it publishes the items it covers (at its start); a group that
// never had a queue of the feed is ignored, and the prefix is forgotten
// once the feed publishes an item of that space past it.
func (in *Intake) SkipCompleted(group string, epoch int64, pos core.Position) {
	in.f.skipCompleted(group, epoch, pos)
}

// PollAcks tells the committer, in publish order, every item that every
// queue it was offered to has dispatched (and a held checkpoint made
// durable), then commits once; after a failed commit it commits again even
// when nothing new was acknowledged. It returns how many items were
// acknowledged. Until a commit succeeds, the items told to the committer
// count in the status as pending acknowledgements (the feed is not
// settled) and Acknowledged does not move. A source calls it at the start
// of each duty cycle on its own goroutine.
func (in *Intake) PollAcks() (int, error) { return in.f.pollAcks() }

// SetEpoch sets the epoch of the items published from now on.
func (in *Intake) SetEpoch(epoch int64) { in.f.setEpoch(epoch) }

// Seq is the sequence number of the last item the feed numbered (0 before
// any): every item published after Seq returns has a higher one. A source
// that fences acknowledgements by ownership (a Kafka partition revoked and
// assigned again) reads it when an ownership begins: the items of earlier
// ownerships are those at or before it.
func (in *Intake) Seq() int64 { return in.f.lastSeq() }

// SetState reports where the source stands, with a human-readable detail.
// While a source is BEHIND (it has more to publish), the groups of its feed
// wait longer for its next items before they park.
func (in *Intake) SetState(s FeedState, detail string) { in.f.setState(s, detail) }

// SetBounded says the source will end by itself (a once-read, a fixed list).
func (in *Intake) SetBounded(b bool) { in.f.setBounded(b) }

// SetUnterminated reports bytes after the last line terminator that a
// bounded source ended without publishing.
func (in *Intake) SetUnterminated(n int64) { in.f.setUnterminated(n) }

// Ready delivers a value when a feed that refused an item (TryPublish
// returned false) may take items again: a queue drained to half, a group
// unfenced or subscribed. A paused source waits on it (with its own timeout:
// the signal is a hint, never a promise of room).
func (in *Intake) Ready() <-chan struct{} { return in.f.ready }
