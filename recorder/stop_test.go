package recorder_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// hourly sets a timer due an hour after each item (on the timer clock) and
// emits the item again when it fires.
type hourly struct{ items map[int]any }

func (p *hourly) OnEvent(c *core.Cycle, ev any) error {
	p.items[c.After(time.Hour)] = ev
	return nil
}

func (p *hourly) OnTimer(c *core.Cycle, n int) error {
	c.Emit("out", p.items[n])
	return nil
}

// TestStopFiresTheTimersDueWhenItIsCalled: a run settled with a timer set
// per item, the timer clock (moved by the test only) then moved past all of
// them, then Stop at once: each fires during Stop's drain and is recorded
// (a TIMER row and its OUTPUT), on one worker and on three. A timer not
// due when Stop is called does not fire. In a synctest bubble: Stop comes
// before the parked group looks at the clock again.
func TestStopFiresTheTimersDueWhenItIsCalled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		advance time.Duration
		want    int // TIMER rows
	}{
		{"one worker, all due", 1, 2 * time.Hour, 5},
		{"three workers, all due", 3, 2 * time.Hour, 5},
		{"none due", 1, 30 * time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 0)
				app := core.App{Name: "hourly", KeyFor: func(map[string]string) (func(any) string, error) {
					return func(item any) string { return item.(string) }, nil
				}}
				w := &fakeWriter{}
				run, err := recorder.Start(context.Background(), recorder.RunConfig{
					Store:      w,
					Logger:     slog.New(slog.DiscardHandler),
					Feed:       engine.FeedConfig{Name: "in", Source: memsource.NewList("a", "b", "c", "d", "e"), Policy: engine.Pause(), QueueSize: 8},
					Processors: []recorder.Processor{{Name: "hourly", App: app, Processor: &hourly{items: map[int]any{}}, New: func() (core.Processor, error) { return &hourly{items: map[int]any{}}, nil }}},
					Workers:    tc.workers,
					TimerClock: clock,
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := run.Wait(context.Background(), recorder.WaitConfig{}); err != nil {
					t.Fatal(err)
				}
				clock.Advance(tc.advance)
				if stopErr, recErr := run.Stop(context.Background()); stopErr != nil || recErr != nil {
					t.Fatal(stopErr, recErr)
				}
				timers, outs := 0, 0
				for _, e := range w.rows() {
					switch e.Kind {
					case store.KindTimer:
						timers++
					case store.KindOutput:
						outs++
					}
				}
				if timers != tc.want || outs != tc.want {
					t.Errorf("%d TIMER rows and %d OUTPUT rows, want %d of each", timers, outs, tc.want)
				}
				if ps := problems(w.rows()); len(ps) > 0 {
					t.Errorf("problems: %v", ps)
				}
			})
		})
	}
}
