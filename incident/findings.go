package incident

import (
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store"
)

// Findings is what Explain answers about a crashed run and its restarts:
// per feed and processor the six answers of `blackbox explain`, the losses of
// the recordings themselves, and a summary of each run. Every answer cites
// the rows that prove it. It is the JSON of `blackbox explain --json`: its
// fields keep their names and order, and the same recordings always give the
// same bytes. A Findings is a plain value: safe for concurrent reads once
// Explain returned it.
type Findings struct {
	// Runs summarises each recording, in the order given (run 1 first).
	Runs []Run `json:"runs"`
	// Answers holds the six answers per feed and processor, sorted by
	// processor, then feed. A processor run on workers is one processor
	// here (its worker streams merged); a Ref names the worker's stream.
	Answers []Answers `json:"answers"`
	// Losses are what the recordings lost that belongs to no one feed:
	// integrity problems other than a crashed run's unfinished streams and
	// torn tail (with the orphan rows of the write it tore) when a later run
	// followed it (an index gap, a missing OUTPUT row, a malformed row ...),
	// a FAILED timer, and the unfinished streams and torn tail of the last
	// run, which no restart followed.
	Losses []Loss `json:"losses"`
	// OnDisk compares the pointer and state files given (Options) with the
	// recordings; nil when none was given.
	OnDisk *OnDisk `json:"onDisk,omitempty"`
	// Lost: something was lost (any Loss anywhere in the Findings).
	Lost bool `json:"lost"`
	// Complete: the recordings prove everything they hold, as verify,
	// replay and diff say: every recording was read to its end, and none
	// has a problem but the crash of a run a later run restarted (its
	// unfinished streams and torn tail, store.CrashTail). False for a row
	// that cannot be read (what it held is unknown), an index gap, a seq a
	// COMMIT row covers with no row, a recorded failure (a FAILED row: the
	// stream is not reproducible past it), and the crash of the last run.
	Complete bool `json:"complete"`
}

// Run is one recording: the file, its rows counted per kind, and whether it
// ended (every stream closed by END: a clean stop) or crashed.
type Run struct {
	Run    int    `json:"run"` // 1, 2, 3 ... in the order given
	File   string `json:"file"`
	Format string `json:"format"` // its META's format
	// Sink is what became of the run's outputs (META's option
	// store.OptionSink): "live", an outbox's guarantee, or "" (none).
	Sink   string           `json:"sink,omitempty"`
	Rows   int64            `json:"rows"`
	Counts map[string]int64 `json:"counts"` // rows per kind (META, START ... COMMIT)
	// Ended: every stream of the run ends with END.
	Ended bool `json:"ended"`
	// Killed: an operator killed the run (engine.Engine.Kill), for this
	// reason, which its END rows give (store.End); omitted for a stop.
	Killed string `json:"killed,omitempty"`
	// Crashed: some stream has no END (the process did not stop cleanly),
	// or the last line is torn.
	Crashed bool `json:"crashed"`
	// Problems are the recording's integrity problems, as verify reports
	// them.
	Problems []store.Problem `json:"problems"`
	// States are the run's STATE rows, in order: each change of the loss
	// state of a group's binding to a feed (engine.Observer.LossState).
	// A binding whose last change is to LATCHED was never cleared: the run
	// lost what its policy promised to keep (a Loss of kind LossLatched).
	// Omitted when none.
	States []StateChange `json:"states,omitempty"`
	// Controls are the run's CONTROL rows, in order: each action an
	// operator took on the run (pause, resume, clear, release, seek,
	// kill), who took it and why. Omitted when none.
	Controls []ControlAction `json:"controls,omitempty"`
}

// ControlAction is a CONTROL row of a run (docs/FORMAT.md): operator Who
// did Action on group Group's binding to feed Feed (empty for a kill) At an
// instant of the run's clock, for Reason, the group done through Before
// and After it; Until ends a pause (omitted when indefinite or another
// action).
type ControlAction struct {
	Feed   string    `json:"feed,omitempty"`
	Group  string    `json:"group,omitempty"`
	Action string    `json:"action"`
	Who    string    `json:"who"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Before int64     `json:"before"`
	After  int64     `json:"after"`
	Until  time.Time `json:"until,omitzero"`
	// Released and Processed: what a release or a forward seek took
	// (store.Control's), absent when none.
	Released  int64 `json:"released,omitempty"`
	Processed int64 `json:"processed,omitempty"`
	Row       Ref   `json:"row"`
}

// ControlActionOf is the CONTROL row c at row ref.
func ControlActionOf(c store.Control, ref Ref) ControlAction {
	return ControlAction{Feed: c.Feed, Group: c.Group, Action: c.Action, Who: c.Who, Reason: c.Reason, At: c.At,
		Before: c.Before, After: c.After, Until: c.Until, Released: c.Released, Processed: c.Processed, Row: ref}
}

// Control is the action as its CONTROL row holds it.
func (a ControlAction) Control() store.Control {
	return store.Control{Feed: a.Feed, Group: a.Group, Action: a.Action, Who: a.Who, Reason: a.Reason, At: a.At,
		Before: a.Before, After: a.After, Until: a.Until, Released: a.Released, Processed: a.Processed}
}

// StateChange is a STATE row of a run (docs/FORMAT.md): the loss state of
// group Group's binding to feed Feed changed From To, for Reason, At an
// instant of the engine's timer clock, applied at Observed.
type StateChange struct {
	Feed     string    `json:"feed"`
	Group    string    `json:"group"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	Observed time.Time `json:"observed"`
	Row      Ref       `json:"row"`
}

