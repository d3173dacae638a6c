package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/report"
	"github.com/blackbox-audit/blackbox/store"
)

func (c *CLI) reportCmd() *cobra.Command {
	var (
		out     string
		replay  bool
		options []string
		ignore  []string
	)
	cmd := &cobra.Command{
		Use:   "report RECORDING[,RECORDING...] -o FILE",
		Short: "Write a self-contained HTML report of a crashed run and its restarts",
		Long: `Write one HTML file (inline CSS and SVG, no script, nothing fetched from
anywhere) that shows a crashed run and its restarts, given in the order they
ran as diff and explain stitch them: at the top the six answers of explain
(the last input processed before each crash, what was in flight, the commit
lag, what the restart delivered again, what was lost, the outputs emitted
twice); then per processor stream a timeline of the runs side by side (its
inputs, outputs, commits, drops and failures counted in at most 120 bars
whatever the recording's length, a mark at each crash and restart); then a
table per run with its integrity problems.

--replay also replays each run (each processor built from the app its
recording names) and marks and lists every first divergence.
--ignore KEY,... leaves JSON keys out when an output a restart emitted again
is compared with the first ("different the second time"), as diff's: a
clock reading such as the built-in apps' "at" differs every run.
--option APP:KEY=VALUE gives an option to one app's constructor (KEY=VALUE:
to every app), as replay's.

The runs must be consecutive runs of one source, each given once, in the
order they ran: a file given twice, a recording holding the same rows as
another (a copy), or a run created (META) before the run given before it is
refused (exit 2) before anything is written.

The file is written whole or not at all, and holds no time but the
recordings' own: the same recordings give the same bytes.

Exit: 0 nothing was lost and the runs are complete (and, with --replay,
every run replayed identical); 1 a replay diverged; 2 a usage or I/O error,
or runs that cannot be stitched; 3 something was lost or the runs are not
complete (as explain says).`,
		Args: exactArgs("RECORDING[,RECORDING...]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("report wants -o FILE, the HTML file to write")
			}
			if len(options) > 0 && !replay {
				return usagef("--option is given to the apps --replay builds: it needs --replay")
			}
			appOpts, err := c.appOptions(options, "")
			if err != nil {
				return err
			}
			list := args[0]
			paths, release, err := reportPaths(out, list)
			if err != nil {
				return err
			}
			defer release()
			readers, _, err := openRuns("RECORDING", list)
			if err != nil {
				return err
			}
			defer store.CloseAll(readers)
			recs := make([]incident.Recording, len(readers))
			runs := make([]report.Run, len(readers))
			for i, r := range readers {
				recs[i] = incident.Recording{File: paths[i+1].path, Reader: r}
				runs[i] = report.Run{Name: paths[i+1].path, Reader: r}
			}
			f, err := incident.Explain(recs, incident.Options{Ignore: ignoreKeys(ignore)})
			if err != nil {
				return err
			}
			opts := report.Options{Findings: f}
			identical := true
			if replay {
				if opts.Replays, identical, err = c.replayRuns(cmd.Context(), runs, appOpts); err != nil {
					return err
				}
			}
			p := c.progress()
			opts.Progress = func(run int, rows int64) { p.Printf("reading run %d: %d rows", run, rows) }
			rep, err := report.Build(cmd.Context(), runs, opts)
			p.Done()
			if err != nil {
				return err
			}
			if err := writeFileAtomic(out, rep.WriteHTML); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %s, %s: %s\n", out, count(int64(len(runs)), "run"),
				crashCount(f), count(int64(len(rep.Timelines)), "timeline"), reportVerdict(f, replay, identical))
			switch {
			case !identical:
				return exit(ExitDifferent, nil)
			case f.Lost || !f.Complete:
				return exit(ExitIncomplete, nil)
			}
			return nil
		},
	}
	reportFlags(cmd.Flags(), &out, &replay, &options, &ignore)
	return cmd
}

// reportFlags binds report's flags.
func reportFlags(fl *pflag.FlagSet, out *string, replay *bool, options, ignore *[]string) {
	fl.StringVarP(out, "output", "o", "", "the HTML `FILE` to write (replaced whole)")
	fl.BoolVar(replay, "replay", false, "replay each run and mark its divergences")
	fl.StringArrayVar(options, "option", nil, "an option of an app for --replay, `[APP:]KEY=VALUE` (repeatable)")
	fl.StringSliceVar(ignore, "ignore", nil, `JSON keys ignored when an output emitted twice is compared with the first, comma-separated (e.g. "at"), as diff's`)
}

// ignoreKeys are the keys of --ignore flags, blanks left out.
func ignoreKeys(flags []string) []string {
	var keys []string
	for _, k := range flags {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// reportPaths checks report's -o FILE against the recordings of list (no
// two name one file, FILE can be written and is no recording) and locks
// it; paths are -o's, then each recording's.
func reportPaths(out, list string) (paths []pathArg, release func(), err error) {
	paths = []pathArg{{flag: "-o", path: out, write: true}}
	for _, p := range strings.Split(list, ",") {
		paths = append(paths, pathArg{flag: "RECORDING", path: strings.TrimSpace(p)})
	}
	if err := checkDistinct(paths); err != nil {
		return nil, nil, err
	}
	if err := checkWritable(paths[0], "an HTML file"); err != nil {
		return nil, nil, err
	}
	if looksLikeRecording(out) {
		return nil, nil, &fileError{out, fmt.Errorf("-o: %w: refusing to write over it", store.ErrHoldsRecording)}
	}
	release, err = lockOutputs(paths[:1])
	if err != nil {
		return nil, nil, err
	}
	return paths, release, nil
}

// replayRuns replays each run (report --replay); identical is whether
// every replay was.
func (c *CLI) replayRuns(ctx context.Context, runs []report.Run, appOpts map[string]map[string]string) (reps []*replayer.Report, identical bool, err error) {
	p := c.progress()
	defer p.Done()
	identical = true
	for i, r := range runs {
		rep, err := replayer.Replay(ctx, r.Reader, c.apps, replayer.Options{AppOptions: appOpts,
			Progress: func(proc string, n int64) { p.Printf("replaying run %d, %s: %d inputs", i+1, proc, n) }})
		if err != nil {
			return nil, false, c.replayErr(r.Name, err)
		}
		identical = identical && rep.Identical
		reps = append(reps, rep)
	}
	return reps, identical, nil
}

// reportVerdict is report's verdict: lost, complete and, with --replay,
// identical.
func reportVerdict(f *incident.Findings, replay, identical bool) string {
	verdict := []string{choose(f.Lost, "something was lost", "nothing was lost"),
		choose(f.Complete, "complete", "NOT COMPLETE")}
	if replay {
		verdict = append(verdict, choose(identical, "replay identical", "replay DIVERGED"))
	}
	return strings.Join(verdict, ", ")
}

// crashCount is the runs of f that crashed: "1 crash", "2 crashes".
func crashCount(f *incident.Findings) string {
	n := 0
	for _, r := range f.Runs {
		if r.Crashed {
			n++
		}
	}
	if n == 1 {
		return "1 crash"
	}
	return fmt.Sprintf("%d crashes", n)
}

// choose is yes when b, else no.
func choose(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
