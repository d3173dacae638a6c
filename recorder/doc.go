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
// What it writes (docs/FORMAT.md): META first; per processor START (its
// Snapshot, if any), then for each input either FAILED (its first failed
// attempt, or the first failure of one of its completion callbacks: the input
// is not reproducible) or an optional DELIVERY, an INDEXED or INLINE row and
// its OUTPUT rows; TIMER rows and their outputs; DROPPED rows exactly where
// the engine lost items; END on a clean stop. Journalled items are JOURNAL
// rows; an input whose received copy encodes to the journal's bytes is
// INDEXED (it names the JOURNAL row), otherwise INLINE (it carries its
// payload).
//
// Inputs are copied (encoded) when a processor receives them, before its
// handler runs, so a handler that mutates its input cannot change the
// record. All rows of one item, for every recorded processor of the group,
// are written with one Writer.Append call: one write (CSV) or one
// transaction (SQLite), before the item counts as dispatched and so before
// the source may commit it.
//
// A store failure never stops the live run and never re-dispatches: the
// processors whose rows could not be written stop being recorded (their
// stream has no END, so the recording reads as unfinished), the failure is
// logged once and reported by Err and Broken.
package recorder
