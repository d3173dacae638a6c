package engine_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// TestAZeroOrForeignMarkDoesNotReleaseAHold: a Mark is opaque (its count
// cannot be edited), the zero Mark releases nothing, and a Mark of another
// group's checkpoint releases neither this checkpoint's hold nor, through
// this checkpoint, its own.
func TestAZeroOrForeignMarkDoesNotReleaseAHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates := map[string]*turnstile{"g": newTurnstile(true), "h": newTurnstile(true)}
		e, f, c := positioned(t, engine.Pause(), 64, gates, "g", "h")
		cpG, err := e.Hold("in", "g")
		if err != nil {
			t.Fatal(err)
		}
		cpH, err := e.Hold("in", "h")
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, f, 1, 3)
		testutil.WhenBlocked(t, "3 dispatched by both", func() bool {
			st := f.Status()
			return st.Subscribers[0].Dispatched == 3 && st.Subscribers[1].Dispatched == 3
		})
		cpG.DurableThrough(core.Mark{})
		cpH.DurableThrough(core.Mark{})
		settleCommit(t, f, c, 0)

		markH := cpH.Mark()
		cpG.DurableThrough(markH) // h's mark given to g's checkpoint: ignored
		cpG.DurableThrough(cpG.Mark())
		settleCommit(t, f, c, 0) // h is still held at nothing durable

		cpH.DurableThrough(markH) // the mark on its own checkpoint releases it
		settleCommit(t, f, c, 3)
	})
}

// keyed is a completion whose identity is its key; runs counts its runs by
// label.
type keyed struct {
	label string
	key   any
	runs  *runCount
}

type runCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (k keyed) Complete(*core.Delivery) error {
	k.runs.mu.Lock()
	k.runs.n[k.label]++
	k.runs.mu.Unlock()
	return nil
}

// TestOneRuleDeduplicatesCompletionsInAProcessorAndAcrossItsGroup: a
// completion registered twice by one processor, or by two processors of a
// group, runs once when it is equal by ==; a value that == cannot compare
// (here a struct holding a slice in an interface field) is never the same
// as another and comparing it does not panic: both registrations run, and
// the item does not fail.
func TestOneRuleDeduplicatesCompletionsInAProcessorAndAcrossItsGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := &runCount{n: map[string]int{}}
		done := make(chan struct{})
		failed := make(chan error, 4)
		register := func(c *core.Cycle) {
			c.OnComplete(keyed{"comparable", "k", runs})
			c.OnComplete(keyed{"comparable", "k", runs})
			c.OnComplete(keyed{"not comparable", []int{1}, runs})
			c.OnComplete(keyed{"not comparable", []int{1}, runs})
		}
		a := core.ProcessorFunc(func(c *core.Cycle, _ any) error { register(c); return nil })
		b := core.ProcessorFunc(func(c *core.Cycle, _ any) error {
			register(c)
			c.OnComplete(core.CompletionFunc(func(*core.Delivery) error { close(done); return nil }))
			return nil
		})
		e := start(t, engine.Config{
			Observer: engine.Observer{Failed: func(_ string, _ *engine.Input, err error) { failed <- err }},
			Feeds:    []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("a", a, "b", b)}}})
		f := e.Feed("in")
		f.Intake().SetCommitter(&committer{})
		publishAll(t, f, 1, 1)
		select {
		case <-done:
		case err := <-failed:
			t.Fatalf("the item failed: %v", err)
		}
		runs.mu.Lock()
		defer runs.mu.Unlock()
		want := map[string]int{"comparable": 1, "not comparable": 4}
		for label, n := range want {
			if got := runs.n[label]; got != n {
				t.Errorf("%s completion ran %d times, want %d", label, got, n)
			}
		}
	})
}

// TestAnOlderHoldsHandleNeverEndsOrMovesTheLiveHold: a second Hold of the
// same feed and group replaces the first; the first handle, released (once
// or again) or given a mark, neither ends the live hold nor moves it:
// nothing is committed until the live handle makes its mark durable.
func TestAnOlderHoldsHandleNeverEndsOrMovesTheLiveHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		// older is done with the older handle, after the newer one was taken
		// (released says whether the older was released before that)
		released bool
		older    func(t *testing.T, old *engine.Checkpoint)
	}{
		{"replaced, then released", false, func(t *testing.T, old *engine.Checkpoint) { old.Release() }},
		{"released, replaced, released again", true, func(t *testing.T, old *engine.Checkpoint) { old.Release() }},
		{"replaced, then marked durable", false, func(t *testing.T, old *engine.Checkpoint) {
			if err := old.DurableThrough(old.Mark()); !errors.Is(err, engine.ErrHoldReplaced) {
				t.Fatalf("DurableThrough through the replaced handle = %v, want ErrHoldReplaced", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, f, c := positioned(t, engine.Pause(), 64, map[string]*turnstile{"g": newTurnstile(true)}, "g")
				old, err := e.Hold("in", "g")
				if err != nil {
					t.Fatal(err)
				}
				if tc.released {
					old.Release()
				}
				live, err := e.Hold("in", "g")
				if err != nil {
					t.Fatal(err)
				}
				publishAll(t, f, 1, 3)
				testutil.WhenBlocked(t, "3 dispatched", func() bool { return f.Status().Subscribers[0].Dispatched == 3 })
				tc.older(t, old)
				settleCommit(t, f, c, 0) // the live hold holds at nothing durable
				if err := live.DurableThrough(live.Mark()); err != nil {
					t.Fatal(err)
				}
				settleCommit(t, f, c, 3)
				live.Release()
			})
		})
	}
}
