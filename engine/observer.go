package engine

import (
	"errors"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// Input is one item being dispatched to a group: what the feed delivered,
// under which sequence and delivery. The observer hooks receive it; it is
// valid only during the hook call and reused afterwards.
type Input struct {
	Group    string // the group dispatching the item
	Feed     string
	Seq      int64
	Delivery *core.Delivery // nil for an item without a source position
	Item     any
}

// Drop is a run of items lost for one queue: consecutive drops at the same
// queue position coalesced into one.
type Drop struct {
	Feed       string
	Group      string
	Processors []string // the group's processors, which all lost the items
	Count      int64
	FirstSeq   int64
	LastSeq    int64
	Offset     int64 // source offset of the last dropped item, 0 for a push feed
	Reason     string
	// Approximate: the drop marks overflowed, so this count may include
	// drops that happened before the position where it is reported.
	Approximate bool
}

// SourceLoss is input a feed's source lost (Intake.AddLoss: a line longer
// than the maximum, the unread end of a file that is gone, records deleted
// by retention), reported to each group of the feed where it happened in
// the group's queue: after the items the feed published before it, before
// the next. Unlike a Drop it stands for no item of the feed's sequence:
// the source never published what it lost.
type SourceLoss struct {
	Feed       string
	Group      string
	Processors []string // the group's processors (a worker's), which all lost it
	// Seq is the feed sequence of the last item published before the loss
	// (0: none in this run).
	Seq int64
	Loss
}

// Completed is a run of items a group completed in an earlier run and is
// not handed again (Intake.SkipCompleted, honoured by
// FeedConfig.SkipCompleted), or, after a backwards seek of another group
// (Engine.Seek), items the source read again that this group was handed
// already under their first sequences: consecutive feed sequences First.Seq to
// Last.Seq, all of one position space (First and Last share Epoch and
// Position.Key), reported to the group's streams where the items would
// have been in its queue: after the items the feed published before them,
// before the next. Not a loss: the group processed the items then (its
// progress, kept by the source, says so). A plain value.
type Completed struct {
	Feed       string
	Group      string
	Processors []string // the group's processors (a worker's)
	// First and Last are the first and the last item of the run: their
	// sequences, epoch and positions. Count is Last.Seq-First.Seq+1.
	First, Last Commit
}

// Count is the number of items of the run.
func (c Completed) Count() int64 { return c.Last.Seq - c.First.Seq + 1 }

// Commit is a position a feed's source committed: every item of the feed up
// to sequence Seq was processed, and the source made the position of the
// last one of its key durable (Committer.Commit succeeded and, for a
// CommitReporter, reported that position durable).
type Commit struct {
	Seq      int64
	Epoch    int64
	Position core.Position
}

// Observer is a set of hooks the engine calls as it works; any may be nil.
// Hooks are called on the goroutine of the group concerned (Started and
// Stopped included), never concurrently for one group. A hook must not block
// for long: the group waits for it. The recorder is one Observer among
// others; combine several with Then.
//
// The hooks that return an error are those an observer writes from (the
// recorder stages its rows in BeforeComplete and writes them in Flush). An
// error fails the group: it takes no more items, the item it was
// dispatching is not dispatched (its completions do not run, its queue's
// dispatched counter does not move, so the source never commits it or
// anything after it; a Flush error: none of the items of the batch), its
// feeds report it stalled and not lossless, and Engine.Err and Engine.Stop
// return an *ObserverError. A restart delivers the items again.
type Observer struct {
	// Started: a processor's stream begins, before its group handles
	// anything. An error fails the group before it handles any item.
	Started func(processor string, p core.Processor) error
	// BeforeDispatch: an item is about to be dispatched to the group's processors.
	BeforeDispatch func(group string, in *Input)
	// Received: a processor is about to handle the item (every attempt). The
	// handler may mutate the item afterwards: copy what you keep.
	Received func(processor string, in *Input)
	// Handled: a processor finished an attempt: outputs emitted, clock
	// readings, completions registered, and Err when the attempt failed.
	Handled func(processor string, in *Input, t *core.Trace)
	// Failed: the first failed attempt of the item in a processor; retries
	// are not reported again.
	Failed func(processor string, in *Input, err error)
	// BeforeComplete: every processor of the group handled the item (or
	// failed it past its retries) and its completion callbacks are about to
	// run. This is where a recorder stages the item's rows (written by
	// Flush, ahead of the effects an app makes durable in its completions).
	// An error fails the group: the completions do not run and the item is
	// not dispatched (the items handled before it are flushed first and
	// count as dispatched once Flush returns nil).
	BeforeComplete func(group string, in *Input) error
	// Flush: write what the group's hooks staged since the last Flush
	// (group is named as for BeforeComplete). A group dispatches the items
	// it has ready in a batch (up to core.MaxBatch items of one queue per pass; with
	// several workers, the chunk a worker was handed): an item whose
	// handling registered no completion, or only core.BatchCompletions, is
	// kept pending after its BeforeComplete, and the engine calls Flush
	// before any other completion callback runs (the item's, after its
	// BeforeComplete), before a timer fires, at the end of the batch and
	// before the processors' Stopped. Only once Flush returns nil do the
	// pending items' deferred completions and AfterDispatch run and do they
	// count as dispatched, item after item, in order. An error fails the
	// group as a BeforeComplete error does: none of the pending items' completions
	// runs, none of them (nor the item whose completions were due) counts
	// as dispatched, and the next run delivers them again. With Flush nil
	// an item without completions counts as dispatched at once, and
	// BatchCompletions run right after their item, as before batching.
	Flush func(group string) error
	// CompletionFailed: the first failure, within this item, of a completion
	// callback registered by processor, before it is retried. For a deferred
	// completion (core.BatchCompletion) it comes after the batch's Flush,
	// when the processor may have handled later items; in is the item's. An
	// error fails the group: no further completion runs and the item is not
	// dispatched (nor, for a deferred completion, the later pending items).
	CompletionFailed func(processor string, in *Input, err error) error
	// AfterDispatch: the item's delivery is complete (processors and
	// completions done, its batch flushed) and it is about to count as
	// dispatched. For an item of a batch it runs after Flush, when later
	// items of the batch may have been handled already; in is a copy kept
	// for it.
	AfterDispatch func(group string, in *Input)
	// Dropped: items were lost for the group's queue right before the next
	// item it will dispatch (or before its end).
	Dropped func(group string, d Drop)
	// Lost: the feed's source lost input right before the next item the
	// group will dispatch (or before its end): Intake.AddLoss. Called once
	// per loss and group (with several workers, once per worker, as
	// Dropped is).
	Lost func(group string, l SourceLoss)
	// AlreadyCompleted: items the group completed in an earlier run (or
	// was handed already, read again for another group's backwards seek)
	// were not handed to its queue (Completed), right before the next item the
	// group will dispatch (or before its end). Called as Dropped is: once
	// per run of items and group (with several workers, once per worker),
	// on the group's goroutine (a worker's), in order with its items. The
	// recorder writes a COMPLETED row.
	AlreadyCompleted func(group string, c Completed)
	// TimerSet: a processor set timer n (Cycle.After), due at due on the
	// engine's TimerClock; called inside the cycle that set it.
	TimerSet func(processor string, n int, due time.Time)
	// TimerFired: a processor's timer ran (t.Timer is its number).
	TimerFired func(processor string, t *core.Trace)
	// Stopped: a processor's stream ends with a clean stop of the engine
	// (never for a failed group). An error fails the group: Engine.Stop
	// returns it.
	Stopped func(processor string) error
	// Committed: a feed's source committed: once per key (a file has one,
	// a Kafka partition is one) whose position moved, after the
	// Committer's Commit succeeded, with the last item of that key it
	// covers; for a CommitReporter only once it reports that position
	// durable, and never for a key whose acknowledgements it fenced. Unlike the other hooks it is called on the goroutine that
	// polls the feed's acknowledgements (the source's, or the engine's stop
	// goroutine once the source stopped), never concurrently for one feed,
	// and only after every group that was given the items had dispatched
	// them (the items' observer hooks, BeforeComplete included, returned).
	Committed func(feed string, c Commit)
	// Killed: the engine was killed (Engine.Kill, or Config.KillSwitch),
	// for reason. Called once, on the goroutine that killed it (the
	// caller of Kill, or the group whose KillSwitch said so), before Kill
	// returns and before any stream is closed (Stopped): the recorder
	// writes the reason in its END rows. It must not block.
	Killed func(reason string)
	// LossState: a binding's loss state changed (lossstate.go: UP,
	// DEGRADED, LATCHED); group is c.Group. Called once per change, never
	// per item, in the order of the changes of the feed and never
	// concurrently for one feed, never under a feed's lock, on the
	// goroutine that made or observed the change (a publisher, a status
	// reader, the engine's overseer, Stop, the caller of
	// Engine.ClearOverload), or on one telling the feed's changes then.
	// The recorder writes a STATE row. It must not block.
	LossState func(group string, c LossStateChange)
	// Acted: an operator's action on a group's binding to a feed (a seek,
	// Engine.Seek, or a release, Engine.Release: OperatorAction) is about
	// to take effect. Called once
	// per action that is not a dry run, after every check passed and
	// before the engine changes anything: before the group's queue is
	// replaced, a Drop of the items it skips or releases reported, or the
	// source asked to read again (Rewinder). It is called on the caller's goroutine with
	// the engine's and the feed's locks held: the feed takes nothing
	// meanwhile, and the hook must not call into the engine (a deadlock);
	// it may write and sync (the recorder writes a CONTROL row and syncs
	// it). An error refuses the action, changing nothing: the caller gets
	// ErrNotRecorded wrapping it. Of observers combined with Then, only the
	// last should refuse (an earlier one has recorded an action the later
	// refused).
	Acted func(a OperatorAction) error
}

// ErrNotRecorded: an operator's action (Engine.Seek, Engine.Release) was refused because
// the observer could not record it (Observer.Acted failed): nothing
// changed.
var ErrNotRecorded = errors.New("engine: the operator's action could not be recorded")

// The values of OperatorAction.Action.
const (
	ActionSeek    = "seek"    // Engine.Seek
	ActionRelease = "release" // Engine.Release, Engine.ReleaseWith
)

// DefaultOperator is OperatorAction.Who for a caller that named no one
// (SeekOptions.Who or ReleaseOptions.Who empty, Engine.Release); NoReason
// its Reason for a caller that gave none.
const (
	DefaultOperator = "engine"
	NoReason        = noReason // "no reason given", as for a kill and a clear
)

// OperatorAction is an operator's action on a group's binding to a feed,
// told to Observer.Acted before it takes effect. A plain value.
type OperatorAction struct {
	Action string // ActionSeek, ActionRelease
	Feed   string
	Group  string
	// Who is the operator (SeekOptions.Who, ReleaseOptions.Who, or
	// DefaultOperator); Reason the operator's reason (or NoReason); At
	// when the action was taken (the options' At, or the engine's
	// TimerClock).
	Who    string
	Reason string
	At     time.Time
	// Before is the feed sequence through which the group had completed
	// the feed's items (the last item of its completed prefix, as the
	// queue's dispatched count says: items completed that still hold the
	// commit count, unlike SeekPlan.Before); After the one through which
	// it has completed them after the action: for a forward seek and a
	// release where the commit moves past what it skips or releases (at
	// least Before), for a backwards seek the target, below Before: the
	// group was moved back. A release's are those of the queue released
	// (Released.Before and After).
	Before, After int64
	// Unprocessed and Processed count what a release or a forward seek
	// takes from the queue, as it then takes it (Released.Unprocessed
	// and Processed, SeekPlan's): the items the group had not completed
	// (each gets a Drop) and those it completed that still held the
	// commit (a processing checkpoint had not made them durable, or a
	// worker completed them beyond an item not completed): no Drop, their
	// rows stand, but what they applied may never be saved, so the action
	// is a loss of them. Zero for a backwards seek (it re-delivers).
	Unprocessed, Processed int64
	// Seek is a seek's plan (Replacement 0: the queue is not replaced
	// yet); zero for a release.
	Seek SeekPlan
}

// Then returns an Observer that calls o's hooks and then next's. For a hook
// that returns an error, next's is not called when o's fails.
func (o Observer) Then(next Observer) Observer {
	return Observer{
		Started:          thenE2(o.Started, next.Started),
		BeforeDispatch:   then2(o.BeforeDispatch, next.BeforeDispatch),
		Received:         then2(o.Received, next.Received),
		Handled:          then3(o.Handled, next.Handled),
		Failed:           then3(o.Failed, next.Failed),
		BeforeComplete:   thenE2(o.BeforeComplete, next.BeforeComplete),
		Flush:            thenE1(o.Flush, next.Flush),
		CompletionFailed: thenE3(o.CompletionFailed, next.CompletionFailed),
		AfterDispatch:    then2(o.AfterDispatch, next.AfterDispatch),
		Dropped:          then2(o.Dropped, next.Dropped),
		Lost:             then2(o.Lost, next.Lost),
		AlreadyCompleted: then2(o.AlreadyCompleted, next.AlreadyCompleted),
		TimerSet:         then3(o.TimerSet, next.TimerSet),
		TimerFired:       then2(o.TimerFired, next.TimerFired),
		Stopped:          thenE1(o.Stopped, next.Stopped),
		Committed:        then2(o.Committed, next.Committed),
		Killed:           then1(o.Killed, next.Killed),
		LossState:        then2(o.LossState, next.LossState),
		Acted:            thenE1(o.Acted, next.Acted),
	}
}

func thenE1[A any](f, g func(A) error) func(A) error {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A) error {
		if err := f(a); err != nil {
			return err
		}
		return g(a)
	}
}

func thenE2[A, B any](f, g func(A, B) error) func(A, B) error {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A, b B) error {
		if err := f(a, b); err != nil {
			return err
		}
		return g(a, b)
	}
}

func thenE3[A, B, C any](f, g func(A, B, C) error) func(A, B, C) error {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A, b B, c C) error {
		if err := f(a, b, c); err != nil {
			return err
		}
		return g(a, b, c)
	}
}

func then1[A any](f, g func(A)) func(A) {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A) { f(a); g(a) }
}

func then2[A, B any](f, g func(A, B)) func(A, B) {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A, b B) { f(a, b); g(a, b) }
}

func then3[A, B, C any](f, g func(A, B, C)) func(A, B, C) {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A, b B, c C) { f(a, b, c); g(a, b, c) }
}
