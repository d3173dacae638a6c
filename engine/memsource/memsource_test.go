package memsource_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
)

type collector struct {
	mu      sync.Mutex
	got     []any
	stop    int // stop handling (block) after this many, 0 = never
	hold    chan struct{}
	blocked chan struct{} // when not nil, closed as the collector first blocks
	once    sync.Once
}

func (c *collector) OnEvent(_ *core.Cycle, ev any) error {
	c.mu.Lock()
	n := len(c.got)
	c.mu.Unlock()
	if c.stop > 0 && n >= c.stop {
		if c.blocked != nil {
			c.once.Do(func() { close(c.blocked) })
		}
		<-c.hold
	}
	c.mu.Lock()
	c.got = append(c.got, ev)
	c.mu.Unlock()
	return nil
}

func (c *collector) items() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]any(nil), c.got...)
}

func run(t *testing.T, src engine.Source, p core.Processor, pol engine.Policy) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, Policy: pol, QueueSize: 4}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: p}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// waitSettled fails the test unless e settles (engine.WaitSettled) within
// 10 s of the bubble's clock.
func waitSettled(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err := e.WaitSettled(ctx); err != nil {
		t.Fatalf("not settled: %v, status %+v", err, st)
	}
}

func TestListPublishesEveryItemThenEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &collector{}
		e := run(t, memsource.NewList(1, 2, 3), c, engine.BlockWithDeadline(time.Second))
		waitSettled(t, e)
		e.Stop(context.Background())
		if got := c.items(); len(got) != 3 || got[0] != 1 || got[2] != 3 {
			t.Fatalf("got %v", got)
		}
		if st := e.Status().Feeds[0]; st.State != engine.StateEndOfStream || !st.Bounded {
			t.Fatalf("state %s bounded %v", st.State, st.Bounded)
		}
	})
}

func TestChanPublishesUntilClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan any)
		c := &collector{}
		e := run(t, memsource.NewChan(ch), c, engine.BlockWithDeadline(time.Second))
		ch <- "a"
		ch <- "b"
		close(ch)
		waitSettled(t, e)
		e.Stop(context.Background())
		if got := c.items(); len(got) != 2 || got[1] != "b" {
			t.Fatalf("got %v", got)
		}
	})
}

func TestARestartedLogResumesAtItsCommittedOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog()
		for i := 1; i <= 10; i++ {
			log.Append(i)
		}
		log.Close()
		// Run 1 handles 4 items and is stopped while blocked on the fifth.
		c1 := &collector{stop: 4, hold: make(chan struct{}), blocked: make(chan struct{})}
		e1, err := engine.New(engine.Config{DrainTimeout: 50 * time.Millisecond,
			Feeds:  []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 4}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: c1}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		e1.Start(context.Background())
		select {
		case <-c1.blocked: // 4 handled, blocked on the fifth
		case <-time.After(10 * time.Second):
			t.Fatalf("handled %d items, never blocked on the fifth", len(c1.items()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		e1.Stop(ctx) // the blocked group does not stop in time: reported, not committed
		cancel()
		close(c1.hold)
		if got := log.Committed(); got != 4 {
			t.Fatalf("committed %d after 4 processed, want 4", got)
		}
		// Run 2 resumes at 4: items 5..10, nothing lost.
		c2 := &collector{}
		e2 := run(t, log.Source(), c2, engine.Pause())
		waitSettled(t, e2)
		e2.Stop(context.Background())
		got := c2.items()
		if len(got) != 6 || got[0] != 5 || got[5] != 10 || log.Committed() != 10 {
			t.Fatalf("run 2 got %v committed %d", got, log.Committed())
		}
	})
}

func TestRunSettledRunsABoundedJobToItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &collector{}
		e, err := engine.New(engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Source: memsource.NewList(1, 2, 3), Policy: engine.BlockWithDeadline(time.Second), QueueSize: 2}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: c}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := e.RunSettled(ctx)
		if err != nil || !st.Settled || len(c.items()) != 3 {
			t.Fatalf("status %+v err %v items %v: want settled with 3 items", st, err, c.items())
		}
		if err := e.Feed("in").Publish(ctx, 4); !errors.Is(err, engine.ErrStopped) {
			t.Fatalf("publish after RunSettled: %v, want ErrStopped", err)
		}
	})
}
