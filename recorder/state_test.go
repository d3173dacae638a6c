package recorder_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// Every loss state change of the engine (Observer.LossState) is a STATE
// row of no processor, counted among META, JOURNAL and COMMIT rows: here a
// PAUSE queue that latched on a downgraded drop and an operator cleared,
// and a DROP queue that degraded and was observed UP again at the stop,
// its row at the instant its quiet period ended. The recording is
// complete: verify accepts it.
func TestEveryLossStateChangeIsAStateRowOfNoProcessor(t *testing.T) {
	m := store.NewMemory()
	at := time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC)
	synctest.Test(t, func(t *testing.T) {
		rec, err := recorder.New(m, recorder.Options{Clock: core.NewStepClock(t0, time.Second),
			Apps: map[string]string{"p": "echo", "q": "echo"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		gate := testutil.NewGate(t)
		held := func() core.Processor {
			return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				if ev == 1 {
					gate.Wait()
				}
				c.Emit("out", ev)
				return nil
			})
		}
		clock := core.NewStepClock(at, 0)
		e, err := engine.New(engine.Config{Clock: core.NewStepClock(e0, time.Millisecond), TimerClock: clock,
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause().WithSpin(0), QueueSize: 1,
				Subscribers: map[string]engine.Policy{"d": engine.DropAfterSpin(0)}}},
			Groups: []engine.GroupConfig{
				{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: held()}}},
				{Name: "d", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "q", Processor: held()}}}},
			Observer: rec.Observer(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		f := e.Feed("in")
		for item := 1; item <= 3; item++ { // 1 held, 2 queued, 3 lost by both queues
			if err := f.Offer(item); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		clock.Advance(time.Second)
		if err := e.ClearOverload("in", "g", "operator: p unblocked"); err != nil {
			t.Fatal(err)
		}
		gate.Open()
		if _, err := e.WaitSettled(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	})
	r := m.ReadOnly()
	var got []store.State
	var index []int64
	for e, err := range r.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != store.KindState {
			continue
		}
		st, err := store.StateOf(e)
		if err != nil {
			t.Fatal(err)
		}
		got, index = append(got, st), append(index, e.Index)
	}
	want := []store.State{
		{Feed: "in", Group: "g", From: store.StateUp, To: store.StateLatched,
			Reason: "a PAUSE queue promises no loss: queue g/in full after 0s spin; PAUSE not waited", At: at, Observed: at},
		{Feed: "in", Group: "d", From: store.StateUp, To: store.StateDegraded, Reason: "queue d/in full after 0s spin", At: at, Observed: at},
		{Feed: "in", Group: "g", From: store.StateLatched, To: store.StateUp,
			Reason: engine.ClearedReason + "operator: p unblocked", At: at.Add(time.Second), Observed: at.Add(time.Second)},
		{Feed: "in", Group: "d", From: store.StateDegraded, To: store.StateUp, Reason: "no loss for the quiet period (1m0s)",
			At: at.Add(time.Minute), Observed: at.Add(121 * time.Second)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("STATE rows (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int64{2, 3, 4, 5}, index); d != "" {
		t.Errorf("STATE rows' indexes among the rows of no processor (META is 1) (-want +got):\n%s", d)
	}
	if ps := r.Problems(); len(ps) != 0 {
		t.Errorf("problems %v, want none: verify accepts STATE rows", ps)
	}
}
