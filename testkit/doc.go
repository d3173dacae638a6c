// Package testkit is for the tests of a user's own processor: what each of
// them would otherwise write again (a manual clock, a capturing sink, a
// wait for the timers, a fake recording) over the public API.
//
//   - Clock: a clock that stands still until the test moves it (Advance).
//   - Sink: a core.Sink that keeps every output under its processor and sink
//     names, for assertions per sink.
//   - Start: a recorded run of one app, to memory: Send items, Idle (wait
//     until every item sent was handled and every timer due fired), Advance
//     the timer clock (its timers due fire), Stop (the recording). The clocks
//     are deterministic, so two runs of the same items give the same rows.
//   - ReplaysIdentical: replay a recording and fail the test unless it is
//     identical, complete and lossless.
//   - Golden: check (or with update, re-record first) a folder of golden
//     cases of the app (package golden).
//
// A run's goroutines are the engine's: Run.Stop stops them, and Start
// registers a stop with t.Cleanup for a test that fails first. Nothing
// waits on the wall clock: Idle waits on the engine's own notifications
// (engine.Engine.When).
package testkit
