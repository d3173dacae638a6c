package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/replayer"
)

// demoFiles are the files demo owns in its directory (and removes first).
func demoFiles(dir string) ([]string, error) {
	ptrs, err := filepath.Glob(filepath.Join(dir, "*.ptr"))
	if err != nil {
		return nil, err
	}
	files := []string{filepath.Join(dir, "input.txt"), filepath.Join(dir, "run.db"), filepath.Join(dir, "run.db-wal"),
		filepath.Join(dir, "run.db-shm"), filepath.Join(dir, "run.db-journal"), filepath.Join(dir, "run.csv")}
	return append(files, ptrs...), nil
}

// demoReport is the JSON of `blackbox demo --json`.
type demoReport struct {
	Input    string           `json:"input"`
	Lines    int              `json:"lines"`
	Store    string           `json:"store"`
	Format   string           `json:"format"`
	Read     int64            `json:"read"`
	Inputs   int64            `json:"inputs"`
	Outputs  int64            `json:"outputs"`
	Rows     int64            `json:"rows"`
	Status   statusJSON       `json:"status"` // as run --status writes it
	Replay   *replayer.Report `json:"replay"`
	Verdict  verdictJSON      `json:"verdict"`
	Postings int64            `json:"postings"`
}

type verdictJSON struct {
	Identical bool `json:"identical"`
	Complete  bool `json:"complete"`
	Lossless  bool `json:"lossless"`
}

