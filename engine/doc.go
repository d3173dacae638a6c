// Package engine is blackbox's delivery engine: feeds read from sources and
// number their items, fan each out to one bounded queue per subscribing
// group, and the groups (one goroutine each) hand each item to their
// processors with at-least-once delivery, completion callbacks, retries,
// honest loss accounting and a commit protocol that never lets a source
// commit an item before every queue it was offered to has processed it.
//
// The deterministic core is Host: it runs one processor's cycles for an
// input or a timer and returns a Trace. Groups wrap Hosts in a goroutine; the
// replayer drives a Host directly with a playback clock.
//
// Outputs a processor emits with Cycle.Emit(sink, out) reach Config.Sink live
// as Write(processor, sink, out), on the processor's group goroutine, so they
// can be routed by processor and sink name.
//
// Contexts: Start's ctx only decides whether to start (a done ctx starts
// nothing); Stop's ctx bounds the stop. Cycle.Context is cancelled by Stop
// once the drain is over, so a processor waiting on it lets Stop return.
// From a cycle, publish with Cycle.Publish: it never waits. No function
// takes a nil context (ErrNilContext).
//
// docs/GUARANTEES.md says what an application can rely on.
package engine
