package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/golden"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// replayVerdict maps a replay report to its exit: 1 a divergence, 3
// identical but not complete or not lossless.
func replayVerdict(rep *replayer.Report) error {
	switch {
	case !rep.Identical:
		return exit(ExitDifferent, nil)
	case !rep.Complete || !rep.Lossless:
		return exit(ExitIncomplete, nil)
	}
	return nil
}

// replayErr makes a replay error name the recording; an unknown app is a
// usage error naming the apps this binary knows.
func (c *CLI) replayErr(path string, err error) error {
	if errors.Is(err, replayer.ErrUnknownApp) {
		return usagef("%s: %v", path, err)
	}
	return storeErr(path, err)
}

func (c *CLI) replayCmd() *cobra.Command {
	var (
		app               string
		asJSON, keepGoing bool
		options           []string
	)
	cmd := &cobra.Command{
		Use:   "replay STORE",
		Short: "Re-run a recording's processors and prove their outputs identical",
		Long: `Re-run every recorded processor from the recording (each built from the app
named in the recording's META, or --app) and compare its outputs with the
recorded ones. Reports per processor the inputs replayed, the outputs
compared, the first divergence with its diff, every loss and problem; and
the operator actions the recording holds (its CONTROL rows: who, when,
what, why, the positions before and after), which are shown, not replayed.

Each processor is built with the options its run was made with, which the
recording holds (a recording of an earlier version holds none). --option
APP:KEY=VALUE overrides one of them, or adds one, for one app's constructor
(KEY=VALUE: for the --app, or for every app); the report names each
override. Never give one pointing at live side effects (a state file).

Exit: 0 identical, complete and lossless; 1 a divergence; 2 a usage or I/O
error (an unknown app, not a recording); 3 identical but not complete or
not lossless.`,
		Args: exactArgs("STORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if app != "" {
				if _, err := c.app(app); err != nil {
					return err
				}
			}
			appOpts, err := c.appOptions(options, app)
			if err != nil {
				return err
			}
			r, _, err := openStore(args[0])
			if err != nil {
				return err
			}
			defer r.Close()
			p := c.progress()
			rep, err := replayer.Replay(cmd.Context(), r, c.apps, replayer.Options{
				KeepGoing: keepGoing, App: app, AppOptions: appOpts,
				Progress: func(proc string, n int64) { p.Printf("replaying %s: %d inputs", proc, n) },
			})
			p.Done()
			if err != nil {
				return c.replayErr(args[0], err)
			}
			controls, err := controlsOf(r)
			if err != nil {
				return storeErr(args[0], err)
			}
			if err := writeReport(cmd.OutOrStdout(), asJSON, replayReport{Report: rep, Controls: controls}); err != nil {
				return err
			}
			return replayVerdict(rep)
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "replay every processor with this app (default: the apps named in the recording)")
	f.StringArrayVar(&options, "option", nil, "an option of an app, `[APP:]KEY=VALUE` (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&keepGoing, "keep-going", false, "go on past a processor's first divergence and report every one")
	return cmd
}

func (c *CLI) diffCmd() *cobra.Command {
	var (
		asJSON bool
		ignore []string
	)
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare the outputs of two recordings input by input",
		Long: `Compare two recordings per processor, aligned by source identity where
deliveries exist - (feed, key, offset) within each epoch segment of a key
(a Kafka partition's epoch is its topic's incarnation: a restarted or
rebalanced run aligns with a clean one; a file's changes with a new file) -
otherwise by (feed, seq), and where
positions disagree by content, as a text diff aligns lines: inputs only in
A (removed), only in B (inserted), changed, in both with different
outputs, processed twice (once per run of a stitched side, where a run did
not commit it), and processed more often than the runs explain (twice in
one run, or again after a run that committed it). A and B may each be a
comma-separated list of consecutive runs to stitch together (a crashed run
and its restarts), each run given once, in the order they ran (a file given
twice, a copy of a run, or a run created before the run given before it is
refused), or a consumer group's runs in a PostgreSQL store
(postgres://...?group=G): its members, which ran at the same time, where an
input processed by two members is explained when at most one of them
committed it (a partition moved by a rebalance or a member's death).
A processor run on workers (streams NAME#w0, NAME#w1 ...) is compared as the
one processor NAME, its workers' inputs merged. A side is complete as verify
says (a recorded failure, a seq a COMMIT row covers with no row, a gap ...
make it not complete), but for the missing END and torn tail of a run
followed by its restart.

Exit: 0 both sides complete and the same; 1 a difference; 2 a usage or I/O
error; 3 a side not complete (an integrity problem other than the missing
END of a run followed by its restart, or a last run without END).`,
		Args: exactArgs("A", "B"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, _, err := openRuns("A", args[0])
			if err != nil {
				return err
			}
			defer store.CloseAll(a)
			b, _, err := openRuns("B", args[1])
			if err != nil {
				return err
			}
			defer store.CloseAll(b)
			opts := replayer.DiffOptions{Ignore: ignoreKeys(ignore), Concurrent: [2]bool{isGroup(args[0]), isGroup(args[1])}}
			d, err := replayer.Diff(cmd.Context(), a, b, opts)
			if err != nil {
				return fmt.Errorf("diff %s %s: %w", args[0], args[1], err)
			}
			if err := writeReport(cmd.OutOrStdout(), asJSON, d); err != nil {
				return err
			}
			switch d.Verdict {
			case replayer.DiffSame:
				return nil
			case replayer.DiffDifferent:
				return exit(ExitDifferent, nil)
			}
			return exit(ExitIncomplete, nil)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the differences as JSON")
	f.StringSliceVar(&ignore, "ignore", nil, `JSON keys ignored when comparing outputs, comma-separated (e.g. "at")`)
	return cmd
}

func (c *CLI) goldenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "golden",
		Short: "Check or update a folder of golden recordings",
		Long: `A folder of golden cases: each an input and the recording of the built-in (or
registered) apps over it. check replays every case and fails when any output
changed; update re-records every case.`,
		Args: noArgs,
		RunE: helpOnly,
	}
	check := &cobra.Command{
		Use:   "check DIR",
		Short: "Replay every golden case and report any change",
		Long: `Replay every golden case of DIR against the current code. A case whose
recordings an interrupted update replaced only in part (it holds
.golden-update-ready) fails.

Exit: 0 every case identical; 1 a case changed; 2 a usage or I/O error.`,
		Args: exactArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkDir(args[0]); err != nil {
				return err
			}
			ok, report, err := golden.Verify(args[0], c.apps...)
			if err != nil {
				return storeErr(args[0], err)
			}
			fmt.Fprint(cmd.OutOrStdout(), report)
			if report != "" && !strings.HasSuffix(report, "\n") {
				fmt.Fprintln(cmd.OutOrStdout())
			}
			if !ok {
				return exit(ExitDifferent, nil)
			}
			return nil
		},
	}
	update := &cobra.Command{
		Use:   "update DIR",
		Short: "Re-record every golden case",
		Long: `Re-record every golden case of DIR with the current code (review the change
with git diff before committing it).

Each case is recorded into a temporary folder inside it; its recordings
(run1.csv and run2.csv of a restart case) are then replaced together. A
killed update leaves the old recordings (and a temporary folder the next
update removes), or .golden-update-ready, which check reports and the next
update finishes. Two updates of DIR exclude each other.

Exit: 0 done; 2 a usage or I/O error.`,
		Args: exactArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkDir(args[0]); err != nil {
				return err
			}
			if err := golden.Update(args[0], c.apps...); err != nil {
				return storeErr(args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: every golden case re-recorded\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(check, update)
	return cmd
}

// replayReport is replay's report: the replayer's, and the operator
// actions the recording holds, in order. A CONTROL row is no input nor
// output of a processor: replay shows it, and proves nothing of it.
type replayReport struct {
	*replayer.Report
	Controls []incident.ControlAction `json:"controls,omitempty"`
}

// WriteText writes the replayer's report, then the operator actions.
func (r replayReport) WriteText(w io.Writer) error {
	if err := r.Report.WriteText(w); err != nil {
		return err
	}
	if len(r.Controls) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "operator actions: %d (CONTROL rows, not replayed)\n", len(r.Controls))
	for _, c := range r.Controls {
		fmt.Fprintf(&b, "  %s (CONTROL:%d)\n", c.Control(), c.Row.Index)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// controlsOf reads the recording's CONTROL rows, in order: from its rows of
// no stream (Stream("")), which an indexed store reads without the
// streams' rows (the replay read those already: a second pass over every
// row took 42% of a replay from SQLite). A row that cannot be read as one is left to the recording's
// problems, which the report lists.
func controlsOf(r store.Reader) ([]incident.ControlAction, error) {
	var out []incident.ControlAction
	for e, err := range r.Stream("") {
		var p *store.Problem
		switch {
		case errors.As(err, &p):
			continue
		case err != nil:
			return nil, err
		case e.Kind != store.KindControl:
			continue
		}
		c, err := store.ControlOf(e)
		if err != nil {
			continue
		}
		out = append(out, incident.ControlActionOf(c, incident.Ref{Run: 1, Index: e.Index, Kind: store.KindControl}))
	}
	return out, nil
}
