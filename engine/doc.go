// Package engine is blackbox's delivery engine: feeds read from sources and
// number their items, fan each out to one bounded queue per subscribing
// group, and the groups (one goroutine each) hand each item to their
// processors with at-least-once delivery, completion callbacks, retries,
// honest loss accounting and a commit protocol that never lets a source
// commit an item before every queue it was offered to has processed it.
//
// Processors are written against package core (Processor, Cycle, Delivery,
// Completion, Clock); the engine runs them: each group wraps one core.Host
// per processor in a goroutine. Sources implement Source and publish through
// the Intake handed to their Run.
//
// A group of several workers (GroupConfig.Workers) runs each worker on a
// goroutine of its own with instances of its own (ProcessorConfig.New, named
// core.WorkerStream), by key (WorkerOf) or unordered; its queues count as
// dispatched only their contiguous completed prefix, and it claims no item
// more than MaxGap past the oldest pending one.
//
// A processor that saves its state in batches holds its feeds' commits
// until a save covering them is durable: Engine.Hold (or HoldParts, one
// part per saver) gives a Checkpoint (Mark, DurableThrough). A processor
// implementing core.CheckpointUser gets its checkpoints (core.Checkpoint,
// which *Checkpoint implements) from Start, without importing the engine,
// and saves the rest when Stop
// calls its CloseCheckpoint; one whose saves keep failing says so with
// Checkpoint.Fail, which fails its group (Engine.Err: a *DurableError), so
// that a launcher stops the run instead of waiting for a commit that
// cannot come. One that saves in each delivery's completion releases its
// checkpoint and may still Fail it from the completion whose save keeps
// failing: a completion that fails once its group failed does not count
// its item, which is never committed.
//
// A queue that holds a positioned feed's commit for good (its group was
// unsubscribed with a backlog, or is fenced or dead) is released by an
// operator with Engine.Release, naming it by its generation
// (SubscriberStatus.Generation): what it held is a counted, recorded loss
// of its group, and the commit moves on. An operator moves a fenced
// group's position on a positioned feed with Engine.Seek (forwards over
// what its queue holds: a recorded loss; backwards, through a source that
// reads again, a Rewinder: the items after the target are handed to that
// group again, under new sequences; a dry run returns the plan), a
// compare-and-swap on the same generation, and lets the group consume
// again with Engine.Resume naming the new one.
//
// A feed commits at its slowest queue. A source whose Committer is a
// GroupCommitter keeps, with that commit, each group's own completed
// prefix (the file source: in its pointer file), and tells the feed at its
// start (Intake.SkipCompleted); a feed that honours it
// (FeedConfig.SkipCompleted) does not hand a group again what it completed
// in an earlier run, counting it (SubscriberStatus.AlreadyCompleted) and
// telling the group's streams, in order with its items
// (Observer.AlreadyCompleted). A feed of one group keeps no group's
// progress apart: it is the feed's commit.
//
// What an operator watches: Engine.Status counts, per queue (a group's
// binding to a feed), the items dropped, the publishes refused and
// downgraded, the waits of blocking publishes and the pauses the queue
// caused, with their times; and names a worker stuck on an item. The
// Logger is told once of each change of state (a queue's first loss of a
// kind, a pause past FeedConfig.PauseWarnAfter, a worker past
// GroupConfig.StallAfter), never per item. Times are read from
// Config.TimerClock when a wait or a pause begins and ends, never per item.
//
// Each binding has a loss state (lossstate.go): UP; DEGRADED after a loss
// of a DROP binding, UP again once its feed's QuietPeriod passed with no
// loss (applied when observed, at the exact instant it was due); LATCHED
// after a loss its policy promised not to happen (a refused or downgraded
// publish of a PAUSE or BLOCK binding: FeedConfig.Latch), until an
// operator clears it with Engine.ClearOverload, which also begins the
// binding's loss window that FeedStatus.Lossless judges. Every change is
// told once to Observer.LossState (the recorder's STATE rows) and logged
// once.
//
// Outputs a processor emits with core.Cycle.Emit(sink, out) reach Config.Sink live
// as Write(processor, sink, out), on the processor's group goroutine, so they
// can be routed by processor and sink name.
//
// Contexts: Start's ctx only decides whether to start (a done ctx starts
// nothing); Stop's ctx bounds the stop. core.Cycle.Context is cancelled by
// Stop once the drain is over, so a processor waiting on it lets Stop
// return. Code the engine runs publishes with Feed.Offer, or Feed.Publish
// and the context it was served (Cycle.Context): neither waits. No function
// takes a nil context (ErrNilContext).
//
// An operator stops a run that must take nothing more with Engine.Kill
// (or Config.KillSwitch, asked before each item a group takes): intake
// stops at once (publishes are refused with ErrKilled), no group takes
// another item, the items in flight finish or are abandoned
// (Config.KillAbandon), the feeds commit only the contiguous prefix of
// what was dispatched, and the run ends without a drain. The reason goes
// to Observer.Killed (the recorder's END rows) and Status.Killed; the next
// run delivers what the kill left.
//
// docs/GUARANTEES.md says what an application can rely on.
package engine
