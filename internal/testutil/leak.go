package testutil

import (
	"bytes"
	"runtime"
	"testing"
	"testing/synctest"
)

// CheckNoLeak fails t when more goroutines than before (a count taken with
// CountGoroutines) are still running once every goroutine of the test's
// synctest bubble is blocked. It must be called inside a synctest bubble.
func CheckNoLeak(t testing.TB, before int) {
	t.Helper()
	synctest.Wait()
	if after, dump := CountGoroutines(); after > before {
		t.Errorf("goroutine leak: %d before, %d after\n%s", before, after, dump)
	}
}

// CountGoroutines counts the goroutines in a stack dump of them all, and
// returns the dump. The dump stops the world and holds the goroutines that
// run or are blocked; runtime.NumGoroutine also counts, for a moment, one
// that has returned but that the runtime has not yet put away, which
// synctest.Wait does not wait for (a leak check saw "4 before, 5 after" and
// a dump of 4).
func CountGoroutines() (int, []byte) {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return 1 + bytes.Count(buf, []byte("\ngoroutine ")), buf
}
