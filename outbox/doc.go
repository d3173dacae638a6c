// Package outbox delivers the outputs of a recorded run to a sink only
// once the recording holds them and the source committed the inputs that
// produced them, and remembers in a marks file what it delivered, so that
// a restart delivers first what earlier runs recorded and committed but did
// not deliver, and nothing twice. It is what `blackbox run --out FILE`
// appends FILE with (its marks in FILE.outbox).
//
// # What it guarantees
//
// An output leaves only once it is recorded and its input committed: an
// output no recording holds is never delivered (a live core.Sink, given
// outputs as they are emitted, may see such outputs after a crash). Each
// output is delivered once per source position, with what the sink can do
// (docs/GUARANTEES.md, "Effects", says it exactly):
//
//   - a *File (the outbox's own sink: one line per output, appended) and
//     a core.Transactional sink: exactly once, across crashes;
//   - a core.Idempotent sink: the batch a crash interrupted is delivered
//     again in full, and the sink drops the outputs whose core.EffectKey it
//     holds;
//   - any other core.EffectSink: at least once; only the outputs of the
//     batch a crash interrupted may be delivered twice, and Status.Again
//     counts them exactly.
//
// Batches are numbered from 1 without a gap across restarts, and an
// output's batch follows those of the outputs recorded before it of the
// same processor stream and input key (a file, a Kafka partition): in
// processing order per key. Outputs of cycles without a source position (a
// timer, a pushed item) and of a feed whose source commits nothing are
// delivered once recorded.
//
// # Lifecycle
//
//	file, err := outbox.OpenFile("out.jsonl", outbox.FormatValue, false)
//	box, err := outbox.Open(outbox.Config{Marks: "out.jsonl.outbox", Sink: file})
//	// Open recovered: earlier runs' outputs are delivered.
//	run, err := recorder.Start(ctx, recorder.RunConfig{..., Outbox: box, Path: "run.csv"})
//	... run.Wait, run.Stop, close the store ...
//	err = box.Close() // after the recorder's Close: the last commits are in
//	file.Close()
//
// Open recovers before anything runs: it finishes the batch a crash
// interrupted (the file sink appends what of it the file lacks; a
// core.Transactional sink gets it again only if Delivered says it lacks
// it; any other sink gets it again), delivers every output the runs its
// marks name recorded whole and did not deliver, then rewrites the marks
// file as a header alone. recorder.Start calls Begin (RunConfig.Outbox, with
// RunConfig.Path naming the recording for the next recovery) and wires
// Written (recorder.Options.Written: the rows written) and Observer
// (engine.Observer.Committed: what the source committed) into the run. One
// goroutine of the outbox delivers, from Begin to Close. A delivery that
// fails (a full disk) fails the outbox: Failed is closed, Err says why, and
// the run should stop (recorder.WaitConfig.Stop): what was not delivered is
// recorded and committed, and the next run's Open delivers it first.
//
// Open refuses, before delivering anything, marks written for another kind
// of sink or line format (ErrMarks), or that cannot be read (a
// *MarksError naming the line; a torn last line, the write a crash cut, is
// dropped); a recording the marks need that is gone or was replaced by
// another (ErrRecording); and a file sink's file that does not hold what the
// marks say was written to it: shorter, longer, or other bytes (ErrOut).
//
// # Suppression
//
// A run may record an input, its outputs with it, and stop before its
// source commits it (a crash; a ledger with --state that applied it). The
// next Open delivers those outputs from the recording, which is the record
// of what was done, and keeps the input's position (feed, key, epoch,
// offset) in the marks' header: the next run reads the input again and
// delivers none of that input's outputs (Status.Suppressed counts them).
// A position is forgotten once the commit a run marked last covers it, and
// not by a commit made before a backwards seek (which lowers the source's
// commit: the lines after its target are read again; a recovery reads the
// seek's CONTROL row, a live run is told by its Observer's Acted and keeps
// its marks at Close). Exactly
// once is per
// source position: a source reset (a new epoch) or a Kafka partition
// processed by another member with another outbox delivers again.
//
// # Sinks
//
// File is the outbox's own sink: lines of FormatValue (the output) or
// FormatEnvelope ({"key":KEY,"output":VALUE}, KEY its core.EffectKey);
// the marks hold its size before each batch, so recovery appends exactly
// what a crash cut. Its lines are JSON: a batch holding an output that is
// not one line of JSON (a custom codec's) is refused whole (ErrPayload),
// live and at recovery. The recorder's JSON codec's outputs are by
// construction (Run.CompactJSON) and are not checked again live; those
// recovery reads back from a recording always are. A sink of the caller's is a core.EffectSink, with the
// capabilities core.Transactional (it commits each batch with its number,
// say a SQL table and a watermark in one transaction) or core.Idempotent.
//
// The marks file's format is a public contract (docs/FORMAT.md, "The
// outbox's marks"). With Config.Durable each mark, the recording it
// follows and each file batch are made durable (fsync) before the next
// step, and the guarantees hold across a power loss; without it (as
// `blackbox run` runs) they hold across a crash of the process (SIGKILL).
package outbox
