package core

import (
	"sync"
	"time"
)

// Clock is the engine's source of time. It is injected everywhere (engine,
// recorder, replayer, CLI) so that recordings and reports are byte-stable in
// tests. Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

// SystemClock is the wall clock, in UTC.
func SystemClock() Clock { return systemClock{} }

// StepClock is a deterministic clock: the first reading is Start and every
// reading advances it by Step. It is safe for concurrent use.
type StepClock struct {
	mu   sync.Mutex
	next time.Time
	step time.Duration
}

// NewStepClock returns a StepClock starting at start and advancing by step on
// each reading.
func NewStepClock(start time.Time, step time.Duration) *StepClock {
	return &StepClock{next: start.UTC(), step: step}
}

// Now returns the current reading and advances the clock by its step.
func (c *StepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.next
	c.next = c.next.Add(c.step)
	return t
}

// Advance moves the clock forward by d without a reading (golden recording
// moves its timer clock to the next due timer this way).
func (c *StepClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.next = c.next.Add(d)
	c.mu.Unlock()
}
