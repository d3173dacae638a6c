package cli

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/crashtest"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/outbox"
)

// crashtestCmd is `blackbox crashtest`: its flags, crashtest.Run, the
// report printed (the table as it runs, or --json) and the exit code.
func (c *CLI) crashtestCmd() *cobra.Command {
	var (
		cfg    crashtest.Config
		app    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "crashtest",
		Short: "Kill a recorded run K times, restart it, and check nothing was lost or applied twice",
		Long: `Generate N ledger lines in DIR/input.txt and run the app over them cleanly
(a fresh pointer and state, recording to DIR/clean.db). Then run "blackbox run
--read committed --follow --state DIR/crash-state.json --out DIR/crash-out.jsonl"
over the same input as a child process (this same binary), recording run K to
DIR/run-K.db. Kill it with SIGKILL K times at random moments (once --out holds
a random number of lines, seeded by --seed, and the run has created its
recording: --out's outbox appends an output once its input is committed, and a
restart first delivers what the runs before it recorded) and restart it each
time; the last restart runs without --follow and ends once settled. A restart
with nothing left to do (the input committed, or every output in --out) is
killed once it has committed the input: an idle kill, shown "idle". Then check:

  - for an app that exposes its durable state (the ledger): the crashed state
    equals the clean one (effects applied exactly once, the same balances
    and offset);
  - the crashed runs' --out file holds every output of the clean run exactly
    once (compared without the --ignore keys): none missing, no line extra
    (column "dups": the lines after a kill beyond the clean run's count of
    their output), and each of its lines is an OUTPUT row of one of the runs'
    recordings, a row for each line;
  - each restart delivered again (column "again", JSON "redelivered": its
    recorded inputs that an earlier run recorded) at most the lines
    processed before the kill but not committed (column "lag": the inputs
    the runs so far recorded past the pointer);
  - the killed runs' recordings stitched with the last one show no
    difference from the clean recording (every input in some recording, the
    same outputs): "blackbox diff" of the two sides;
  - verify names each killed run's recording unfinished (and torn, for a
    kill inside a CSV write), nothing else; the last and the clean
    recordings are complete. A run killed before it created its recording
    (in its outbox's delivery of what earlier runs left) recorded nothing:
    shown "no recording", it must not have moved the pointer.

crashtest owns DIR/input.txt, DIR/*.ptr, DIR/crash-*, DIR/clean*, DIR/run-*
(and the hidden temporary files a killed run leaves beside them): it removes
them first. It prints a table of the kills and the verdict.

Exit: 0 the guarantees held; 1 they did not; 2 a usage or I/O error.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if app == "" {
				return usagef("crashtest needs --app (known: %s)", core.AppNames(c.apps))
			}
			var err error
			if cfg.App, err = c.app(app); err != nil {
				return err
			}
			if f, err := formatOf("", cfg.Format); err == nil {
				cfg.Format = f // else crashtest.Run refuses it
			}
			cfg.BatchSet = cmd.Flags().Changed("state-every") || cmd.Flags().Changed("state-interval")
			cfg.Record, cfg.Progress = c.cleanRecord, c.progress()
			if !asJSON {
				cfg.Table = cmd.OutOrStdout()
			}
			rep, err := crashtest.Run(cmd.Context(), cfg)
			var ce *crashtest.ConfigError
			if errors.As(err, &ce) {
				return &usageError{err}
			}
			if err != nil {
				return err
			}
			if asJSON {
				if err := WriteJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			}
			if !rep.Holds {
				return exit(ExitDifferent, nil)
			}
			return nil
		},
	}
	defaultApp := ""
	if _, err := c.app(apps.LedgerName); err == nil {
		defaultApp = apps.LedgerName
	}
	crashtestFlags(cmd.Flags(), &cfg, &app, defaultApp, &asJSON)
	return cmd
}

// crashtestFlags binds crashtest's flags to cfg, app and asJSON.
func crashtestFlags(fl *pflag.FlagSet, cfg *crashtest.Config, app *string, defaultApp string, asJSON *bool) {
	fl.StringVar(app, "app", defaultApp, "the app to crash")
	fl.IntVar(&cfg.Lines, "lines", 5000, "how many ledger lines to generate")
	fl.IntVar(&cfg.Kills, "kills", 5, "how many times to kill the run")
	fl.Uint64Var(&cfg.Seed, "seed", 1, "seed of the input and of the kill moments")
	fl.StringVar(&cfg.Dir, "dir", "crashtest-out", "the directory to work in (created if missing)")
	fl.StringVar(&cfg.Format, "format", "sqlite", "the recordings' format: sqlite or csv")
	fl.StringSliceVar(&cfg.Ignore, "ignore", []string{"at"}, "output JSON keys left out of every comparison (clock readings)")
	fl.BoolVar(asJSON, "json", false, "print the report as JSON instead of the table")
	fl.IntVar(&cfg.StateEvery, "state-every", 1, "the runs save the app's state at least every `N` lines (run --state-every; 1: each line, before it is committed)")
	fl.DurationVar(&cfg.StateInterval, "state-interval", apps.DefaultSaveInterval, "the runs save lines processed since the last save within this `DURATION` (run --state-interval)")
	fl.IntVar(&cfg.Workers, "workers", 1, "run the crashed runs on `N` key-ordered workers (an input without transfers; compared with a clean run on one worker and one on N)")
	// Tests only: kill each run at the N-th reach of a named point of the
	// write path (internal/killpoint), N random.
	fl.StringVar(&cfg.KillAt, "kill-at", "", "kill each run at a random reach of this point ("+strings.Join(crashtest.RunKillPoints, ", ")+")")
	_ = fl.MarkHidden("kill-at")
}

// cleanRecord records crashtest's clean run in this process (record).
func (c *CLI) cleanRecord(ctx context.Context, r crashtest.CleanRun) (crashtest.CleanResult, error) {
	rc := recordConfig{app: r.App, input: r.Input, store: r.Store, format: r.Format, read: filesource.Committed,
		pointer: r.Pointer, out: r.Out, outFormat: outbox.FormatValue, policy: engine.Pause(), queue: 1024, state: r.State,
		stateEvery: r.StateEvery, stateInterval: r.StateInterval, workers: r.Workers, order: r.Order}
	res, err := c.record(ctx, rc)
	if err != nil {
		return crashtest.CleanResult{}, err
	}
	return crashtest.CleanResult{Settled: res.Status.Settled, Lossless: res.Status.Lossless, Recorded: res.Recorded}, nil
}
