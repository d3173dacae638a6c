package cli

import "io"

// WithOutWriter wraps the writer of a run's --out file (tests make writes
// fail).
func WithOutWriter(wrap func(io.Writer) io.Writer) Option {
	return func(c *CLI) { c.outWriter = wrap }
}

// SetTestHook sets the function called at the named points of the
// commands (tests hold a child process there and kill it).
func SetTestHook(f func(point string)) { testHook = f }
