package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// The exit codes of every command.
const (
	// ExitOK: the work was done and proven (identical, complete, lossless).
	ExitOK = 0
	// ExitDifferent: a divergence (replay), a difference (diff), a failed
	// golden check or a crash test whose guarantees did not hold.
	ExitDifferent = 1
	// ExitFailure: a usage error or an I/O error; the message names the file
	// and the problem.
	ExitFailure = 2
	// ExitIncomplete: the work ran, but its result is not lossless or not
	// complete.
	ExitIncomplete = 3
)

// ExitError ends a command with an exit code. Err, when not nil, is printed
// to standard error as "blackbox: <Err>"; a nil Err prints nothing (the
// command already explained its verdict on its output). Commands return
// one; Execute maps it with errors.As. Any other error exits ExitFailure.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *ExitError) Unwrap() error { return e.Err }

// exit returns an *ExitError with the given code; err may be nil.
func exit(code int, err error) error { return &ExitError{Code: code, Err: err} }

// usageError is a command line the command cannot run: bad flags, a bad flag
// value, missing or extra arguments. It exits ExitFailure with a hint.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// UsageError makes err a usage error of a command added with WithCommand:
// printed as "blackbox: <err>" with a hint to the command's --help, exit
// ExitFailure.
func UsageError(err error) error { return &usageError{err} }

// BuiltinApps returns the apps every blackbox binary knows: ledger (option
// state: its durable state file) and alerts (option threshold). A CLI that
// keeps only some of them passes WithoutBuiltinApps, then WithApps of
// those.
func BuiltinApps() []core.App { return apps.All() }

// Option configures a CLI.
type Option func(*CLI)

// WithApps registers apps, beside the built-in ones (an app of a built-in's
// name, or of a name given to an earlier WithApps, replaces it).
func WithApps(a ...core.App) Option {
	return func(c *CLI) {
		for _, app := range a {
			c.own = slices.DeleteFunc(c.own, func(o core.App) bool { return o.Name == app.Name })
			c.own = append(c.own, app)
		}
	}
}

// WithoutBuiltinApps leaves out the built-in apps (ledger, alerts),
// wherever it stands among the options: the CLI has only the apps of
// WithApps. The demo command, which runs the built-in ledger, is then
// left out too (as when WithApps replaces the ledger), and crashtest's
// --app has no default.
func WithoutBuiltinApps() Option { return func(c *CLI) { c.noBuiltins = true } }

// DefaultName is the name of the CLI's root command when WithName does not
// set one.
const DefaultName = "blackbox"

// WithName names the CLI's root command: a user's own binary (one with
// WithApps) says its name, not blackbox's, in its usage lines, its help
// and its error and warning messages ("<name>: ..."). Empty: DefaultName.
func WithName(name string) Option { return func(c *CLI) { c.name = name } }

// WithClock sets the clock the engine's processors read (Cycle.Now) and the
// recorder stamps rows with. Default: the system clock. Tests inject an
// core.StepClock so that outputs are byte-stable. Timers stay on the
// system clock.
func WithClock(clock core.Clock) Option { return func(c *CLI) { c.clock = clock } }

// WithStdout sets where commands write their output. Default os.Stdout.
func WithStdout(w io.Writer) Option { return func(c *CLI) { c.stdout = w } }

// WithStdin sets where commands read an operator's answers (ctl's
// confirmation). Default os.Stdin; ctl asks only when it is a terminal.
func WithStdin(r io.Reader) Option { return func(c *CLI) { c.stdin = r } }

// WithStderr sets where errors, warnings and progress go. Default
// os.Stderr. Progress is shown only when it is a terminal.
func WithStderr(w io.Writer) Option { return func(c *CLI) { c.stderr = w } }

// WithCommand adds a command to the CLI: cmd builds it for c (its RunE
// returns an *ExitError for a verdict, a UsageError for a command line it
// cannot run); one without Args takes no arguments. cmd/blackbox adds `torture` with it (internal/blackboxcli).
func WithCommand(cmd func(c *CLI) *cobra.Command) Option {
	return func(c *CLI) { c.extra = append(c.extra, cmd) }
}

// KafkaDemo starts an in-process Kafka cluster for `demo --kafka` with
// topic (of partitions partitions), produces each line of the file input
// to it keyed by the line's account (apps.Key: one account's lines go to
// one partition, in order), and returns the cluster's brokers and a
// function that stops it.
type KafkaDemo func(ctx context.Context, topic string, partitions int, input string) (brokers []string, stop func(), err error)

// WithKafkaDemo gives `demo --kafka` its in-process cluster. Without it
// (a user's binary, which links no fake broker) demo --kafka is a usage
// error. cmd/blackbox has it (internal/blackboxcli).
func WithKafkaDemo(start KafkaDemo) Option { return func(c *CLI) { c.kafkaDemo = start } }

// Stderr is where the CLI writes errors, warnings and progress (WithStderr).
func (c *CLI) Stderr() io.Writer { return c.stderr }

