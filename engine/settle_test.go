package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// closed reports whether ch is closed, once every goroutine of the bubble
// is blocked.
func closed(ch <-chan struct{}) bool {
	synctest.Wait()
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Engine.Settled is closed by the change that settles the engine, at the
// moment it happens: no goroutine polls the status (the bubble's clock
// never moves: nothing in the engine waits on a timer), and a change the
// engine did not note would leave the channel open (the test fails), or,
// in WaitSettled, the bubble deadlocked. Each case unsettles the engine,
// checks that Settled stays open, then makes the one change that settles
// it.
func TestSettledIsClosedByTheChangeThatSettlesTheEngine(t *testing.T) {
	type setup struct {
		e         *engine.Engine
		f         *engine.Feed
		turnstile *turnstile
	}
	for _, tc := range []struct {
		name       string
		positioned bool
		groups     []string
		unsettle   func(t *testing.T, s setup)
		settle     func(t *testing.T, s setup)
	}{
		{"a group going idle", false, []string{"g"},
			func(t *testing.T, s setup) { s.f.Publish(context.Background(), 1) },
			func(t *testing.T, s setup) { s.turnstile.let(1) }},
		{"acknowledgements polled", true, []string{"g"},
			func(t *testing.T, s setup) {
				s.turnstile.let(1)
				s.f.Intake().TryPublish(1, core.Position{Offset: 1})
			},
			func(t *testing.T, s setup) { s.f.Intake().PollAcks() }},
		{"a feed's state", false, []string{"g"},
			func(t *testing.T, s setup) { s.f.Intake().SetState(engine.StateBehind, "") },
			func(t *testing.T, s setup) { s.f.Intake().SetState(engine.StateEndOfStream, "") }},
		{"a group unfenced", true, []string{"g"},
			func(t *testing.T, s setup) { s.e.Fence("g") },
			func(t *testing.T, s setup) { s.e.Unfence("g") }},
		{"a group subscribed", true, []string{"g"},
			func(t *testing.T, s setup) { s.e.Unsubscribe("g", "in") },
			func(t *testing.T, s setup) { s.e.Subscribe("g", "in") }},
		{"a holding group unsubscribed", false, []string{"g", "h"},
			func(t *testing.T, s setup) { s.f.Publish(context.Background(), 1) }, // h holds it in its turnstile
			func(t *testing.T, s setup) { s.e.Unsubscribe("h", "in") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				began := time.Now()
				open, held := newTurnstile(true), newTurnstile(false)
				var groups []engine.GroupConfig
				for i, n := range tc.groups {
					g := held
					if i == 0 && len(tc.groups) > 1 {
						g = open
					}
					groups = append(groups, engine.GroupConfig{Name: n, Feeds: []string{"in"}, Processors: procs("p-"+n, g)})
				}
				e := start(t, engine.Config{Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 4}}, Groups: groups})
				t.Cleanup(held.openUp)
				s := setup{e: e, f: e.Feed("in"), turnstile: held}
				if tc.positioned {
					s.f.Intake().SetCommitter(&committer{})
				}
				if !closed(e.Settled()) {
					t.Fatal("not settled at the start")
				}
				tc.unsettle(t, s)
				ch := e.Settled()
				if closed(ch) {
					t.Fatalf("settled after the change that unsettles it: %+v", e.Status())
				}
				tc.settle(t, s)
				if !closed(ch) {
					t.Fatalf("Settled still open after the change that settles it: %+v", e.Status())
				}
				if st, err := e.WaitSettled(context.Background()); err != nil || !st.Settled {
					t.Fatalf("WaitSettled: settled %v, err %v", st.Settled, err)
				}
				if d := time.Since(began); d != 0 {
					t.Fatalf("the bubble's clock moved %s: something waited on a timer", d)
				}
			})
		})
	}
}
