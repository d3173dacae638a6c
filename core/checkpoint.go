package core

// CheckpointUser is a processor that saves its state in batches rather than
// at the completion of every delivery, and so holds its feeds' commits
// until a save covering them is durable: a source never commits an item
// whose effects a crash could lose. The engine finds the processors
// implementing it and hands each its checkpoints; a processor needs
// nothing but this package to implement it.
//
// The protocol, for one instance:
//
//   - The first time the engine starts, it calls UseCheckpoint once per
//     feed the instance's group subscribes, before anything is delivered
//     (the hold is in place before the call). cp holds the feed's commits
//     for the group. An instance that does not save in batches (no state
//     file, a save per delivery) calls cp.Release at once; one that saves
//     per delivery keeps cp to report, from the completion whose save
//     keeps failing, cp.Fail(err) before it returns its error: the item
//     does not count (it is not committed) and the group fails. An
//     instance may start a goroutine here: the engine's Stop will call
//     CloseCheckpoint.
//   - To save, on a goroutine where no delivery of the instance is half
//     applied: take m := cp.Mark() and the state together, write the state
//     durably, then cp.DurableThrough(m). Mark counts only items whose
//     completions have run (not the one being handled), so every item it
//     counts is in the state taken with it.
//   - A save that fails is tried again; one that keeps failing (a bounded
//     number of tries, or time) is reported with cp.Fail(err), err naming
//     the state: the group fails (the engine's Err reports it), so that a
//     launcher stops the run rather than wait for a commit that cannot
//     come, and nothing past the last durable mark is committed.
//   - The engine's Stop calls CloseCheckpoint once the groups stopped (or
//     Stop's context ended), before its last commit: the instance saves
//     what it holds, makes it durable, and stops any goroutine of its own.
//     Its error joins Stop's.
//
// When a group has several instances implementing it (workers, or several
// such processors), each gets a part of one hold: a feed commits only what
// every instance made durable, so that the commit, which spans every
// worker's items, never passes an item its worker did not save.
type CheckpointUser interface {
	UseCheckpoint(feed string, cp Checkpoint)
	CloseCheckpoint() error
}

// Checkpoint holds a feed's commits for one group until the group's state
// is durable (the engine's *Checkpoint implements it; see CheckpointUser
// for the protocol). Implementations are safe for concurrent use: Mark on
// the group's goroutine or the saver's, DurableThrough, Release and Fail
// from any goroutine.
type Checkpoint interface {
	// Mark returns what the group's queue has dispatched so far. Inside a
	// handler it does not count the item being handled.
	Mark() Mark
	// DurableThrough says the state covering m is durable: the source may
	// commit the items m counts. Marks only advance; a mark of another
	// checkpoint, or the zero Mark, moves nothing (an error says why).
	DurableThrough(m Mark) error
	// Release ends the hold: the queue counts as processed when
	// dispatched again. Releasing again does nothing more.
	Release()
	// Fail says the holder cannot make its state durable: its group fails,
	// and nothing past the last durable mark is committed. A nil err
	// stands for a generic "not durable".
	Fail(err error)
}

// Mark is what a group's queue had dispatched when a Checkpoint's Mark was
// taken. It is opaque: only the Checkpoint that made it gives it a meaning
// (NewMark wraps what it keeps), so a hold is released only as far as the
// queue really dispatched. The zero Mark covers nothing. A Mark is a plain
// value, safe to copy and to pass between goroutines.
type Mark struct{ v any }

// NewMark wraps a Checkpoint implementation's own value (of a type of its
// own, which no other package can make) into a Mark. For implementations
// of Checkpoint only.
func NewMark(v any) Mark { return Mark{v: v} }

// Value is the value NewMark wrapped, nil for the zero Mark. For
// implementations of Checkpoint only: they accept only values of their own
// type.
func (m Mark) Value() any { return m.v }
