package core

// EffectKey names one output for good: the feed, epoch and position of the
// input that produced it and the output's number among that input's
// outputs (Index, from 1, as the OUTPUT row's seq). An input read again
// after a crash has the same key, so a downstream that sees a key twice
// can drop the second. An output of a cycle without a source position (a
// timer, a push item) has no position: Feed is empty, and Stream and Row
// (the OUTPUT row's processor stream and index) name it within its
// recording (Recording, META's creation instant).
type EffectKey struct {
	Feed     string   `json:"feed,omitempty"`
	Epoch    int64    `json:"epoch"`
	Position Position `json:"position"`
	Index    int64    `json:"index"`
	// Set only for an output without a source position.
	Recording string `json:"recording,omitempty"`
	Stream    string `json:"stream,omitempty"`
	Row       int64  `json:"row,omitempty"`
}

// Effect is one output as an outbox delivers it, once the input that
// produced it is recorded and committed: its key, the processor stream
// that emitted it, the sink name given to Cycle.Emit, and the output as
// the recording holds it (the codec's bytes: compact JSON by default). The
// Payload is valid during the Deliver call only.
type Effect struct {
	Key     EffectKey
	Stream  string
	Sink    string
	Payload []byte
}

// SinkLive names a Sink that gets the outputs live, as they are emitted:
// at least once, possibly before any recording holds them. It is the
// engine's Status.Sink and a recording's META option "sink" for such a run.
const SinkLive = "live"

// EffectSink is a sink that takes part in the outbox (package outbox): it
// is given the outputs only once they are recorded and their inputs
// committed, in batches numbered from 1 without a gap across restarts, in
// processing order per position key, never concurrently. A restart first
// delivers what earlier runs recorded and committed but did not deliver.
// Which outputs it may see twice depends on what it can do (Transactional,
// Idempotent); docs/GUARANTEES.md, "Effects", says it exactly.
type EffectSink interface {
	Deliver(batch int64, effects []Effect) error
}

// Transactional is the capability of an EffectSink that writes each batch
// and its number in one transaction of its own (say, rows of a SQL table
// and the batch number in another, in one transaction): Delivered returns
// the number of the last batch it committed (0: none). A restart asks it
// and delivers again only a batch it does not hold: every output exactly
// once.
type Transactional interface {
	Delivered() (batch int64, err error)
}

// Idempotent is the capability of an EffectSink that drops an output whose
// EffectKey it has seen: the batch a crash interrupted is delivered again
// in full by the restart, and the sink drops what it had. Without
// Transactional or Idempotent an EffectSink may see the outputs of that one
// batch twice; the outbox counts them (Outbox.Status).
type Idempotent interface {
	// Idempotent marks the capability; it is never called.
	Idempotent()
}
