package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// TestTimerSetReportsEachTimerWithItsDueTimeOnTheTimerClock: Observer.TimerSet
// is called, through Then, for every Cycle.After with the processor, the
// timer's number and its due time: the timer clock's reading plus the delay.
func TestTimerSetReportsEachTimerWithItsDueTimeOnTheTimerClock(t *testing.T) {
	type set struct {
		processor string
		n         int
		due       time.Time
	}
	start := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	first, second := make(chan set, 4), make(chan set, 4)
	obs := func(ch chan set) engine.Observer {
		return engine.Observer{TimerSet: func(p string, n int, due time.Time) { ch <- set{p, n, due} }}
	}
	p := timerProc(func(c *core.Cycle, _ any) error {
		c.After(time.Hour)
		c.After(0)
		return nil
	})
	e, err := engine.New(engine.Config{Logger: testutil.Logger(t), TimerClock: core.NewStepClock(start, 0),
		Feeds:    []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
		Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}},
		Observer: obs(first).Then(obs(second))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	if err := e.Feed("in").Publish(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	want := []set{{"p", 1, start.Add(time.Hour)}, {"p", 2, start}}
	for _, ch := range []chan set{first, second} {
		got := []set{<-ch, <-ch}
		if !slices.Equal(got, want) {
			t.Errorf("TimerSet got %v, want %v", got, want)
		}
	}
}

// timerProc is a processor whose timers do nothing.
type timerProc func(c *core.Cycle, ev any) error

func (f timerProc) OnEvent(c *core.Cycle, ev any) error { return f(c, ev) }
func (timerProc) OnTimer(*core.Cycle, int) error        { return nil }
