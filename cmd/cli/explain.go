package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/store"
)

func (c *CLI) explainCmd() *cobra.Command {
	var (
		pointer, state, app, feed string
		asJSON                    bool
	)
	cmd := &cobra.Command{
		Use:   "explain RECORDING[,RECORDING...]",
		Short: "Say what a crash did: last input processed, in flight, commit lag, re-delivered, lost, emitted twice",
		Long: `Read a crashed run and its restarts (a comma-separated list of consecutive
runs, as diff stitches them) and answer, per feed and processor, with the
rows that prove each answer (rRUN STREAM:INDEX):

  1. the last input fully processed before each crash (position, line, time);
  2. what was in flight when it died (inputs whose rows the crash cut,
     journalled items with no row), and the input a later run delivered
     first past it (it may have been in flight);
  3. how far the commit was behind processing at the crash (items, bytes):
     where the restart resumed, else the run's last COMMIT row;
  4. what a restart delivered again, and whether the app skipped it
     (AlreadyApplied: no output) or applied it again;
  5. what was lost: DROPPED, FAILED, LOST (input the source lost), the torn
     or unfinished tail of the last run, index gaps and other integrity
     problems, inputs in no run;
  6. which outputs were emitted twice for one input across the runs.

The runs must be consecutive runs of one source, each given once, in the
order they ran: a file given twice, a recording holding the same rows as
another (a copy), or a run created (META) before the run given before it is
refused (exit 2) before anything is read.

--pointer FILE compares a file source's pointer file on disk now with the
runs, --state FILE the app's durable state (built with option state=FILE;
--app names the app when the recordings hold several; a FILE that does not
exist is the app's empty state, as the app takes it, with a warning). docs/EXPLAIN.md says
how each answer is found.

Exit: 0 nothing was lost and the runs are complete; 2 a usage or I/O error,
or runs that cannot be stitched; 3 something was lost, or the runs are not
complete (a problem no restart explains, as verify, replay and diff say: a
recorded failure, a gap, a row that cannot be read, an unfinished last run).`,
		Args: exactArgs("RECORDING[,RECORDING...]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			rs, files, err := openRuns("RECORDING", args[0])
			if err != nil {
				return err
			}
			defer store.CloseAll(rs)
			recs := make([]incident.Recording, len(rs))
			for i, r := range rs {
				recs[i] = incident.Recording{File: files[i], Reader: r}
			}
			opts := incident.Options{Feed: feed}
			if pointer != "" {
				if err := checkFile(pointer, "pointer", false); err != nil {
					return err
				}
				p, err := filesource.ReadPointer(pointer)
				if err != nil {
					return &fileError{pointer, err}
				}
				at := incident.PositionOf(p.Epoch, p.Position())
				opts.Pointer = &at
			}
			if state != "" {
				if err := checkFile(state, "state", true); err != nil {
					return err
				}
				if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) {
					// As the app takes it (the ledger starts empty): a run
					// that saved no state yet left none.
					fmt.Fprintf(c.stderr, "%s: warning: --state %s does not exist: taken as the empty state the app starts from\n", c.name, state)
				}
				a, err := c.explainApp(app, rs)
				if err != nil {
					return err
				}
				ds, err := apps.DurableStateOf(a, state)
				if err != nil {
					return err
				}
				opts.State = &ds
			}
			f, err := incident.Explain(recs, opts)
			if err != nil {
				return err
			}
			if err := writeReport(cmd.OutOrStdout(), asJSON, f); err != nil {
				return err
			}
			if f.Lost || !f.Complete {
				return exit(ExitIncomplete, nil)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&pointer, "pointer", "", "a file source's pointer file to compare with the runs")
	fl.StringVar(&state, "state", "", "the app's durable state file to compare with the runs")
	fl.StringVar(&app, "app", "", "the app whose state --state is (default: the one app the recordings name)")
	fl.StringVar(&feed, "feed", "", "the feed --pointer and --state describe (default: the one positioned feed)")
	fl.BoolVar(&asJSON, "json", false, "print the answers as JSON")
	return cmd
}

// explainApp is the app --state is read with: --app, or the one app the
// recordings' META rows name.
func (c *CLI) explainApp(name string, rs []store.Reader) (core.App, error) {
	if name == "" {
		names := map[string]bool{}
		for _, r := range rs {
			for _, a := range r.Meta().Apps {
				names[a] = true
			}
		}
		if len(names) != 1 {
			return core.App{}, usagef("--state needs --app: the recordings name %d apps (%s)", len(names),
				strings.Join(slices.Sorted(maps.Keys(names)), ", "))
		}
		for n := range names {
			name = n
		}
	}
	a, ok := core.FindApp(c.apps, name)
	if !ok {
		return core.App{}, usagef("unknown app %q (known: %s)", name, core.AppNames(c.apps))
	}
	return a, nil
}
