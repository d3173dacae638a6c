package testutil

import (
	"testing"
	"testing/synctest"
	"time"
)

// WhenBlocked fails t unless cond holds once every other goroutine of the
// test's synctest bubble is durably blocked: the code under test has done
// all it can, so cond is checked once, not polled. It must be called inside
// a synctest bubble.
func WhenBlocked(t testing.TB, what string, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatalf("%s: not so once every goroutine is blocked", what)
	}
}

// advanceTimeout is how much of a synctest bubble's fake clock AdvanceUntil
// lets go by before it fails the test.
const advanceTimeout = 15 * time.Second

// AdvanceUntil waits, inside the test's synctest bubble, until cond holds:
// each round lets every goroutine run until it blocks, then lets a
// millisecond of the bubble's fake clock go by (Advance), so that what
// polls (a source tailing a file, which gets no signal when the file grows)
// looks again. It takes no wall time, and fails t once AdvanceTimeout of
// the bubble's time has gone by.
func AdvanceUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(advanceTimeout)
	for synctest.Wait(); !cond(); Advance(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s of the bubble's clock: %s", advanceTimeout, what)
		}
	}
}

// Advance lets d of the synctest bubble's fake clock go by (no wall time),
// then waits until every goroutine of the bubble is blocked: whatever the
// code under test does in d has happened when it returns.
func Advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// PollUntil checks cond every millisecond of the wall clock until it
// holds, failing t after d: for what happens outside any synctest bubble
// (a real network peer, such as an in-process Kafka broker, committing).
func PollUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("not within %s: %s", d, what)
		}
	}
}
