// Package memsource holds in-memory sources for the engine: List and Chan
// publish push items (no position, nothing to commit), and Log is a
// re-readable in-memory log with positions and a committer (its source, a
// LogSource, from Log.Source), so the engine's acknowledgement protocol can
// be exercised without files; Log.GroupSource also keeps each group's own
// progress (engine.GroupCommitter). A LogSource reads again from an earlier
// offset for a backwards seek (engine.Rewinder).
package memsource
