package cli

import (
	"io"
	"strings"

	"github.com/blackbox-audit/blackbox/core"
)

// WithOutWriter wraps the writer of a run's --out file (tests make writes
// fail).
func WithOutWriter(wrap func(io.Writer) io.Writer) Option {
	return func(c *CLI) { c.outWriter = wrap }
}

// WithoutCommitRows makes run record no COMMIT rows: when a source commits
// depends on the timing of the run, and a transcript's outputs (row counts,
// lines) must not.
func WithoutCommitRows() Option { return func(c *CLI) { c.noCommits = true } }

// AppNames lists the CLI's apps, sorted.
func (c *CLI) AppNames() []string { return strings.Split(core.AppNames(c.apps), ", ") }
