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

// ExtrasExplained runs crashtest's accounting of the extra --out lines of
// an app without durable state (checkExtrasExplained) over the killed
// runs' and the last run's recordings (stores), the --out line count after
// each kill (outputs) and the extra lines counted (duplicates); it returns
// the failures it finds.
func ExtrasExplained(stores []string, outputs []int64, duplicates int) ([]string, error) {
	s := &crashSetup{}
	rep := &crashReport{Kills: make([]killReport, len(outputs)), Duplicates: duplicates}
	err := s.checkExtrasExplained(rep, stores, outputs)
	return rep.Failures, err
}