// Ref names one row of one run: the proof of an answer.
type Ref struct {
	Run       int        `json:"run"`
	Processor string     `json:"processor"` // the stream ("" for META, JOURNAL, COMMIT and STATE rows)
	Index     int64      `json:"index"`
	Kind      store.Kind `json:"kind"`
}

// Position is where an input sits in its source: a core.Position (the key:
// a Kafka partition, "" for a file; the offset: for a file, the byte offset
// just after its line) in the position space Epoch, as core.Delivery holds
// them. PositionOf makes one from the engine's pair, and Position gives the
// core.Position back: d.AlreadyApplied(p.Epoch, p.Position()). A plain
// value.
type Position struct {
	Epoch  int64  `json:"epoch"`
	Key    string `json:"key,omitempty"`
	Offset int64  `json:"offset"`
}

// PositionOf is pos in the position space epoch: the pair a core.Delivery,
// a core.DurableState, an engine.Commit or a file source's pointer
// (filesource.Pointer's Epoch and Position) holds.
func PositionOf(epoch int64, pos core.Position) Position {
	return Position{Epoch: epoch, Key: pos.Key, Offset: pos.Offset}
}

// Position is p's key and offset as the engine's position type, without
// its epoch (p.Epoch).
func (p Position) Position() core.Position { return core.Position{Key: p.Key, Offset: p.Offset} }

// Input is one input row of a run, with what it holds.
type Input struct {
	Run int   `json:"run"`
	Seq int64 `json:"seq"` // the feed's sequence in that run
	// Position is nil for an item without a source position (pushed).
	Position *Position `json:"position,omitempty"`
	// Line is the item as recorded (the INLINE payload, or the JOURNAL row
	// of an INDEXED input; "" when that row is missing).
	Line string `json:"line"`
	// Time is the input row's instant (zero for an item in flight, which has
	// no input row).
	Time    time.Time `json:"time"`
	Outputs int64     `json:"outputs"` // its OUTPUT rows
	// Rows: its DELIVERY and input rows (or, in flight, its JOURNAL row).
	Rows []Ref `json:"rows"`
}

// Answers are the six answers for one feed and one processor.
type Answers struct {
	Feed      string `json:"feed"`
	Processor string `json:"processor"`
	// Crashes: one per crashed run that handled the feed, and one per run
	// that stopped cleanly, or was killed, leaving items of it unprocessed
	// (Crash.Stopped, Crash.Killed),
	// in run order: answers 1 (last input processed), 2 (in flight) and 3
	// (commit lag).
	Crashes []Crash `json:"crashes"`
	// Redelivered (answer 4): inputs a later run delivered again, at the
	// position of an input of an earlier run, in the later run's order.
	Redelivered []Redelivery `json:"redelivered"`
	// NotHandedAgain: items a run did not hand the processor because its
	// group completed them in an earlier run (COMPLETED rows: the progress
	// the source kept per group), one per row, in run order. Neither
	// re-delivered nor lost.
	NotHandedAgain []NotHandedAgain `json:"notHandedAgain,omitempty"`
	// Lost (answer 5): DROPPED and FAILED inputs of the feed, input its
	// source lost (LOST rows), and inputs in no run (a source that committed
	// past an input with no row).
	Lost []Loss `json:"lost"`
	// Duplicates (answer 6): outputs emitted again by a later run for an
	// input that had emitted them already. Those of two runs that both
	// delivered through an outbox (Run.Sink) were recorded again, never
	// delivered again (Duplicate.NotDelivered; NotAgain counts them).
	Duplicates []Duplicate `json:"duplicates"`
	// NotAgain counts the Duplicates a later run emitted again for an
	// input an earlier run had recorded, both runs delivering through an
	// outbox: recorded again, never delivered again (the outbox delivered
	// that position's outputs once, from the earlier recording;
	// docs/GUARANTEES.md, "Effects"). The rest were delivered twice.
	NotAgain int64 `json:"notAgain,omitempty"`
}

