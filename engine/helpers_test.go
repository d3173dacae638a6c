package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// committer records what the engine acknowledged and committed.
type committer struct {
	mu        sync.Mutex
	acked     []int64 // offsets, in order
	committed int64
	commits   int
}

func (c *committer) Acknowledged(_, _ int64, pos core.Position) {
	c.mu.Lock()
	c.acked = append(c.acked, pos.Offset)
	c.mu.Unlock()
}

func (c *committer) Commit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits++
	if n := len(c.acked); n > 0 && c.acked[n-1] > c.committed {
		c.committed = c.acked[n-1]
	}
	return nil
}

func (c *committer) Committed() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed
}

// turnstile is a processor that records what it handles and, while closed,
// lets each item through only on a token the test gives (let); once opened
// (openUp) it lets every item through.
type turnstile struct {
	mu      sync.Mutex
	seen    []any
	entered int
	tokens  chan struct{}
	open    bool
	changed chan struct{} // closed and replaced each time an item is seen
}

func newTurnstile(open bool) *turnstile {
	return &turnstile{tokens: make(chan struct{}, 1<<20), open: open, changed: make(chan struct{})}
}

func (g *turnstile) OnEvent(c *core.Cycle, ev any) error {
	g.mu.Lock()
	open := g.open
	g.entered++
	g.mu.Unlock()
	if !open {
		<-g.tokens
	}
	g.mu.Lock()
	g.seen = append(g.seen, ev)
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	return nil
}

// await reports whether n items have been seen within d, waking on each
// item seen rather than polling.
func (g *turnstile) await(n int, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		g.mu.Lock()
		seen, changed := len(g.seen), g.changed
		g.mu.Unlock()
		if seen >= n {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		}
	}
}

// let lets n items through.
func (g *turnstile) let(n int) {
	for i := 0; i < n; i++ {
		g.tokens <- struct{}{}
	}
}

func (g *turnstile) openUp() {
	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
	g.let(1 << 10)
}

func (g *turnstile) enteredCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.entered
}

func (g *turnstile) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.seen)
}

func (g *turnstile) items() []any {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]any(nil), g.seen...)
}

// start builds and starts an engine, stopping it (and checking that no
// goroutine leaks) when the test ends.
func start(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	return startAllowing(t, cfg)
}

// startAllowing is start for a run whose Stop may return an error wrapping
// one of allowed (a group that may fail: engine.ErrObserver).
func startAllowing(t *testing.T, cfg engine.Config, allowed ...error) *engine.Engine {
	t.Helper()
	before, _ := testutil.CountGoroutines()
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger(t)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil && !slices.ContainsFunc(allowed, func(a error) bool { return errors.Is(err, a) }) {
			t.Errorf("Stop: %v", err)
		}
		testutil.CheckNoLeak(t, before)
	})
	return e
}

func procs(ps ...any) []engine.ProcessorConfig {
	var out []engine.ProcessorConfig
	for i := 0; i < len(ps); i += 2 {
		out = append(out, engine.ProcessorConfig{Name: ps[i].(string), Processor: ps[i+1].(core.Processor)})
	}
	return out
}

// publishAll offers items at offsets from..n with TryPublish, retrying while
// the feed pauses, polling acknowledgements as a source would. A refused
// offer is retried once every other goroutine is blocked (the groups have
// taken what they can); an offer still refused then fails the test.
func publishAll(t *testing.T, f *engine.Feed, from, n int) {
	t.Helper()
	for i, stalled := from, false; i <= n; {
		if f.Intake().TryPublish(i, core.Position{Offset: int64(i)}) {
			i, stalled = i+1, false
			continue
		}
		if stalled {
			t.Fatalf("publish of %d paused with every goroutine blocked", i)
		}
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		stalled = true
	}
}

// heldFeed is feed "in" of e with a committer and group g's processing
// checkpoint on it (Engine.Hold).
func heldFeed(t *testing.T, e *engine.Engine) (*engine.Feed, *committer, *engine.Checkpoint) {
	t.Helper()
	f := e.Feed("in")
	c := &committer{}
	f.Intake().SetCommitter(c)
	cp, err := e.Hold("in", "g")
	if err != nil {
		t.Fatal(err)
	}
	return f, c, cp
}
