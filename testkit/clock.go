package testkit

import (
	"sync"
	"time"
)

// Clock is a core.Clock that stands still until the test moves it: a
// timer set on it falls due only when Advance (or Set) reaches its due
// instant. Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading start (in UTC) until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{now: start.UTC()} }

// Now is the clock's instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward (a negative d is ignored: a clock does
// not go back).
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t, if t is later than its instant.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t.UTC()
	}
	c.mu.Unlock()
}
