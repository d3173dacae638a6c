// Package testutil is test support shared by the _test.go files of many
// packages (engine, its sources, recorder ...): waiting for a condition in
// the three ways the tests need (WhenBlocked, AdvanceUntil, PollUntil), a
// logger writing to the test's output (Logger), a log-capturing handler
// (Logs), a goroutine leak check (CountGoroutines, CheckNoLeak) and a
// one-shot gate (Gate).
//
// It is imported only by tests. It imports nothing of this module: the
// engine's internal tests (package engine) can import it without an import
// cycle.
package testutil
