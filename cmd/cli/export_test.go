package cli

import "io"

// WithOutWriter wraps the writer of a run's --out file (tests make writes
// fail).
func WithOutWriter(wrap func(io.Writer) io.Writer) Option {
	return func(c *CLI) { c.outWriter = wrap }
}

// AppNames lists the CLI's apps, sorted.
func (c *CLI) AppNames() []string { return c.appNames() }
