package cli

import "time"

// WithTopClock gives top a clock: the time of each reading and the wait
// for the next (tests: a clock whose waits return at once).
func WithTopClock(clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}) Option {
	return func(c *CLI) { c.topClock = clock }
}

// WithTerminals says whether stdin and stdout are terminals: ctl asks
// for a confirmation on one, top redraws the screen on the other.
func WithTerminals(stdin, stdout bool) Option {
	return func(c *CLI) { c.stdinTerminal, c.stdoutTerminal = &stdin, &stdout }
}
