package engine_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/cockroachdb/datadriven"
)

// TestCommitScenarios runs the commit scenarios in testdata/commit/: each
// drives one engine with a positioned feed "in" (the transcript is its
// source, with a recording committer) in a synctest bubble, and prints
// what the source commits and what the feed reports. `go test ./engine
// -run TestCommitScenarios -rewrite` regenerates the expected output after
// a deliberate change: read the diff.
//
// Commands (g names a group; each group has one turnstile processor, closed
// unless listed in open):
//
//	engine groups=(a,b) [open=(a)] [queue=64]   start the engine
//	publish from=1 to=10   TryPublish items from..to at offsets from..to, as a source would (PollAcks when paused)
//	try-publish at=6       one TryPublish: prints whether it was taken
//	try-batch from=4 to=5  one TryPublishBatch: prints how many it took
//	let g=a n=3            let n items through g's turnstile
//	open g=a               open g's turnstile for good
//	handled g=a            how many items g handled, once every goroutine is blocked
//	commit                 poll acknowledgements until nothing moves: prints the committed offset, and fails on
//	                       acknowledgements out of order
//	fence g=a, unfence g=a, subscribe g=a, unsubscribe g=a   the Engine's
//	status                 the feed's status: consumers, stalled, settled, lossless
func TestCommitScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/commit", func(t *testing.T, path string) {
		synctest.Test(t, func(t *testing.T) {
			var (
				e     *engine.Engine
				f     *engine.Feed
				c     *committer
				gates map[string]*turnstile
			)
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				str := func(key string) string {
					var v string
					d.ScanArgs(t, key, &v)
					return v
				}
				num := func(key string) int {
					var v int
					d.ScanArgs(t, key, &v)
					return v
				}
				gateOf := func() *turnstile {
					g := gates[str("g")]
					if g == nil {
						d.Fatalf(t, "no group %q", str("g"))
					}
					return g
				}
				if d.Cmd != "engine" && e == nil {
					d.Fatalf(t, "%s before engine", d.Cmd)
				}
				switch d.Cmd {
				case "engine":
					var names, open []string
					d.ScanArgs(t, "groups", &names)
					if d.HasArg("open") {
						d.ScanArgs(t, "open", &open)
					}
					queue := 64
					if d.HasArg("queue") {
						queue = num("queue")
					}
					gates = map[string]*turnstile{}
					for _, n := range names {
						gates[n] = newTurnstile(slices.Contains(open, n))
					}
					e, f, c = positioned(t, engine.Pause(), queue, gates, names...)
					return "started\n"
				case "publish":
					publishAll(t, f, num("from"), num("to"))
					return fmt.Sprintf("published %d..%d\n", num("from"), num("to"))
				case "try-publish":
					at := num("at")
					return fmt.Sprintf("taken %v\n", f.Intake().TryPublish(at, core.Position{Offset: int64(at)}))
				case "try-batch":
					var items []any
					var pos []core.Position
					for i := num("from"); i <= num("to"); i++ {
						items, pos = append(items, i), append(pos, core.Position{Offset: int64(i)})
					}
					return fmt.Sprintf("taken %d\n", f.Intake().TryPublishBatch(items, pos))
				case "let":
					gateOf().let(num("n"))
					return ""
				case "open":
					gateOf().openUp()
					return ""
				case "handled":
					synctest.Wait()
					return fmt.Sprintf("%d\n", gateOf().count())
				case "commit":
					return commitNow(t, f, c)
				case "fence", "unfence", "subscribe", "unsubscribe":
					op := map[string]func() error{
						"fence":       func() error { return e.Fence(str("g")) },
						"unfence":     func() error { return e.Unfence(str("g")) },
						"subscribe":   func() error { return e.Subscribe(str("g"), "in") },
						"unsubscribe": func() error { return e.Unsubscribe(str("g"), "in") },
					}[d.Cmd]
					if err := op(); err != nil {
						return fmt.Sprintf("error: %v\n", err)
					}
					return ""
				case "status":
					synctest.Wait()
					st := f.Status()
					stalled := "no"
					if st.Stalled != nil {
						stalled = *st.Stalled
					}
					return fmt.Sprintf("consumers %d, stalled: %s, settled %v, lossless %v\n", st.Consumers, stalled, st.Settled, st.Lossless)
				}
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			})
		})
	})
}

// commitNow polls acknowledgements once every goroutine is blocked (the
// groups did all they could), then again, and reports the committed offset;
// an acknowledgement out of order fails the test.
func commitNow(t *testing.T, f *engine.Feed, c *committer) string {
	t.Helper()
	for range 2 {
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
	}
	c.mu.Lock()
	acked := slices.Clone(c.acked)
	c.mu.Unlock()
	for i := 1; i < len(acked); i++ {
		if acked[i] <= acked[i-1] {
			t.Fatalf("acknowledgements out of order: %v", acked)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "committed %d\n", c.Committed())
	return b.String()
}
