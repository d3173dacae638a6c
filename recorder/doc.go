// Package recorder is RECORD mode: an engine observer that writes everything
// a processor saw and did to a recording (a store.Writer), so the replayer
// can re-run the processor and prove its outputs identical.
//
// A Recorder is wired into an engine through two values:
//
//	rec, err := recorder.New(w, recorder.Options{Apps: map[string]string{"ledger": "ledger"}})
//	cfg.Observer = rec.Observer()               // every processor's stream
//	cfg.Feeds[i].Journal = rec.Journal()        // optional: journalled feeds
//	... engine run, engine.Stop ...
//	err = rec.Close()                           // then close w (the caller owns it)
//
// Start does all of that for one recorded run (engine + source + recorder,
// the store left to the caller): it is what `blackbox run` and golden
// recordings use. With several workers (RunConfig.Workers) each worker's
// instance of a processor is recorded as a stream of its own, named
// core.WorkerStream(processor, worker), its app named in META.
//
// What it writes (docs/FORMAT.md): META first, with the START row (its
// Snapshot, if any) of every stream META lists, in the first Append, so that
// a recording appears whole or not at all (New writes nothing; see New);
// per processor, after START, for each input either FAILED (its first failed
// attempt: the input is not reproducible) or an optional DELIVERY, an
// INDEXED or INLINE row and its OUTPUT rows, followed by a FAILED row when
// one of its completion callbacks then fails (its first failure); TIMER rows
// and their outputs; DROPPED rows exactly where the engine lost items;
// COMPLETED rows where a restart did not hand the group items it completed
// in an earlier run (engine.Observer.AlreadyCompleted); END
// on a clean stop or a kill (its detail lists the journalled items left
// unprocessed, and says why a killed run was killed: store.End). Journalled
// items are JOURNAL
// rows; an input whose received copy encodes to the journal's bytes is
// INDEXED (it names the JOURNAL row), otherwise INLINE (it carries its
// payload).
//
// Inputs are copied (encoded) when a processor receives them, before its
// handler runs, so a handler that mutates its input cannot change the
// record. The rows of one item, for every recorded processor of the group,
// are staged in the engine's BeforeComplete hook (after every processor of
// the group handled it) in the group's batch, with the TIMER and DROPPED
// rows in their place; the engine's Flush hook writes the batch with one
// Writer.Append call: one write (CSV) or one transaction (SQLite) for all
// the items the group handled together (group commit: up to core.MaxBatch
// items of one queue, a worker's chunk, or FlushBytes of rows). The engine
// flushes before an item's completion callbacks run and before the items
// count as dispatched: the recording is written ahead of the effects an
// app makes durable in its completions (a state save), so an applied input
// is always in some recording; and before the source may commit an item.
// A journal writes the items a source publishes in one batch with one
// Append too.
// docs/FORMAT.md ("Durability") gives the contract.
//
// Each commit of a feed's source (engine.Observer.Committed) becomes a
// COMMIT row (feed, seq, epoch, key, offset; no processor, indexed among
// the META and JOURNAL rows). It is kept pending and appended with the next
// rows the recorder writes anyway, in the same Append, so it always follows
// the rows of the inputs it covers and costs no write of its own; Close
// writes the commits still pending in one last Append.
//
// A recording failure is never silent. When a row cannot be written (the
// writer's Append or Sync fails, a disk is full; a Snapshot fails; a name or
// payload the store cannot hold; the codec fails), that processor's
// recording stops (its stream has no END, so the recording reads as
// unfinished), the failure is logged once and reported by Err and Broken,
// and the hook returns its *BrokenError to the engine, which fails the
// processor's group: the item is not dispatched (its completions do not
// run), the group takes no more items, its feeds commit nothing past the
// last item recorded and report themselves stalled and not lossless, and
// engine.Engine.Err names the error, so a launcher stops the run and a
// restart delivers the items again. A batch that cannot be written fails
// the group at that Flush: none of its items is dispatched. A DROPPED or
// TIMER row no store can hold (a name with a line break, a clock reading
// outside years 0-9999) fails the group at its next item or at Stop.
package recorder
