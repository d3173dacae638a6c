package engine_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
)

// committer records what the engine acknowledged and committed.
type committer struct {
	mu        sync.Mutex
	acked     []int64 // offsets, in order
	committed int64
	commits   int
}

func (c *committer) Acknowledged(_, _ int64, pos engine.Position) {
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

// gate is a processor that records what it handles and, while closed,
// blocks each item until the test lets it through.
type gate struct {
	mu      sync.Mutex
	seen    []any
	entered int
	tokens  chan struct{}
	open    bool
}

func newGate(open bool) *gate { return &gate{tokens: make(chan struct{}, 1<<20), open: open} }

func (g *gate) OnEvent(c *engine.Cycle, ev any) error {
	g.mu.Lock()
	open := g.open
	g.entered++
	g.mu.Unlock()
	if !open {
		<-g.tokens
	}
	g.mu.Lock()
	g.seen = append(g.seen, ev)
	g.mu.Unlock()
	return nil
}

// let lets n items through.
func (g *gate) let(n int) {
	for i := 0; i < n; i++ {
		g.tokens <- struct{}{}
	}
}

func (g *gate) openUp() {
	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
	g.let(1 << 10)
}

func (g *gate) enteredCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.entered
}

func (g *gate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.seen)
}

func (g *gate) items() []any {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]any(nil), g.seen...)
}

// eventually polls cond until it holds or 10s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// testLogger logs to the test's output.
func testLogger(t testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// start builds and starts an engine, stopping it (and checking that no
// goroutine leaks) when the test ends.
func start(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	before := runtime.NumGoroutine()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
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
		if err := e.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		noLeak(t, before)
	})
	return e
}

// noLeak fails the test when goroutines started since before are still
// running shortly after.
func noLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func procs(ps ...any) []engine.ProcessorConfig {
	var out []engine.ProcessorConfig
	for i := 0; i < len(ps); i += 2 {
		out = append(out, engine.ProcessorConfig{Name: ps[i].(string), Processor: ps[i+1].(engine.Processor)})
	}
	return out
}

// publishAll offers items at offsets 1..n with TryPublish, retrying while the
// feed pauses, polling acknowledgements as a source would.
func publishAll(t *testing.T, f *engine.Feed, from, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i := from; i <= n; {
		if f.TryPublish(i, engine.Position{Offset: int64(i)}) {
			i++
			continue
		}
		if _, err := f.PollAcks(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish of %d paused for too long", i)
		}
		time.Sleep(50 * time.Microsecond)
	}
}
