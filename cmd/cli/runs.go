package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/pgstore"
)

// runEntry is a run as `blackbox runs` lists it: what the database says
// of it (pgstore.Run) and its integrity problems.
type runEntry struct {
	pgstore.Run
	// Clean: ended by its writer with no integrity problem.
	Clean    bool `json:"clean"`
	Problems int  `json:"problems"`
	// Unreadable is why the run could not be read ("" when it was): its
	// problems are then unknown, and it is not clean.
	Unreadable string `json:"unreadable,omitempty"`
}

// runsReport is the JSON of `blackbox runs`.
type runsReport struct {
	Runs   []runEntry `json:"runs"`
	Pruned []string   `json:"pruned,omitempty"`
}

func (c *CLI) runsCmd() *cobra.Command {
	var (
		asJSON bool
		prune  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "runs DATABASE",
		Short: "List (or prune) the runs of a PostgreSQL store",
		Long: `List the runs a PostgreSQL database holds (DATABASE: a postgres:// or
postgresql:// URL; a run= in it is ignored): each run's id, member, feeds,
group, when it started, whether it ended (its writer closed it: no means
killed, or still writing), whether it is being written now, its input rows
and its integrity problems (verify's; a run is clean when it ended with
none). Open a run with the URL and run=ID: blackbox verify
'postgres://...?run=ID'.

--prune OLDER_THAN (a duration: 720h) deletes, in one transaction, every
run that started longer ago than that, with its rows; it deletes nothing,
and fails, while one of them is being written. The runs left are listed.

Exit: 0 listed (and pruned); 2 a usage or database error, or a prune
refused.`,
		Args: exactArgs("DATABASE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db := args[0]
			if !isURL(db) {
				return usagef("DATABASE %s is not a postgres:// URL", db)
			}
			if cmd.Flags().Changed("prune") && prune <= 0 {
				return usagef("--prune must be positive, got %s", prune)
			}
			ctx := cmd.Context()
			var rep runsReport
			if prune > 0 {
				pruned, err := pgstore.Prune(ctx, db, c.now().Add(-prune))
				if err != nil {
					return fmt.Errorf("runs --prune %s: %w", prune, err)
				}
				rep.Pruned = pruned
			}
			runs, err := pgstore.Runs(ctx, db)
			if err != nil {
				return fmt.Errorf("runs %s: %w", pgstore.Redact(db), err)
			}
			rep.Runs = make([]runEntry, 0, len(runs))
			for _, r := range runs {
				rep.Runs = append(rep.Runs, examineRun(db, r))
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return WriteJSON(out, rep)
			}
			return rep.writeText(out)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runs as JSON")
	cmd.Flags().DurationVar(&prune, "prune", 0, "delete the runs that started longer ago than `OLDER_THAN` (refused while one is being written)")
	return cmd
}

// now is the CLI's clock's time (the system's by default).
func (c *CLI) now() time.Time {
	if c.clock != nil {
		return c.clock.Now()
	}
	return time.Now()
}

// examineRun reads run r of the database db for its problems.
func examineRun(db string, r pgstore.Run) runEntry {
	e := runEntry{Run: r}
	u, err := pgstore.WithRun(db, r.ID)
	var rec *store.Recording
	if err == nil {
		rec, err = store.Open(u)
	}
	if err != nil {
		e.Unreadable = err.Error()
		return e
	}
	defer rec.Close()
	ps := rec.Problems()
	e.Problems = len(ps)
	for _, p := range ps {
		if p.Kind == store.ProblemUnreadable {
			e.Unreadable = p.Detail
		}
	}
	e.Clean = !r.Ended.IsZero() && len(ps) == 0
	return e
}

func (rep runsReport) writeText(w io.Writer) error {
	for _, id := range rep.Pruned {
		fmt.Fprintf(w, "pruned %s\n", id)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tMEMBER\tFEED\tGROUP\tSTARTED\tENDED\tWRITING\tINPUTS\tPROBLEMS\tCLEAN")
	for _, r := range rep.Runs {
		ended := "no"
		if !r.Ended.IsZero() {
			ended = store.FormatInstant(r.Ended)
		}
		problems := fmt.Sprint(r.Problems)
		if r.Unreadable != "" {
			problems = "unreadable"
		}
		feeds := strings.Join(r.Feeds, ",")
		if feeds == "" {
			feeds = "-"
		}
		group := r.Group
		if group == "" {
			group = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Member, feeds, group,
			store.FormatInstant(r.Started), ended, yesNo(r.Writing), r.Inputs, problems, yesNo(r.Clean))
	}
	return tw.Flush()
}
