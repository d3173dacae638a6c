package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
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
)

var update = flag.Bool("update", false, "rewrite the expected outputs of testdata/*.txt")

// childEnv marks a run of this test binary as the blackbox binary itself:
// crashtest runs os.Executable() (the test binary here) as its child.
const childEnv = "BLACKBOX_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Setenv(childEnv, "1") // inherited by the children crashtest starts
	flag.Parse()
	code := m.Run()
	removeBinary()
	os.Exit(code)
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

// A transcript (testdata/*.txt) is a script followed by files:
//
//	# a comment
//	$ blackbox verify run.csv        a command: blackbox runs in-process
//	run.csv: complete                its expected output (stdout and stderr)
//	[exit 0]                         its expected exit code
//
//	-- run.csv --                    a file written into the work directory
//	...                              before the script runs
//
// Commands run in a fresh temporary directory. Besides blackbox, a few
// built-ins handle files: cat, cp, cmp, echo [>> FILE], rm, ls, sha256sum and "truncate -s [-]N".
// In an expected output, a line "..." matches any number of lines, and the
// work directory's path reads $WORK; "[exit 0|1]" accepts either code. With -update, the expected output of
// every command that does not match is rewritten.
type transcript struct {
	path   string
	abs    string
	lines  []string // the script, line by line
	blocks []block
	files  []file
}

type block struct {
	line   int // of the "$" line, 0-based
	end    int // of the "[exit N]" line
	args   []string
	want   []string
	exit   []int // any of these
	got    []string
	gotRC  int
	differ bool
}

type file struct {
	name string
	data []byte
}

func parseTranscript(path string) (*transcript, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := strings.TrimSuffix(string(b), "\n")
	all := strings.Split(text, "\n")
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	tr := &transcript{path: path, abs: abs}
	i := 0
	for ; i < len(all); i++ {
		if isFileMarker(all[i]) {
			break
		}
		tr.lines = append(tr.lines, all[i])
	}
	for i < len(all) {
		name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(all[i], "-- "), " --"))
		i++
		var data []byte
		for ; i < len(all) && !isFileMarker(all[i]); i++ {
			data = append(data, all[i]...)
			data = append(data, '\n')
		}
		tr.files = append(tr.files, file{name, data})
	}
	for j := 0; j < len(tr.lines); j++ {
		l := tr.lines[j]
		if !strings.HasPrefix(l, "$ ") {
			continue
		}
		args, err := splitArgs(strings.TrimPrefix(l, "$ "))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, j+1, err)
		}
		bl := block{line: j, args: args}
		k := j + 1
		for ; k < len(tr.lines); k++ {
			if rc, ok := exitLine(tr.lines[k]); ok {
				bl.exit = rc
				break
			}
			if strings.HasPrefix(tr.lines[k], "$ ") {
				return nil, fmt.Errorf("%s:%d: a command without its [exit N] line", path, j+1)
			}
			bl.want = append(bl.want, tr.lines[k])
		}
		if k == len(tr.lines) {
			return nil, fmt.Errorf("%s:%d: a command without its [exit N] line", path, j+1)
		}
		bl.end = k
		tr.blocks = append(tr.blocks, bl)
		j = k
	}
	return tr, nil
}

func isFileMarker(l string) bool {
	return strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") && len(l) > 6
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

func TestTranscripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txt"), func(t *testing.T) {
			tr, err := parseTranscript(p)
			if err != nil {
				t.Fatal(err)
			}
			runTranscript(t, tr)
		})
	}
}

