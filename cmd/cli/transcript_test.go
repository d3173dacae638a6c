package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/blackboxcli"
	"github.com/blackbox-audit/blackbox/internal/pgtest"
	"github.com/cockroachdb/datadriven"
)

// update rewrites docs/CLI.md's embedded --help (TestCLIDocMatchesHelp), the
// golden cases (TestGoldenUpper) and the browser test's screenshot; the
// transcripts are rewritten by datadriven's -rewrite.
var update = flag.Bool("update", false, "rewrite docs/CLI.md's --help sections, the golden cases and the screenshot")

// childEnv marks a run of this test binary as the blackbox binary itself:
// crashtest runs os.Executable() (the test binary here) as its child.
const childEnv = "BLACKBOX_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	// A fuzzing worker is a child of this test binary too, not blackbox.
	if os.Getenv(childEnv) == "1" && !slices.ContainsFunc(os.Args, isFuzzWorkerFlag) {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Setenv(childEnv, "1") // inherited by the children crashtest starts
	flag.Parse()
	code := m.Run()
	removeBinary()
	if err := pgtest.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stop: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// isFuzzWorkerFlag reports whether arg is the flag the fuzzing engine
// starts its workers with.
func isFuzzWorkerFlag(arg string) bool {
	return arg == "-test.fuzzworker" || strings.HasPrefix(arg, "-test.fuzzworker=")
}

// epoch is the first reading of the step clock every command of a
// transcript gets.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// newCLI returns a CLI writing both streams to out, with a fresh step
// clock: every command's output is byte-stable.
func newCLI(out *bytes.Buffer, opts ...cli.Option) *cli.CLI {
	base := []cli.Option{cli.WithClock(core.NewStepClock(epoch, time.Second)), cli.WithStdout(out), cli.WithStderr(out),
		cli.WithoutCommitRows()}
	base = append(base, blackboxcli.Options()...)
	return cli.New(append(base, opts...)...)
}

// TestTranscripts runs the transcripts of testdata/*.txt (datadriven files;
// testdata/golden/ is a golden case folder, not transcripts), each in a fresh
// work directory:
//
//	# a comment
//	file name=run.csv                a file written into the work directory
//	...                              (its content, a newline appended)
//	----
//
//	exec
//	blackbox verify run.csv          a command line: blackbox runs in-process
//	----
//	run.csv: complete                its expected output (stdout and stderr)
//	[exit 0]                         and exit code
//
// Besides blackbox, a few built-ins handle files (see builtins). A command
// line is split on spaces, with '...' and "..." quoting. In an expected
// output, a line "..." matches any number of lines, the work directory's
// path reads $WORK, and "[exit 0|1]" accepts either code. `go test
// ./cmd/cli -run TestTranscripts -rewrite` rewrites the expected output of
// every command that does not match (one that matches is kept as written).
func TestTranscripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txt"), func(t *testing.T) {
			abs, err := filepath.Abs(p) // read from the work directory
			if err != nil {
				t.Fatal(err)
			}
			w := newWorkDir(t)
			datadriven.RunTest(t, abs, w.run)
		})
	}
}

// workDir is the directory a transcript runs in, its current directory.
type workDir struct {
	dir, real string // as created, and with symbolic links resolved
}

func newWorkDir(t *testing.T) *workDir {
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	return &workDir{dir: dir, real: real}
}

// readTranscript returns the command lines of a transcript, as written, and
// its files by name, read by datadriven's parser without running anything.
func readTranscript(t *testing.T, path string) (cmds []string, files map[string]string) {
	files = map[string]string{}
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "exec":
			cmds = append(cmds, d.Input)
		case "file":
			var name string
			d.ScanArgs(t, "name", &name)
			files[name] = fileData(d)
		}
		return d.Expected
	})
	return cmds, files
}

// fileData is the content of a file directive: its input, which datadriven
// trims, with the newline that ends its last line.
func fileData(d *datadriven.TestData) string {
	if d.Input == "" {
		return ""
	}
	return d.Input + "\n"
}

