package filesource

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// lines8 are the eight lines of the kill tests' input, in order.
var lines8 = func() []string {
	var out []string
	for i := 1; i <= 8; i++ {
		out = append(out, numbered("line", i, i+1)[:lineLen-1])
	}
	return out
}()

// handledLines is the lines a run's processors handled, shared by every
// worker's instance; line blocked waits for gate, ignoring its context.
type handledLines struct {
	blocked string
	gate    *testutil.Gate
	mu      sync.Mutex
	lines   []string
}

func (h *handledLines) New() (core.Processor, error) {
	return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		if ev == h.blocked {
			h.gate.Wait()
		}
		h.mu.Lock()
		h.lines = append(h.lines, ev.(string))
		h.mu.Unlock()
		return nil
	}), nil
}

func (h *handledLines) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(slices.Values(h.lines))
}

// killEngine runs path's committed read on 4 unordered workers, MaxGap 3.
func killEngine(t *testing.T, path string, h *handledLines, abandon bool) *engine.Engine {
	t.Helper()
	src, err := New(path, Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 64}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 4, MaxGap: 3, Order: engine.OrderNone,
			Processors: []engine.ProcessorConfig{{Name: "p", New: h.New}}}},
		DrainTimeout: time.Second,
		KillAbandon:  abandon,
		Logger:       testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A kill leaves the pointer at the contiguous prefix of what was
// dispatched, and the restart reads on from it: with line 3 in flight on
// one of four workers, lines 4-6 handled beyond it (MaxGap 3) and 7-8
// queued, a kill abandoning line 3 leaves the pointer after line 2, one
// letting it finish after line 6; never after line 8. The next run on the
// same pointer delivers every line past it, and only those.
func TestAKillLeavesThePointerAtTheContiguousPrefixAndTheRestartReadsOnFromIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		abandon bool
		prefix  int // lines committed by the killed run
	}{{"abandon", true, 2}, {"finish", false, 6}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("line", 1, 9))
				h := &handledLines{blocked: lines8[2], gate: testutil.NewGate(t)}
				e := killEngine(t, path, h, tc.abandon)
				if err := e.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				testutil.AdvanceUntil(t, "lines 1, 2 and 4-6 handled, the pointer after line 2", func() bool {
					return slices.Equal(h.got(), []string{lines8[0], lines8[1], lines8[3], lines8[4], lines8[5]}) &&
						readPointer(t, path+".ptr").Offset == 2*lineLen
				})
				if err := e.Kill("drill"); err != nil {
					t.Fatal(err)
				}
				h.gate.Open() // abandoned, or finishing
				if err := e.Stop(context.Background()); err != nil {
					t.Fatalf("Stop after Kill: %v", err)
				}
				if p := readPointer(t, path+".ptr"); p.Offset != int64(tc.prefix*lineLen) {
					t.Fatalf("after the kill the pointer is at %d, want %d (after line %d)", p.Offset, tc.prefix*lineLen, tc.prefix)
				}
				if st := e.Status(); st.Killed != "drill" || st.Settled || !st.Lossless {
					t.Errorf("status killed %q settled %v lossless %v", st.Killed, st.Settled, st.Lossless)
				}
				h2 := &handledLines{}
				e2 := killEngine(t, path, h2, false)
				if _, err := e2.RunSettled(context.Background()); err != nil {
					t.Fatal(err)
				}
				if got, want := h2.got(), lines8[tc.prefix:]; !slices.Equal(got, want) {
					t.Errorf("the restart handled %q, want every line past the pointer: %q", got, want)
				}
				if p := readPointer(t, path+".ptr"); p.Offset != 8*lineLen {
					t.Errorf("after the restart the pointer is at %d, want the end", p.Offset)
				}
			})
		})
	}
}