func runTranscript(t *testing.T, tr *transcript) {
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tr.files {
		p := filepath.Join(dir, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	changed := false
	for i := range tr.blocks {
		bl := &tr.blocks[i]
		var out bytes.Buffer
		bl.gotRC = runCommand(t, bl.args, &out)
		text := strings.ReplaceAll(out.String(), real, "$WORK")
		text = strings.ReplaceAll(text, dir, "$WORK")
		text = strings.TrimSuffix(text, "\n")
		if text != "" {
			bl.got = strings.Split(text, "\n")
		}
		if !match(bl.want, bl.got) || !slices.Contains(bl.exit, bl.gotRC) {
			bl.differ = true
			changed = true
			if !*update {
				t.Errorf("%s:%d: $ %s\n--- want (exit %v)\n%s\n--- got (exit %d)\n%s", tr.path, bl.line+1,
					strings.Join(bl.args, " "), bl.exit, strings.Join(bl.want, "\n"), bl.gotRC, strings.Join(bl.got, "\n"))
			}
		}
	}
	if *update && changed {
		writeTranscript(t, tr)
	}
}

// runCommand runs one command of a transcript in the work directory.
func runCommand(t *testing.T, args []string, out *bytes.Buffer) int {
	t.Helper()
	if len(args) == 0 {
		t.Fatal("empty command")
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(out, format+"\n", a...)
		return 1
	}
	switch args[0] {
	case "blackbox":
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return newCLI(out).Execute(ctx, args[1:])
	case "cat":
		for _, a := range args[1:] {
			b, err := os.ReadFile(a)
			if err != nil {
				return fail("cat: %v", err)
			}
			out.Write(b)
		}
		return 0
	case "cp":
		if len(args) != 3 {
			t.Fatalf("cp SRC DST, got %q", args)
		}
		b, err := os.ReadFile(args[1])
		if err != nil {
			return fail("cp: %v", err)
		}
		if err := os.WriteFile(args[2], b, 0o644); err != nil {
			return fail("cp: %v", err)
		}
		return 0
	case "rm":
		for _, a := range args[1:] {
			if err := os.Remove(a); err != nil {
				return fail("rm: %v", err)
			}
		}
		return 0
	case "ls":
		dir := "."
		if len(args) > 1 {
			dir = args[1]
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
			return fail("ls: %v", err)
		}
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintln(out, n)
		}
		return 0
	case "sha256sum":
		for _, a := range args[1:] {
			b, err := os.ReadFile(a)
			if err != nil {
				return fail("sha256sum: %v", err)
			}
			fmt.Fprintf(out, "%x  %s\n", sha256.Sum256(b), a)
		}
		return 0
	case "echo":
		// echo TEXT... [>> FILE]
		text, file := args[1:], ""
		if n := len(text); n >= 2 && text[n-2] == ">>" {
			text, file = text[:n-2], text[n-1]
		}
		line := strings.Join(text, " ") + "\n"
		if file == "" {
			out.WriteString(line)
			return 0
		}
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fail("echo: %v", err)
		}
		defer f.Close()
		if _, err := f.WriteString(line); err != nil {
			return fail("echo: %v", err)
		}
		return 0
	case "cmp":
		if len(args) != 3 {
			t.Fatalf("cmp A B, got %q", args)
		}
		a, err := os.ReadFile(args[1])
		if err != nil {
			return fail("cmp: %v", err)
		}
		b, err := os.ReadFile(args[2])
		if err != nil {
			return fail("cmp: %v", err)
		}
		if !bytes.Equal(a, b) {
			return fail("%s %s differ", args[1], args[2])
		}
		return 0
	case "truncate":
		// truncate -s [-]N FILE
		if len(args) != 4 || args[1] != "-s" {
			t.Fatalf("truncate -s [-]N FILE, got %q", args)
		}
		n, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(args[3])
		if err != nil {
			return fail("truncate: %v", err)
		}
		size := n
		if strings.HasPrefix(args[2], "-") {
			size = fi.Size() + n
		}
		if err := os.Truncate(args[3], size); err != nil {
			return fail("truncate: %v", err)
		}
		return 0
	}
	t.Fatalf("unknown command %q", args[0])
	return 0
}

// writeTranscript rewrites the expected output of the blocks that differ.
func writeTranscript(t *testing.T, tr *transcript) {
	var b strings.Builder
	next := 0
	for _, bl := range tr.blocks {
		for ; next <= bl.line; next++ {
			b.WriteString(tr.lines[next] + "\n")
		}
		if bl.differ {
			for _, l := range bl.got {
				b.WriteString(l + "\n")
			}
			fmt.Fprintf(&b, "[exit %d]\n", bl.gotRC)
		} else {
			for _, l := range tr.lines[bl.line+1 : bl.end+1] {
				b.WriteString(l + "\n")
			}
		}
		next = bl.end + 1
	}
	for ; next < len(tr.lines); next++ {
		b.WriteString(tr.lines[next] + "\n")
	}
	for _, f := range tr.files {
		fmt.Fprintf(&b, "-- %s --\n", f.name)
		b.Write(f.data)
	}
	if err := os.WriteFile(tr.abs, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote %s", tr.path)
}
