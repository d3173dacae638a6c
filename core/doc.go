// Package core is what a processor author writes against: the Processor
// interface and its optional capabilities (TimerHandler, Snapshotter), the
// Cycle a processor is handed for each event, the Delivery describing where
// the item came from, Completion callbacks, and the Clock every reading of
// time goes through.
//
// Host is the deterministic heart the rest of blackbox drives: it runs one
// processor's cycles for an input or a timer (and every reentrant cycle
// they queue) and returns a Trace of what happened: outputs, clock readings,
// completions and the error. It owns no goroutine and reads no wall time of
// its own. The engine wraps one Host per processor in a group goroutine;
// the replayer drives a Host directly with a playback clock, so a recording
// replays through exactly the code that ran live.
//
// An application registers its processor as an App (name, constructor with
// options, decoder of recorded inputs); recorder, replayer, golden and the
// CLI all find it by that name.
//
// Running processors (feeds, groups, overload policies, commits) is the
// engine package's job; reading sources is the job of engine's source
// packages. Nothing here is about either.
package core
