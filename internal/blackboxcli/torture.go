package blackboxcli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/torture"
)

// withTorture adds the torture harness: the command `torture` and its
// app (torture.App, which its scenarios run). The harness runs this
// binary as its child, so a binary built with withTorture must be the one
// running. cmd/blackbox has it.
func withTorture() cli.Option {
	return func(c *cli.CLI) {
		cli.WithApps(torture.App)(c)
		cli.WithCommand(tortureCmd)(c)
	}
}

func tortureCmd(c *cli.CLI) *cobra.Command {
	var (
		cfg           torture.Config
		limits        string
		asJSON, fixed bool
	)
	cmd := &cobra.Command{
		Use:   "torture [--seed S] [--scenarios N | --time D]",
		Short: "Run generated scenarios of runs, kills, faults and operator mistakes, and check every verdict",
		Long: `Generate scenarios from a seed and run each in a directory of its own:
an app (the ledger with --state, alerts, or the harness's own keyed app
with timers and a snapshot), a source (a file that is appended to,
rotated by rename and by copy-and-truncate, in bursts, truncated,
rewritten in place, deleted and created again; or a Kafka topic on an
in-process kfake cluster that gains partitions, loses records to
retention, is deleted, whose broker is stopped and started, with a
second consumer joining and leaving), and a sequence of runs of this
binary, each with flags drawn at random (--workers, --order,
--state-every, --state-interval, --max-gap, CSV or SQLite, --journal,
--follow, --out-format), each ending by itself, by SIGTERM or by SIGKILL
(at a random moment or at a named kill point, the outbox's included),
some meeting a fault (a disk that fills up, a state file that cannot be
written, an output locked by another process, stale locks), a hostile
path, or an operator acting over HTTP on its window (--listen: pause,
resume, clear, release, seek, kill, stale generations and plans, a wrong
token).

An oracle of its own, which knows the input it wrote and reads the
artifacts itself (the input, --out, the state files and the recordings,
through a minimal reader that is not the store package's checker),
checks every scenario:

  1. a line never applied means some run said not lossless and explain
     names a loss;
  2. no line is applied twice by an app with durable state, or the run
     refuses its flags before any work (exit 2);
  3. verify, replay, diff and explain never contradict each other or the
     oracle, and every exit code matches the status printed;
  4. a killed run's recording has at most unfinished, torn or orphan
     problems; a cleanly stopped run's is complete;
  5. nothing a COMMIT row covers is delivered again;
  8. every line of --out is an output a run recorded, there exactly once
     (across the --out files of a Kafka group's members: at least once),
     and --out holds every output the runs recorded;
  9. every control action the window said it did is a CONTROL row with
     the operator, the reason and the positions, and no refused one is;
     a release or a seek is a recorded loss; explain lists the actions.

A failing scenario is shrunk (fewer runs, no faults, no operations, fewer
lines) and printed with the command that reproduces it; its directory is
kept. Scenario i has the seed S+i; --seed defaults to the time.

Exit: 0 every scenario held; 1 a scenario broke an invariant; 2 a usage
or I/O error.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Scenarios <= 0 && cfg.Time <= 0 {
				return cli.UsageError(errors.New("torture needs --scenarios N or --time D"))
			}
			var err error
			if cfg.Limits, err = torture.ParseLimits(limits); err != nil {
				return cli.UsageError(fmt.Errorf("--limit: %v", err))
			}
			if !fixed {
				cfg.Seed = uint64(time.Now().UnixNano())
			}
			if cfg.Binary, err = os.Executable(); err != nil {
				return err
			}
			fmt.Fprintf(c.Stderr(), "torture: seed %d\n", cfg.Seed)
			cfg.Log = c.Stderr()
			rep, err := torture.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				if err := cli.WriteJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				rep.Summary(cmd.OutOrStdout())
			}
			if len(rep.Failures) > 0 {
				return &cli.ExitError{Code: cli.ExitDifferent}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&cfg.Seed, "seed", 0, "the first scenario's seed (default: the time, printed)")
	f.IntVar(&cfg.Scenarios, "scenarios", 0, "how many scenarios to run (with --time: at most)")
	f.DurationVar(&cfg.Time, "time", 0, "run scenarios until this much time has passed")
	f.IntVar(&cfg.Parallel, "parallel", 2, "how many scenarios run at once")
	f.StringVar(&cfg.Dir, "dir", "", "where the scenarios run (default: a temporary directory); a failing one's directory is kept")
	f.BoolVar(&cfg.Keep, "keep", false, "keep every scenario's directory")
	f.StringVar(&limits, "limit", "", "shrink every scenario: runs=N,lines=N,faults=off,ops=off (what a failure's reproduction names)")
	f.StringVar(&cfg.Only.Kind, "kind", "", "only scenarios of this kind: runs, crashtest or engine")
	f.StringVar(&cfg.Only.App, "app", "", "only scenarios of this app: ledger, alerts or "+torture.AppName)
	f.StringVar(&cfg.Only.Source, "source", "", "only scenarios of this source: file or kafka")
	f.BoolVar(&cfg.NoShrink, "no-shrink", false, "report a failing scenario as generated, without shrinking it")
	f.BoolVar(&cfg.Verbose, "verbose", false, "log every scenario: its seed, runs, time and dimensions")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.PreRun = func(cmd *cobra.Command, _ []string) { fixed = cmd.Flags().Changed("seed") }
	return cmd
}