// run runs one directive of a transcript: file or exec.
func (w *workDir) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "file":
		var name string
		d.ScanArgs(t, "name", &name)
		p := filepath.FromSlash(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fileData(d)), 0o644); err != nil {
			t.Fatal(err)
		}
		return ""
	case "exec":
		args, err := splitArgs(d.Input)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		var out bytes.Buffer
		rc := runCommand(t, d, args, &out)
		text := strings.ReplaceAll(out.String(), w.real, "$WORK")
		text = strings.ReplaceAll(text, w.dir, "$WORK")
		var got []string
		if text = strings.TrimSuffix(text, "\n"); text != "" {
			got = strings.Split(text, "\n")
		}
		if matches(t, d, got, rc) {
			return d.Expected // its wildcards and alternatives kept
		}
		return strings.Join(append(got, fmt.Sprintf("[exit %d]", rc)), "\n") + "\n"
	}
	d.Fatalf(t, "unknown directive %q: want file or exec", d.Cmd)
	return ""
}

// matches reports whether a command's output and exit code match the
// directive's expected output: its lines, then "[exit N]" or "[exit N|M]".
func matches(t *testing.T, d *datadriven.TestData, got []string, rc int) bool {
	want := strings.Split(strings.TrimSuffix(d.Expected, "\n"), "\n")
	codes, ok := exitLine(want[len(want)-1])
	if !ok {
		if d.Rewrite {
			return false // a new command: its output is written
		}
		d.Fatalf(t, "the expected output does not end with [exit N]")
	}
	return slices.Contains(codes, rc) && match(want[:len(want)-1], got)
}

// exitLine parses "[exit N]", or "[exit N|M]" for a command whose exit
// code depends on timing.
func exitLine(l string) ([]int, bool) {
	if !strings.HasPrefix(l, "[exit ") || !strings.HasSuffix(l, "]") {
		return nil, false
	}
	var codes []int
	for _, f := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "[exit "), "]"), "|") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		codes = append(codes, n)
	}
	return codes, true
}

// splitArgs splits a command line on spaces, with '...' and "..." quoting.
func splitArgs(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	in := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		case r == '\n':
			return nil, fmt.Errorf("a command is one line: %q", s)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if in {
		args = append(args, cur.String())
	}
	return args, nil
}

// match reports whether got matches want, where a "..." line of want
// matches any number of lines.
func match(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if match(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && want[0] == got[0] && match(want[1:], got[1:])
}

// errUsage marks a built-in called the wrong way: a mistake in the
// transcript, which fails the test.
var errUsage = errors.New("usage")

// builtins are the commands a transcript runs besides blackbox, in its work
// directory. Each writes its output to out; an error is printed and exits 1,
// as a failing command would, unless it wraps errUsage.
var builtins = map[string]func(args []string, out *bytes.Buffer) error{
	"cat":       builtinCat,
	"cp":        builtinCp,
	"rm":        builtinRm,
	"ls":        builtinLs,
	"sha256sum": builtinSha256sum,
	"echo":      builtinEcho,
	"cmp":       builtinCmp,
	"truncate":  builtinTruncate,
	"grep":      builtinGrep,
}

// runCommand runs one command of a transcript and returns its exit code.
func runCommand(t *testing.T, d *datadriven.TestData, args []string, out *bytes.Buffer) int {
	t.Helper()
	if len(args) == 0 {
		d.Fatalf(t, "empty command")
	}
	if args[0] == "blackbox" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return newCLI(out).Execute(ctx, args[1:])
	}
	cmd, ok := builtins[args[0]]
	if !ok {
		d.Fatalf(t, "unknown command %q", args[0])
	}
	err := cmd(args[1:], out)
	switch {
	case errors.Is(err, errUsage):
		d.Fatalf(t, "%v", err)
	case err != nil:
		fmt.Fprintln(out, err)
		return 1
	}
	return 0
}

