package testutil_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// TestAdvanceUntilMovesOnlyTheBubblesClock: a condition on the bubble's
// clock comes true by AdvanceUntil moving it, a millisecond a round.
func TestAdvanceUntilMovesOnlyTheBubblesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		testutil.AdvanceUntil(t, "5 ms gone by", func() bool { return time.Since(start) >= 5*time.Millisecond })
		if got := time.Since(start); got != 5*time.Millisecond {
			t.Errorf("the bubble's clock moved %s, want 5ms", got)
		}
	})
}

// TestWhenBlockedSeesWhatABlockedGoroutineDid: WhenBlocked checks once the
// other goroutines of the bubble are blocked, so what they did before
// blocking is seen.
func TestWhenBlockedSeesWhatABlockedGoroutineDid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done, hold := make(chan struct{}), make(chan struct{})
		go func() {
			close(done)
			<-hold
		}()
		testutil.WhenBlocked(t, "done closed", func() bool {
			select {
			case <-done:
				return true
			default:
				return false
			}
		})
		close(hold)
	})
}

// TestLogsKeepsEveryMessage: Logs keeps each record's message, at every
// level.
func TestLogsKeepsEveryMessage(t *testing.T) {
	var l testutil.Logs
	log := l.Logger()
	log.Debug("a debug line")
	log.Warn("a warning", "file", "in.log")
	if got, want := l.Count(), 2; got != want {
		t.Errorf("Count %d, want %d", got, want)
	}
	for _, tc := range []struct {
		sub  string
		want bool
	}{{"debug", true}, {"a warning", true}, {"in.log", false}} {
		if got := l.Has(tc.sub); got != tc.want {
			t.Errorf("Has(%q) = %v, want %v", tc.sub, got, tc.want)
		}
	}
	if got, want := l.String(), "a debug line\na warning"; got != want {
		t.Errorf("String %q, want %q", got, want)
	}
}

// TestAGateHoldsItsWaitersUntilOpened: a waiter goes on once the gate is
// opened, not before; opening twice is harmless.
func TestAGateHoldsItsWaitersUntilOpened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := testutil.NewGate(t)
		passed := make(chan struct{})
		go func() {
			g.Wait()
			close(passed)
		}()
		synctest.Wait()
		select {
		case <-passed:
			t.Fatal("a waiter passed a closed gate")
		default:
		}
		g.Open()
		g.Open()
		synctest.Wait()
		select {
		case <-passed:
		default:
			t.Fatal("a waiter still waits at an open gate")
		}
	})
}

// TestCheckNoLeakCountsAGoroutineStillRunning: a goroutine started after
// the count and still blocked is counted; once it ends, it is not.
func TestCheckNoLeakCountsAGoroutineStillRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before, _ := testutil.CountGoroutines()
		stop := make(chan struct{})
		go func() { <-stop }()
		synctest.Wait()
		if after, _ := testutil.CountGoroutines(); after != before+1 {
			t.Errorf("%d goroutines with one more running, want %d", after, before+1)
		}
		close(stop)
		testutil.CheckNoLeak(t, before)
	})
}