func (c *CLI) demoCmd() *cobra.Command {
	var (
		dir, format string
		lines       int
		asJSON      bool
		kafka       bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Record the ledger app over generated lines, replay it, print the verdict",
		Long: `Generate N deterministic ledger lines (accounts, amounts, a few transfers, a
tick) in DIR/input.txt, run the ledger app over them with a once-earliest
file feed recording to DIR/run.db (SQLite; DIR/run.csv with --format csv),
replay the recording and print what was read, recorded and emitted, the
verdict (identical, complete, lossless) and the paths.

With --kafka the lines go through Kafka, with no server to install: demo
starts an in-process cluster (kfake), produces the lines to a topic
"ledger" of 4 partitions keyed by account, and the run consumes it as the
group "blackbox-demo" (run --kafka), committing offsets after processing;
the recording replays with no broker. The cluster ends with demo. Only
the blackbox binary has it: one built with cli.New alone links no fake
broker and refuses --kafka (a usage error).

demo owns DIR/input.txt, DIR/run.db (with its -wal and -shm files),
DIR/run.csv and DIR/*.ptr: it removes them first, so it can be run again.
It touches nothing else in DIR.

Exit: 0 proven identical, complete and lossless; 1 a divergence; 2 a usage
or I/O error; 3 identical but not complete or not lossless.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if lines <= 0 {
				return usagef("--lines must be positive, got %d", lines)
			}
			if kafka && c.kafkaDemo == nil {
				return usagef("demo --kafka: this binary has no in-process Kafka cluster (cmd/blackbox has one: cli.WithKafkaDemo)")
			}
			f, err := formatOf("", format)
			if err != nil {
				return err
			}
			if err := demoDir(dir); err != nil {
				return err
			}
			input := filepath.Join(dir, "input.txt")
			storePath := filepath.Join(dir, "run.db")
			if f == formatCSV {
				storePath = filepath.Join(dir, "run.csv")
			}
			postings, err := apps.WriteLedgerLines(input, lines, 1, true, true)
			if err != nil {
				return err
			}
			cfg := recordConfig{app: apps.LedgerName, input: input, store: storePath,
				format: f, read: filesource.OnceEarliest, policy: engine.Pause(), queue: 1024}
			how := "once-earliest"
			if kafka {
				stop, err := c.demoKafka(cmd.Context(), &cfg)
				if err != nil {
					return err
				}
				defer stop()
				how = fmt.Sprintf("Kafka topic %s, %d partitions, group %s, in-process cluster", demoTopic, demoPartitions, demoGroup)
			}
			res, err := c.record(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if res.Recorded != nil {
				return exit(ExitIncomplete, fmt.Errorf("%s: the recording is broken: %w", storePath, res.Recorded))
			}
			rep, err := c.demoReplay(cmd.Context(), storePath, res.Inputs)
			if err != nil {
				return err
			}
			var read int64
			if len(res.Status.Feeds) > 0 {
				read = res.Status.Feeds[0].Sequence
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = WriteJSON(out, demoReport{Input: input, Lines: lines, Store: storePath, Format: f, Read: read,
					Inputs: res.Inputs, Outputs: res.Outputs, Rows: res.Rows, Status: res.statusJSON(), Replay: rep,
					Verdict: verdictJSON{rep.Identical, rep.Complete, rep.Lossless}, Postings: postings})
			} else {
				err = writeDemoText(out, demoText{lines: lines, postings: postings, read: read, how: how, input: input,
					store: storePath, format: f, res: res, rep: rep})
			}
			if err != nil {
				return err
			}
			return replayVerdict(rep)
		},
	}
	demoFlags(cmd.Flags(), &dir, &format, &lines, &asJSON, &kafka)
	return cmd
}

// demoFlags binds demo's flags.
func demoFlags(f *pflag.FlagSet, dir, format *string, lines *int, asJSON, kafka *bool) {
	f.StringVar(dir, "dir", "demo-out", "the directory to work in (created if missing)")
	f.StringVar(format, "format", "sqlite", "the recording's format: sqlite or csv")
	f.IntVar(lines, "lines", 20000, "how many ledger lines to generate")
	f.BoolVar(asJSON, "json", false, "print the run's status and the replay report as JSON")
	f.BoolVar(kafka, "kafka", false, "read the lines from a Kafka topic: start an in-process cluster, produce them, consume them as a group")
}

// demoReplay replays demo's recording (of inputs inputs, for the
// progress shown).
func (c *CLI) demoReplay(ctx context.Context, storePath string, inputs int64) (*replayer.Report, error) {
	r, _, err := openStore(storePath)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p := c.progress()
	rep, err := replayer.Replay(ctx, r, c.apps, replayer.Options{
		Progress: func(proc string, n int64) { p.Printf("replaying %s: %d of %d inputs", proc, n, inputs) },
	})
	p.Done()
	if err != nil {
		return nil, c.replayErr(storePath, err)
	}
	return rep, nil
}

// demoKafka starts demo --kafka's in-process cluster (WithKafkaDemo),
// produces cfg's input to it and makes cfg read it as a consumer group;
// stop stops the cluster.
func (c *CLI) demoKafka(ctx context.Context, cfg *recordConfig) (stop func(), err error) {
	brokers, stop, err := c.kafkaDemo(ctx, demoTopic, demoPartitions, cfg.input)
	if err != nil {
		return nil, err
	}
	cfg.input, cfg.read = "", filesource.Committed
	cfg.kafka = kafkaConfig{brokers: strings.Join(brokers, ","), topic: demoTopic, group: demoGroup}
	return stop, nil
}

// demoText is what demo prints without --json.
type demoText struct {
	lines             int
	postings, read    int64
	how, input, store string
	format            string
	res               recordResult
	rep               *replayer.Report
}

// writeDemoText prints demo's run, replay and verdict.
func writeDemoText(out io.Writer, t demoText) error {
	fmt.Fprintf(out, "blackbox demo: the ledger app over %d generated lines\n", t.lines)
	fmt.Fprintf(out, "input     %s: %d lines (%d postings, transfers count two)\n", t.input, t.lines, t.postings)
	fmt.Fprintf(out, "read      %d lines (%s), settled: %s, lossless: %s\n", t.read, t.how,
		yesNo(t.res.Status.Settled), yesNo(t.res.Status.Lossless))
	fmt.Fprintf(out, "recorded  %s (%s): %d inputs, %d outputs, %d rows\n", t.store, t.format, t.res.Inputs, t.res.Outputs, t.res.Rows)
	fmt.Fprintf(out, "replayed  %s\n", replaySummary(t.rep))
	fmt.Fprintf(out, "verdict   identical: %s  complete: %s  lossless: %s\n", yesNo(t.rep.Identical),
		yesNo(t.rep.Complete), yesNo(t.rep.Lossless))
	if t.rep.Identical && t.rep.Complete && t.rep.Lossless {
		fmt.Fprintf(out, "proven: replaying %s gives exactly the outputs of the live run\n", t.store)
	} else {
		fmt.Fprintln(out)
		if err := t.rep.WriteText(out); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "next      blackbox inspect %s; blackbox replay %s\n", t.store, t.store)
	return nil
}

// demoDir creates demo's directory and removes the files it owns there
// (demoFiles).
func demoDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return &fileError{dir, errors.New("is not a directory")}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &fileError{dir, unwrapPathError(err)}
	}
	owned, err := demoFiles(dir)
	if err != nil {
		return err
	}
	for _, p := range owned {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &fileError{p, unwrapPathError(err)}
		}
	}
	return nil
}

// replaySummary is one line per processor: inputs replayed and outputs
// compared.
func replaySummary(rep *replayer.Report) string {
	s := ""
	for i, p := range rep.Processors {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("%s: %d inputs, %d outputs compared", p.Processor, p.Inputs, p.Outputs)
	}
	if s == "" {
		s = "no processor"
	}
	return s
}