// cat FILE...
func builtinCat(args []string, out *bytes.Buffer) error {
	for _, a := range args {
		b, err := os.ReadFile(a)
		if err != nil {
			return fmt.Errorf("cat: %w", err)
		}
		out.Write(b)
	}
	return nil
}

// cp SRC DST
func builtinCp(args []string, _ *bytes.Buffer) error {
	if len(args) != 2 {
		return fmt.Errorf("%w: cp SRC DST, got %q", errUsage, args)
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if err := os.WriteFile(args[1], b, 0o644); err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	return nil
}

// rm FILE...
func builtinRm(args []string, _ *bytes.Buffer) error {
	for _, a := range args {
		if err := os.Remove(a); err != nil {
			return fmt.Errorf("rm: %w", err)
		}
	}
	return nil
}

// ls [DIR] lists the files under DIR (the work directory by default),
// sorted, one a line.
func builtinLs(args []string, out *bytes.Buffer) error {
	dir := "."
	if len(args) > 0 {
		dir = args[0]
	}
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ls: %w", err)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintln(out, n)
	}
	return nil
}

// sha256sum FILE...
func builtinSha256sum(args []string, out *bytes.Buffer) error {
	for _, a := range args {
		b, err := os.ReadFile(a)
		if err != nil {
			return fmt.Errorf("sha256sum: %w", err)
		}
		fmt.Fprintf(out, "%x  %s\n", sha256.Sum256(b), a)
	}
	return nil
}

// echo TEXT... [>> FILE]
func builtinEcho(args []string, out *bytes.Buffer) (err error) {
	text, file := args, ""
	if n := len(text); n >= 2 && text[n-2] == ">>" {
		text, file = text[:n-2], text[n-1]
	}
	line := strings.Join(text, " ") + "\n"
	if file == "" {
		out.WriteString(line)
		return nil
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("echo: %w", cerr)
		}
	}()
	if _, err := f.WriteString(line); err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	return nil
}

// cmp A B fails, "A B differ", when the files' bytes differ.
func builtinCmp(args []string, _ *bytes.Buffer) error {
	if len(args) != 2 {
		return fmt.Errorf("%w: cmp A B, got %q", errUsage, args)
	}
	a, err := os.ReadFile(args[0])
	if err != nil {
		return fmt.Errorf("cmp: %w", err)
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		return fmt.Errorf("cmp: %w", err)
	}
	if !bytes.Equal(a, b) {
		return fmt.Errorf("%s %s differ", args[0], args[1])
	}
	return nil
}

// truncate -s [-]N FILE sets FILE's size to N bytes, or cuts N bytes off it.
func builtinTruncate(args []string, _ *bytes.Buffer) error {
	if len(args) != 3 || args[0] != "-s" {
		return fmt.Errorf("%w: truncate -s [-]N FILE, got %q", errUsage, args)
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return fmt.Errorf("%w: truncate: %v", errUsage, err)
	}
	fi, err := os.Stat(args[2])
	if err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	size := n
	if strings.HasPrefix(args[1], "-") {
		size = fi.Size() + n
	}
	if err := os.Truncate(args[2], size); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return nil
}

// grep [-v] TEXT FILE prints the lines of FILE that hold TEXT (with -v:
// that do not), in order; none is an error, as grep's exit 1 is.
func builtinGrep(args []string, out *bytes.Buffer) error {
	invert := len(args) > 0 && args[0] == "-v"
	if invert {
		args = args[1:]
	}
	if len(args) != 2 {
		return fmt.Errorf("%w: grep [-v] TEXT FILE, got %q", errUsage, args)
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		return fmt.Errorf("grep: %w", err)
	}
	n := 0
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" && strings.Contains(l, args[0]) != invert {
			out.WriteString(l)
			n++
		}
	}
	if n == 0 {
		what := "holds"
		if invert {
			what = "lacks"
		}
		return fmt.Errorf("grep: no line of %s %s %q", args[1], what, args[0])
	}
	return nil
}