// CLI is the blackbox command line: a set of apps, a clock and output
// streams. Build it with New and run it with Execute (or take its cobra
// command tree with Command). A CLI may run several command lines in turn;
// it is not safe for concurrent use.
type CLI struct {
	apps       []core.App
	own        []core.App // WithApps, merged into apps by New
	noBuiltins bool       // WithoutBuiltinApps
	ledger     bool       // the built-in ledger is among apps (demo runs it)
	name       string     // the root command's (WithName), never empty after New
	clock      core.Clock
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	// stdinTerminal, when set, says whether stdin is a terminal (tests);
	// stdoutTerminal the same of stdout (top's redraw).
	stdinTerminal, stdoutTerminal *bool
	topClock                      topClock                    // top's clock; nil: the system's
	outWriter                     func(io.Writer) io.Writer   // tests: wraps the --out file's writer
	noCommits                     bool                        // tests: record no COMMIT rows (byte-stable transcripts)
	extra                         []func(*CLI) *cobra.Command // commands of options (WithCommand)
	kafkaDemo                     KafkaDemo                   // demo --kafka's cluster (WithKafkaDemo), nil for none
}

// New returns a CLI with the built-in apps and the given options.
func New(opts ...Option) *CLI {
	c := &CLI{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	for _, o := range opts {
		o(c)
	}
	if c.name == "" {
		c.name = DefaultName
	}
	if !c.noBuiltins {
		for _, b := range BuiltinApps() {
			if _, mine := core.FindApp(c.own, b.Name); !mine {
				c.apps = append(c.apps, b)
				c.ledger = c.ledger || b.Name == apps.LedgerName
			}
		}
	}
	c.apps = append(c.apps, c.own...)
	return c
}

// Main runs the command line args (without the program name) with the
// built-in apps and the extra options, stops on SIGINT or SIGTERM (cleanly:
// a run commits and ends its recording), and returns the exit code. A
// main package is:
//
//	func main() { os.Exit(cli.Main(os.Args[1:])) }
func Main(args []string, opts ...Option) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return New(opts...).Execute(ctx, args)
}

// Execute runs one command line (without the program name) and returns its
// exit code: ExitOK, ExitDifferent, ExitFailure or ExitIncomplete. Errors
// are printed to the CLI's stderr. ctx ends long work (a followed run, a
// replay) early.
func (c *CLI) Execute(ctx context.Context, args []string) int {
	root := c.Command()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitFailure
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
		if ee.Err == nil {
			return code
		}
	}
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	var ue *usageError
	if errors.As(err, &ue) {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(c.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// Command returns a new cobra command tree of the CLI: the root command
// (named "blackbox", or as WithName says) and its subcommands, writing to
// the CLI's stdout and stderr. Its RunE functions return *ExitError for
// non-zero verdicts. demo is among them only when the built-in ledger is.
func (c *CLI) Command() *cobra.Command {
	root := &cobra.Command{
		Use:   c.name,
		Short: "Record, replay and audit event processing",
		Long: `blackbox records everything a processor saw and did to a recording (CSV or
SQLite), replays the recording to prove the outputs identical, and checks,
inspects, diffs and converts recordings.

Exit codes: 0 ok (proven identical, complete, lossless); 1 a divergence or
a difference; 2 a usage or I/O error; 3 the work ran but the result is not
lossless or not complete.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noArgs,
		RunE:          helpOnly,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	// Cobra's own errors for a command line it cannot parse carry no type:
	// every flag error passes through this function and becomes a
	// usageError, and every command sets Args (noArgs, exactArgs), so cobra
	// never returns its untyped "unknown command" error.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	if c.ledger {
		root.AddCommand(c.demoCmd())
	}
	root.AddCommand(c.runCmd(), c.replayCmd(), c.verifyCmd(), c.inspectCmd(),
		c.diffCmd(), c.explainCmd(), c.reportCmd(), c.convertCmd(), c.goldenCmd(), c.crashtestCmd(),
		c.runsCmd(), c.ctlCmd(), c.topCmd())
	for _, extra := range c.extra {
		cmd := extra(c)
		if cmd.Args == nil {
			cmd.Args = noArgs
		}
		root.AddCommand(cmd)
	}
	if c.name != DefaultName {
		rename(root, c.name)
	}
	return root
}

// rename makes the help texts of cmd and its subcommands name the binary
// name where they name blackbox's ("blackbox run ...", "blackbox records
// ..."); the usage lines follow the root's Use.
func rename(cmd *cobra.Command, name string) {
	r := strings.NewReplacer(DefaultName+" ", name+" ", `"`+DefaultName+`"`, `"`+name+`"`)
	cmd.Short, cmd.Long, cmd.Example = r.Replace(cmd.Short), r.Replace(cmd.Long), r.Replace(cmd.Example)
	for _, sub := range cmd.Commands() {
		rename(sub, name)
	}
}

// helpOnly is the action of a command that only groups subcommands: it
// prints its help.
func helpOnly(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// noArgs refuses positional arguments (and names an unknown subcommand).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
}

// exactArgs wants n positional arguments, named in the error.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			want := fmt.Sprintf("%d arguments", len(names))
			if len(names) == 1 {
				want = "1 argument"
			}
			return usagef("%s wants %s (%s), got %d", cmd.CommandPath(), want, strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// app returns the named app, or a usage error naming the known ones.
func (c *CLI) app(name string) (core.App, error) {
	a, ok := core.FindApp(c.apps, name)
	if !ok || a.New == nil {
		return core.App{}, usagef("unknown app %q (known: %s)", name, core.AppNames(c.apps))
	}
	return a, nil
}
