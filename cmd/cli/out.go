package cli

import (
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// guarded wraps a processor for a run: each event and timer cycle first
// sleeps delay (--delay: to watch a run, to test). It keeps the
// processor's Snapshotter and TimerHandler, and hands the engine's
// checkpoints on to a processor that is an core.CheckpointUser (one
// that is not releases them).
func guarded(p core.Processor, delay time.Duration) core.Processor {
	base := guard{p: p, d: delay}
	s, isSnap := p.(core.Snapshotter)
	t, isTimer := p.(core.TimerHandler)
	switch {
	case isSnap && isTimer:
		return struct {
			guard
			core.Snapshotter
			guardTimer
		}{base, s, guardTimer{base, t}}
	case isSnap:
		return struct {
			guard
			core.Snapshotter
		}{base, s}
	case isTimer:
		return struct {
			guard
			guardTimer
		}{base, guardTimer{base, t}}
	}
	return base
}

type guard struct {
	p core.Processor
	d time.Duration
}

// around runs one cycle after the delay.
func (g guard) around(cycle func() error) error {
	if g.d > 0 {
		time.Sleep(g.d)
	}
	return cycle()
}

func (g guard) OnEvent(c *core.Cycle, ev any) error {
	return g.around(func() error { return g.p.OnEvent(c, ev) })
}

// UseCheckpoint hands cp on to the processor, if it saves in batches
// (core.CheckpointUser); else the hold ends at once.
func (g guard) UseCheckpoint(feed string, cp core.Checkpoint) {
	if u, ok := g.p.(core.CheckpointUser); ok {
		u.UseCheckpoint(feed, cp)
		return
	}
	cp.Release()
}

// CloseCheckpoint is the processor's, if it saves in batches.
func (g guard) CloseCheckpoint() error {
	if u, ok := g.p.(core.CheckpointUser); ok {
		return u.CloseCheckpoint()
	}
	return nil
}

type guardTimer struct {
	g guard
	t core.TimerHandler
}

func (t guardTimer) OnTimer(c *core.Cycle, n int) error {
	return t.g.around(func() error { return t.t.OnTimer(c, n) })
}