// NotHandedAgain is a COMPLETED row: the run did not hand the processor
// the items Completed names, completed in an earlier run.
type NotHandedAgain struct {
	Run       int             `json:"run"`
	Completed store.Completed `json:"completed"`
	Rows      []Ref           `json:"rows"`
}

// Crash is what one crashed run had done with a feed when it died.
type Crash struct {
	Run int `json:"run"`
	// Stopped: the run did not crash; it stopped cleanly, and its drain
	// ran out of time with items of the feed not dispatched (its END rows
	// list them: store.Unprocessed). They are in InFlight: never
	// processed, never committed, the next run delivers them again.
	Stopped bool `json:"stopped,omitempty"`
	// Killed: the stop was a kill (engine.Engine.Kill), for this reason:
	// it drained nothing, so what it left unprocessed is what it had
	// queued and in flight (InFlight). Not lost: the next run delivers it.
	Killed string `json:"killed,omitempty"`
	// LastProcessed (answer 1) is the input of the highest seq whose rows
	// (DELIVERY, input, every OUTPUT) were written: the last one every
	// processor of the group handled. Nil when the run handled none.
	LastProcessed *Input `json:"lastProcessed"`
	// InFlight (answer 2): items read and handed to the group whose rows
	// were not all written: inputs whose OUTPUT rows the crash cut, and the
	// JOURNAL rows of the run with no input, DROPPED or FAILED row. The
	// latter are known only for a journalled feed (InFlightKnown); a feed
	// not journalled leaves no row for an item whose rows were never
	// written (see MaybeInFlight).
	InFlight      []Input `json:"inFlight"`
	InFlightKnown bool    `json:"inFlightKnown"`
	// MaybeInFlight is the first input a later run delivered past
	// LastProcessed (in the first later run that got past it; the same
	// epoch and key, the lowest offset beyond it), or, when the crashed run
	// processed nothing, the first input of the first later run that
	// delivered one: what the crashed run may have been handling when it
	// died, rows not written. A group writes the rows of the items it
	// handled together in one batch (group commit, docs/FORMAT.md), so up
	// to core.MaxBatch items may have lost their rows together:
	// MaybeInFlightInputs counts the later run's inputs from MaybeInFlight
	// on, at most core.MaxBatch, and MaybeInFlightOutputs their outputs. A live
	// sink is given outputs as they are emitted, before the rows are
	// written, so those outputs may have left the crashed run as well as
	// the restart: emitted twice, with no row to show the first time. With
	// several workers each worker stream has a batch of its own. Nil (and
	// 0) when no later run delivered one.
	MaybeInFlight        *Input `json:"maybeInFlight"`
	MaybeInFlightInputs  int    `json:"maybeInFlightInputs"`
	MaybeInFlightOutputs int64  `json:"maybeInFlightOutputs"`
	// Lag (answer 3): how far the commit was behind processing when the
	// run died. Nil when the recording holds no COMMIT rows (a recording of
	// a format before them, or a feed whose source commits nothing).
	Lag *Lag `json:"commitLag"`
}

// Lag is the distance between the position the source had committed when a
// run died and the last input it processed, per position space: positions
// are compared within their epoch and key (a file's epoch; a Kafka
// partition's, the incarnation of its topic).
type Lag struct {
	// Items: inputs of the run processed past the committed position.
	Items int64 `json:"items"`
	// Bytes: the offset of the last input processed minus the committed
	// offset (for a file, bytes).
	Bytes int64 `json:"bytes"`
	// Committed is the position committed at the crash. When a later run
	// followed (From LagFromRestart) it is where that run resumed: the
	// offset of the input just before the first one it delivered of the
	// same epoch and key (0 when no run holds one), which is exact whatever
	// COMMIT rows the crash cut off. Otherwise (LagFromCommitRow) it is the
	// run's last COMMIT row of the feed, which may be behind: the recorder
	// writes a commit with the next rows, and a crash loses the ones
	// pending. Nil when neither is known (the run committed nothing).
	Committed *Position `json:"committed"`
	From      string    `json:"from"` // LagFromRestart or LagFromCommitRow
	// CommitSeq is the seq, in the crashed run, of the input at the
	// committed position (0: none of the run's inputs).
	CommitSeq int64 `json:"commitSeq"`
	// Rows: the restart's first input (or the COMMIT row), the input at the
	// committed position, the last processed input.
	Rows []Ref `json:"rows"`
	// Keys: when the run processed inputs of several position keys (a
	// Kafka member owning several partitions), the lag of each key, by
	// key, each measured as above from that key's last processed input;
	// Items and Bytes are then their sums, and the fields above those of
	// the key of the run's last processed input. Omitted for one key (a
	// file).
	Keys []KeyLag `json:"keys,omitempty"`
}

// KeyLag is the commit lag of one position key (a Kafka partition).
type KeyLag struct {
	Key string `json:"key"`
	Lag
}

