// Package cli is the blackbox command line, importable: every command of
// docs/CLI.md as a cobra command tree over a set of apps, so that users can
// build a binary with their own processors.
//
//	c := cli.New(cli.WithApps(core.App{Name: "upper", New: newUpper, Decode: decodeLine}))
//	os.Exit(c.Execute(ctx, os.Args[1:]))
//
// An app is a core.App: a name, a constructor taking options (`run
// --option KEY=VALUE`, `--state` as option state, golden case options) and
// the decoder of its recorded input payloads; run, replay, golden and
// crashtest all use the same apps. The built-in apps (internal/apps: ledger,
// alerts) are registered unless WithoutBuiltinApps.
//
// Each command parses its flags, calls the library (engine, recorder,
// replayer, store, golden) and writes to the command's output; --json gives
// machine output. Exit codes are the same everywhere: ExitOK (0) proven or
// ok, ExitDifferent (1) a divergence or a difference, ExitFailure (2) a usage
// or I/O error whose message names the file and the problem, ExitIncomplete
// (3) the work ran but the result is not lossless or not complete. A command
// returns an *ExitError for a non-zero verdict; Execute maps every error to
// its code with errors.As. Progress of long work goes to standard error, and
// only when it is a terminal.
//
// Before any work a command checks its paths: no two of them name one file
// (compared by device and inode, or by resolved absolute path), every
// output can be written, and none is a recording it must not replace. run
// and convert hold an flock on each output (PATH.blackbox-lock) while they
// run, so a second command on the same files is refused at once. Files
// written whole (--status, convert's DST) go through a temporary file
// beside them (.NAME.blackbox-tmp..., never taken for a recording), fsync
// and rename. docs/CLI.md says what each command guarantees.
//
// WithClock injects the clock processors read and the recorder stamps rows
// with (a core.StepClock in tests, so that outputs are byte-stable), and
// WithStdout and WithStderr the output streams. The transcripts in testdata/
// run every command in-process that way.
//
// A CLI is not safe for concurrent use; Execute may be called again after
// it returns.
package cli
