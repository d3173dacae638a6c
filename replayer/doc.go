// Package replayer re-runs the processors of a recording and proves their
// outputs identical to the recorded ones, or shows the first divergence; and
// compares two runs (Diff).
//
// # Replay
//
// Replay takes a store.Reader and the apps (core.App: a name, a constructor
// with options, the decoder of recorded inputs) and finds each recorded
// processor's app by the name META gives. For each recorded processor it
// builds a fresh processor, restores it from its START snapshot, and drives
// a core.Host through the processor's stream:
//
//   - a DELIVERY row is entered for the whole input after it (every
//     reentrant cycle sees it through Cycle.Delivery), so a processor that
//     skips re-delivered positions (core.Delivery.AlreadyApplied) decides
//     as it did live;
//   - INDEXED inputs are read from their JOURNAL row, INLINE ones from the
//     row, and decoded with App.Decode;
//   - the recorded clock readings are played back (Cycle.Now); reading the
//     clock more or fewer times than live is a clock divergence;
//   - completion callbacks run after the input, in order, as live;
//   - outputs are captured (never delivered), encoded with the codec and
//     compared with the OUTPUT rows: byte-equal, or equal once both sides
//     are decoded (go-cmp);
//   - TIMER fires the timer of that number (one the processor never set is
//     a timer divergence); DROPPED is a Loss, and the replay goes on;
//     FAILED stops the processor: the recording is not reproducible past
//     a failed attempt. A FAILED row right after an input's rows (same feed
//     and seq) is the failure of one of its completion callbacks: the
//     input is replayed and compared first, and the stop names the
//     completion. (Recordings written before the input's rows were written
//     ahead of its completions hold that FAILED row instead of the input.)
//
// The Report says whether the replay is Identical (no divergence), Complete
// (no integrity problem, at least one processor stream, every processor
// replayed to its end: a recording of zero streams is never complete) and Lossless
// (no DROPPED row), and per processor the first Divergence with its input,
// its delivery, the recorded and replayed outputs and a readable diff.
// Replay streams: it holds one input and its outputs per processor at a
// time, whatever the recording's length. A recording is read once
// (store.Reader.Streams): every processor is replayed in one pass over the
// streams, which checks the recording as it goes. Outputs are
// compared by their encoded bytes; only when the bytes differ are both sides
// decoded and compared with go-cmp, to tell an encoding difference from a
// divergence and render it. A processor that panics, or a row that cannot be
// resolved or decoded, stops that processor's replay only.
//
// # Diff
//
// Diff aligns two runs per processor by the inputs' source identity (feed,
// key, offset) where deliveries exist, per epoch segment of each key (a
// file's epoch changes with a new file; a Kafka partition's is its topic's
// incarnation, which restarts and rebalances keep) - otherwise by (feed,
// seq), and where
// positions disagree by content, as a text diff aligns lines (a line of
// another length is one changed input). It lists the inputs only in A, only
// in B, changed, with different outputs, processed twice (a crashed run and
// its restart stitched together, or a group's members) and processed more
// often than the runs explain (twice in one run, or again in another run
// that had committed it).
// Its verdict is same only when both sides are complete (no integrity
// problem but the missing END of a stitched side's runs before its last)
// and equal; otherwise different, or not complete, and DiffReport.Why says
// why. DiffOptions.Ignore leaves keys such as "at" (a clock reading in the
// outputs) out of the comparison. The streams of a processor's workers
// (core.ParseWorkerStream) are compared as that one processor: a run on one worker
// and a run of the same input on eight compare input by input.
//
// # Errors
//
// Errors returned are usage and I/O errors: ErrUnknownApp, ErrCodec,
// ErrUsage (errors.Is), a store's errors, a cancelled context. Divergences,
// losses and integrity problems are results, in the reports.
package replayer