// Where a Lag's committed position comes from.
const (
	LagFromRestart   = "restart"
	LagFromCommitRow = "commit-row"
)

// The outcomes of a re-delivered input.
const (
	// OutcomeSkipped: the later run's input emitted no output where the
	// earlier one emitted some: the app found it already applied
	// (core.Delivery.AlreadyApplied) and skipped it.
	OutcomeSkipped = "skipped"
	// OutcomeAppliedAgain: the later run's input emitted outputs: the app
	// applied it again.
	OutcomeAppliedAgain = "applied-again"
	// OutcomeUndetermined: neither run's input emitted an output: the rows
	// do not show whether it was applied.
	OutcomeUndetermined = "undetermined"
)

// Redelivery is an input delivered again by a later run.
type Redelivery struct {
	Position Position `json:"position"`
	Earlier  Input    `json:"earlier"` // the first run's input at that position
	Again    Input    `json:"again"`
	Outcome  string   `json:"outcome"` // OutcomeSkipped, OutcomeAppliedAgain or OutcomeUndetermined
	// MovedBack, when not nil, is the CONTROL row of a recorded move back
	// (a seek whose after is below its before) of the feed, in the
	// earlier run or a run after it, to an input before this position in
	// its position space: the operator lowered the commit below it, and
	// the later run delivers it again for that reason, not because a
	// crash left it uncommitted.
	MovedBack *Ref `json:"movedBack,omitempty"`
}

// Duplicate is an output emitted again for one input by a later run: the
// k-th output of the later run's input, paired with the k-th output of the
// earlier run's input at the same position.
type Duplicate struct {
	Position Position `json:"position"`
	Sink     string   `json:"sink"`
	K        int64    `json:"k"`
	Payload  string   `json:"payload"` // the later run's output
	// Same: both runs emitted the same bytes (false: the same input gave
	// another output the second time, e.g. a balance applied twice).
	Same    bool `json:"same"`
	Earlier *Ref `json:"earlier"` // nil when the earlier input had fewer outputs
	Again   Ref  `json:"again"`
	// NotDelivered: both runs delivered through an outbox: the later
	// output was recorded, never delivered (Answers.NotAgain).
	NotDelivered bool `json:"notDelivered,omitempty"`
}

// The kinds of Loss.
const (
	LossDropped      = "dropped"                       // a DROPPED row: items lost before they reached the processor
	LossSource       = "lost"                          // a LOST row: input the feed's source lost (an oversized line, a file gone unread, records deleted by retention)
	LossFailed       = "failed"                        // a FAILED row: an input (or its completion) that failed
	LossReleasedHeld = "released-processed"            // a CONTROL row of a release or a forward seek that took processed items still holding the commit (its processed count)
	LossInNoRun      = "in-no-run"                     // inputs a source committed (or a pointer or state moved past) with no row in any run
	LossLatched      = "latched"                       // a binding LATCHED (its last STATE row of the run) and never cleared: it lost what its policy promised to keep
	LossTorn         = string(store.ProblemTorn)       // "torn": the torn last line of the last run
	LossUnfinish     = string(store.ProblemUnfinished) // "unfinished": a stream of the last run without END (it did not stop cleanly)
	// Other losses are named after the integrity problem that shows them
	// (store.ProblemKind: gap, orphan, malformed, missing-journal,
	// missing-stream, unreadable).
)

// Loss is something a run lost, with the rows that show it.
type Loss struct {
	// Kind is one of the Loss constants (LossDropped ...), or the kind of
	// the integrity problem that shows the loss (store.ProblemKind).
	Kind string `json:"kind"`
	Run  int    `json:"run"`
	// Count is the number of items lost when the rows say it (a DROPPED
	// row's n, the seqs missing), 0 when they do not.
	Count  int64  `json:"count"`
	Detail string `json:"detail"`
	Rows   []Ref  `json:"rows"`
}

// OnDisk compares the files on disk now with the recordings.
type OnDisk struct {
	Feed string `json:"feed"`
	// Pointer is the committed position the pointer file holds; nil: no
	// pointer file given.
	Pointer *Position `json:"pointer,omitempty"`
	// PointerInput is the input the pointer names (the last one of that
	// epoch and offset across the runs); nil when no run processed an input
	// there (the pointer is then a loss, unless it is 0).
	PointerInput *Input `json:"pointerInput,omitempty"`
	// State is what the app's durable state holds; nil: no state given.
	State *State `json:"state,omitempty"`
	// StateInput is the input the state names as its last applied one.
	StateInput *Input `json:"stateInput,omitempty"`
}

// State is an app's durable state (core.DurableState) as Findings shows it.
type State struct {
	Applied  int64    `json:"applied"`
	Position Position `json:"position"`
}
