package filesource

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// stateApply applies deliveries as an application with durable state does:
// it keeps the position of the last delivery applied and skips one it
// already holds (core.Delivery.AlreadyApplied). It returns the lines
// applied and the last position.
func stateApply(last core.Delivery, lines []string, ds []core.Delivery) ([]string, core.Delivery) {
	var applied []string
	for i, d := range ds {
		if d.AlreadyApplied(last.Epoch, last.Position) {
			continue
		}
		applied = append(applied, lines[i])
		last = d
	}
	return applied, last
}

// A file rotated while one group still processes its lines: the source
// publishes no line of the new file until the old file's lines are
// committed and the pointer describes the new file. Without that, a group
// that went on into the new file saved a state under the new file's epoch
// while the pointer still described the old file; a crash then had the
// restart deliver the old file's uncommitted lines (under the old epoch)
// and the new file's (under an epoch of its own), and the state, keyed by
// the last epoch and offset it applied, took them for new lines: each line
// applied twice. Here the crash comes at every moment after the rotation
// a run may be killed at, and every line is applied exactly once.
func TestARestartAfterARotationNeverAppliesALineTwiceToAState(t *testing.T) {
	for _, wait := range []int{1, 3, 20} { // milliseconds of the bubble's clock between the rotation and the crash
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rot := startRotation(t, numbered("old", 0, 4), linesOf("old", 2, 3)[0], Options{})
				for range wait {
					testutil.Advance(time.Millisecond)
				}
				rot.crashAndRestart(t)
			})
		})
	}
}

// A file rotated after its last line was skipped as oversized (a loss with
// no line of the file after it): the pointer moves to the next file at the
// end of the last line published, not past the skipped bytes, which no
// acknowledgement covers, and only with an acknowledgement of the next
// file's own (which every stream has after the loss's LOST row). Before,
// the source held the next file's lines until the skipped bytes were
// acknowledged, for ever (torture seed 1796203583458952951, invariant 7).
// Meanwhile the pointer file's pending header holds the next file's epoch:
// a restart reads the old file's unacknowledged lines again, counts the
// loss again, and reads the next file under the same epoch, so a state
// never applies a line twice.
func TestARotationAfterAnOversizedLastLineMovesOnAndAppliesEachLineOnce(t *testing.T) {
	oversized := strings.Repeat("x", 40) + "\n"
	opts := Options{MaxLine: lineLen}
	for _, tc := range []struct {
		block string // where the slow group blocks until the crash
		wait  int    // milliseconds of the bubble's clock between the rotation and the crash; -1: no crash
	}{
		{"old-0000002", -1}, {"old-0000002", 1}, {"old-0000002", 20},
		// The old file's lines committed, the new file's published and not:
		// the pending header's epoch is the one a restart reads it under.
		{"new-0000000", -1}, {"new-0000000", 1}, {"new-0000000", 3}, {"new-0000000", 20},
	} {
		wait := tc.wait
		t.Run(fmt.Sprintf("%s/wait=%d", tc.block, wait), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rot := startRotation(t, numbered("old", 0, 4)+oversized, tc.block, opts)
				if wait < 0 {
					rot.g.Open()
					rot.r.settle(7, rot.slow, rot.fast)
					fi, err := os.Stat(rot.path)
					if err != nil {
						t.Fatal(err)
					}
					testutil.AdvanceUntil(t, "the pointer at the new file's end", func() bool {
						p := readPointer(t, rot.path+".ptr")
						return p.Identity == identity(fi) && p.Offset == 3*lineLen
					})
					if got := rot.r.feed().Losses[LossOversized]; got != 1 {
						t.Fatalf("losses %v: want one oversized line", rot.r.feed().Losses)
					}
					return
				}
				for range wait {
					testutil.Advance(time.Millisecond)
				}
				rot.crashAndRestart(t)
			})
		})
	}
}

// rotation is a run of two groups, slow and fast, on a file rotated while
// slow is blocked (startRotation).
type rotation struct {
	path       string
	opts       Options
	r          *run
	g          *testutil.Gate // opened, slow goes on
	slow, fast *rec
}

// startRotation starts a run with opts on a file of content, which begins
// with old-0..3, and two groups: slow, blocked at line block until g
// opens, and fast. Once fast has old-0..3 and the feed caught up, it
// renames the file to path-0001 and writes new-0..2 at path.
func startRotation(t *testing.T, content, block string, opts Options) *rotation {
	t.Helper()
	rot := &rotation{path: input(t, content), opts: opts, g: testutil.NewGate(t), fast: &rec{}}
	rot.slow = &rec{gate: blockAt(block, rot.g)}
	rot.r = start(t, rot.path, opts, setup{procs: []*rec{rot.slow, rot.fast}})
	testutil.AdvanceUntil(t, "the old lines through the fast group", func() bool {
		return rot.fast.count() == 4 && rot.r.feed().State == engine.StateCaughtUp
	})
	if err := os.Rename(rot.path, rot.path+"-0001"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, rot.path, numbered("new", 0, 3))
	return rot
}

// crashAndRestart kills the run as a crash would (nothing more processed
// or committed: the pointer file as it is now; the slow group blocked),
// restarts on the same path and options, and checks that a state applying
// the fast group's deliveries, then the restart's, applies each of
// old-0..3 and new-0..2 once (stateApply).
func (rot *rotation) crashAndRestart(t *testing.T) {
	t.Helper()
	ptr := rot.path + ".ptr"
	snapshot, err := os.ReadFile(ptr)
	if err != nil {
		t.Fatal(err)
	}
	rot.slow.ignore.Store(true)
	rot.fast.ignore.Store(true)
	rot.g.Open()
	rot.r.stop()
	if err := os.WriteFile(ptr, snapshot, 0o644); err != nil {
		t.Fatal(err)
	}
	lines, ds := rot.fast.got()
	first, last := stateApply(core.Delivery{}, lines, ds)

	again := &rec{}
	r2 := start(t, rot.path, rot.opts, setup{procs: []*rec{again}})
	testutil.AdvanceUntil(t, "the restart settled", func() bool {
		st := r2.e.Status()
		return st.Settled && r2.feed().State == engine.StateCaughtUp && again.count() >= 2
	})
	r2.stop()
	lines2, ds2 := again.got()
	second, _ := stateApply(last, lines2, ds2)
	got := slices.Concat(first, second)
	if want := slices.Concat(linesOf("old", 0, 4), linesOf("new", 0, 3)); !slices.Equal(got, want) {
		t.Fatalf("lines applied %q, want each once: %q\n(the restart delivered %q at %+v)", got, want, lines2, ds2)
	}
}
