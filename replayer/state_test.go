package replayer_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// A STATE row (a loss state change, engine.Observer.LossState) is neither
// an input nor an output of replay: a run whose PAUSE queue latched on a
// downgraded drop replays identical and complete, its inputs counted as
// its input rows, not lossless for its DROPPED row, and diff finds the
// recording the same as itself.
func TestAStateRowIsNeitherAnInputNorAnOutputOfReplay(t *testing.T) {
	m := store.NewMemory()
	synctest.Test(t, func(t *testing.T) {
		rec, err := recorder.New(m, recorder.Options{Clock: core.NewStepClock(t0, time.Second),
			Apps: map[string]string{"p": "echo"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		gate := testutil.NewGate(t)
		p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			if ev == "1" {
				gate.Wait()
			}
			c.Emit("out", ev)
			return nil
		})
		e, err := engine.New(engine.Config{Clock: core.NewStepClock(e0, time.Millisecond),
			Feeds:    []engine.FeedConfig{{Name: "in", Policy: engine.Pause().WithSpin(0), QueueSize: 1}},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: p}}}},
			Observer: rec.Observer(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for _, item := range []string{"1", "2", "3"} { // 1 held, 2 queued, 3 dropped: LATCHED
			if err := e.Feed("in").Offer(item); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		gate.Open()
		if _, err := e.WaitSettled(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	})
	r := m.ReadOnly()
	states, inputs := 0, 0
	for _, e := range rows(t, r) {
		switch {
		case e.Kind == store.KindState:
			states++
		case e.Kind.IsInput():
			inputs++
		}
	}
	if states != 1 || inputs != 2 {
		t.Fatalf("%d STATE rows and %d inputs, want 1 (the latch) and 2", states, inputs)
	}
	apps := []core.App{{Name: "echo", New: func(map[string]string) (core.Processor, error) { return echo(), nil }, Decode: recorder.JSON.Decode}}
	rep, err := replayer.Replay(context.Background(), r, apps, replayer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type verdict struct{ Identical, Complete, Lossless bool }
	if got, want := (verdict{rep.Identical, rep.Complete, rep.Lossless}), (verdict{true, true, false}); got != want {
		t.Errorf("replay %+v, want %+v: problems %v", got, want, rep.Problems)
	}
	if pr := rep.Processors[0]; pr.Inputs != 2 || pr.Outputs != 2 {
		t.Errorf("replayed %d inputs and %d outputs, want 2 and 2", pr.Inputs, pr.Outputs)
	}
	d, err := replayer.Diff(context.Background(), []store.Reader{r}, []store.Reader{r}, replayer.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Same {
		t.Errorf("diff of the recording with itself: not the same: %+v", d)
	}
}
