package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// execute runs one command line in-process and returns its exit code and
// output (stdout and stderr together).
func execute(t *testing.T, ctx context.Context, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := newCLI(&out).Execute(ctx, args)
	return code, out.String()
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func countLines(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte{'\n'})
}

// TestRunFollow tails a growing input until the context is cancelled (as
// SIGINT does in Main), then stops cleanly: every line recorded, the
// recording complete, the pointer at the end, exit 0.
func TestRunFollow(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	out := filepath.Join(dir, "out.jsonl")
	st := filepath.Join(dir, "run.csv")
	writeLines(t, in, "alice,1", "bob,2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code int
		out  string
	}
	lines := make(chan struct{}, 16)
	signal := cli.WithOutWriter(func(w io.Writer) io.Writer { return lineSignal{w, lines} })
	done := make(chan result, 1)
	go func() {
		var o bytes.Buffer
		code := newCLI(&o, signal).Execute(ctx, []string{"run", "--app", "ledger", "--input", in, "--store", st, "--follow", "--out", out,
			"--state", filepath.Join(dir, "state.json"), "--status", filepath.Join(dir, "status.json")})
		done <- result{code, o.String()}
	}()
	awaitLines(t, lines, 2)
	if n := countLines(t, out); n != 2 {
		t.Fatalf("%d output lines, want 2", n)
	}
	writeLines(t, in, "carol,3", "transfer,alice,bob,1")
	awaitLines(t, lines, 3)
	if n := countLines(t, out); n != 5 {
		t.Fatalf("%d output lines, want 5", n)
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run --follow did not stop on cancel")
	}
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	if !strings.Contains(r.out, "read      "+in+" (committed, pointer "+in+".ptr): 4 lines") {
		t.Errorf("output:\n%s", r.out)
	}
	code, o := execute(t, context.Background(), "verify", st)
	if code != 0 {
		t.Errorf("verify: exit %d:\n%s", code, o)
	}
	code, o = execute(t, context.Background(), "replay", st)
	if code != 0 {
		t.Errorf("replay: exit %d:\n%s", code, o)
	}
	var status engine.Status
	b, err := os.ReadFile(filepath.Join(dir, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &status); err != nil {
		t.Fatal(err)
	}
	if !status.Settled || !status.Lossless || status.Feeds[0].Acknowledged != 4 {
		t.Errorf("status: %s", b)
	}
}

// lineSignal passes writes through to w and signals each line written.
type lineSignal struct {
	w     io.Writer
	lines chan<- struct{}
}

func (s lineSignal) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	for range bytes.Count(p[:n], []byte{'\n'}) {
		s.lines <- struct{}{}
	}
	return n, err
}

// awaitLines waits for n more lines signalled by a lineSignal. The run
// tails a real file, so a line comes when the source next polls it; the
// wait fails after 30 s.
func awaitLines(t *testing.T, lines <-chan struct{}, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for i := range n {
		select {
		case <-lines:
		case <-timeout:
			t.Fatalf("%d of %d output lines written after 30 s", i, n)
		}
	}
}

// TestRunDrops: a slow processor behind a one-slot queue under the drop
// policy loses lines; the run says so (exit 3), warns once of the queue's
// first drop (stderr), and the recording holds the DROPPED rows, so its
// replay is identical but not lossless (exit 3).
func TestRunDrops(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	for i := range 50 {
		writeLines(t, in, fmt.Sprintf("a%d,%d", i, 1000+i))
	}
	st := filepath.Join(dir, "run.db")
	var stdout, stderr bytes.Buffer
	code := newCLI(&stdout, cli.WithStderr(&stderr)).Execute(context.Background(), []string{"run", "--app", "alerts", "--input", in, "--store", st,
		"--read", "once-earliest", "--policy", "drop", "--spin", "0s", "--queue", "1", "--delay", "1ms", "--json"})
	out := stdout.String()
	if code != cli.ExitIncomplete {
		t.Fatalf("exit %d, want %d:\n%s%s", code, cli.ExitIncomplete, stderr.String(), out)
	}
	var status engine.Status
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatal(err)
	}
	if status.Lossless || status.Feeds[0].Dropped == 0 || !status.Settled || status.Feeds[0].Subscribers[0].Dropped != status.Feeds[0].Dropped {
		t.Errorf("status: %s", out)
	}
	if got := strings.Count(stderr.String(), "blackbox: warning: queue main/input: first drop"); got != 1 {
		t.Errorf("%d first-drop warnings, want 1:\n%s", got, stderr.String())
	}
	code, out = execute(t, context.Background(), "replay", st)
	if code != cli.ExitIncomplete || !strings.Contains(out, "LOSSY") {
		t.Errorf("replay: exit %d:\n%s", code, out)
	}
}

// TestDelayKeepsInterfaces: --delay wraps the processor, keeping its
// Snapshotter (a START snapshot) and TimerHandler (a tick's timer).
func TestDelayKeepsInterfaces(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, "alice,5", "tick")
	st := filepath.Join(dir, "run.csv")
	code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", in, "--store", st,
		"--read", "once-earliest", "--delay", "1ms")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out = execute(t, context.Background(), "inspect", st)
	if code != 0 || !strings.Contains(out, "START 1, DELIVERY 2, INLINE 2, TIMER 1, OUTPUT 2, END 1") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out = execute(t, context.Background(), "replay", st)
	if code != 0 {
		t.Errorf("replay: exit %d:\n%s", code, out)
	}
}

// snapshot maps every file under dir to the SHA-256 of its content.
// SQLite's -wal and -shm files are left out: a read-only open of a
// recording may create them beside it (see the report on sqlitestore).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "-wal") || strings.HasSuffix(p, "-shm") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		m[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestErrorsLeaveNothingBehind runs every error path against a directory
// holding recordings and checks, by checksum, that no file was created,
// removed or changed, and that every one exits 2 with a message.
func TestErrorsLeaveNothingBehind(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeLines(t, "in.txt", "alice,1", "bob,2", "transfer,alice,bob,1")
	for _, args := range [][]string{
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "rec.csv", "--read", "once-earliest"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "rec.db", "--read", "once-earliest"},
	} {
		if code, out := execute(t, context.Background(), args...); code != 0 {
			t.Fatalf("%q: exit %d:\n%s", args, code, out)
		}
	}
	if err := os.WriteFile("notes.txt", []byte("not a recording\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("sub", 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for _, args := range [][]string{
		// run: refused stores, bad inputs, bad flags, a failure after the store was created
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "rec.csv"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "rec.db"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "notes.txt"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "notes.txt", "--force"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--out", "./in.txt"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--status", "rec.csv"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "sub"},
		{"run", "--app", "ledger", "--input", "missing.txt", "--store", "new.csv"},
		{"run", "--app", "ledger", "--input", "sub", "--store", "new.csv"},
		{"run", "--app", "nope", "--input", "in.txt", "--store", "new.csv"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--read", "never"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--policy", "never"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--format", "xml"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--out", "nodir/out.jsonl"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--status", "nodir/status.json"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--state", "nodir/state.json"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--pointer", "nodir/in.ptr"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "new.csv", "--state", "notes.txt"},
		{"run", "--app", "ledger", "--input", "in.txt", "--store", "nodir/new.csv"},
		{"run", "--bogus"},
		// convert: never overwrites, cleans up
		{"convert", "rec.csv", "rec.db"},
		{"convert", "rec.db", "rec.csv"},
		{"convert", "rec.csv", "notes.txt"},
		{"convert", "notes.txt", "new.db"},
		{"convert", "missing.csv", "new.db"},
		{"convert", "rec.csv", "nodir/new.db"},
		{"convert", "rec.csv", "new.db", "--format", "xml"},
		// readers of a bad file
		{"verify", "notes.txt"}, {"verify", "sub"}, {"verify", "missing.db"},
		{"inspect", "notes.txt"}, {"inspect", "rec.csv", "--kind", "nope"},
		{"replay", "notes.txt"}, {"replay", "rec.db", "--app", "nope"},
		{"diff", "rec.csv", "notes.txt"}, {"diff", "rec.csv,", "rec.db"},
		// demo and crashtest refuse a file for a directory
		{"demo", "--dir", "notes.txt"}, {"crashtest", "--dir", "notes.txt", "--lines", "10", "--kills", "1"},
		{"golden", "check", "missing"}, {"golden", "update", "notes.txt"},
		{"nope"},
	} {
		code, out := execute(t, context.Background(), args...)
		if code != cli.ExitFailure {
			t.Errorf("%q: exit %d, want %d:\n%s", args, code, cli.ExitFailure, out)
		}
		if !strings.HasPrefix(out, "blackbox: ") {
			t.Errorf("%q: no error message:\n%s", args, out)
		}
		after := snapshot(t, dir)
		for name, sum := range before {
			if after[name] != sum {
				t.Errorf("%q changed or removed %s", args, name)
			}
		}
		for name := range after {
			if _, ok := before[name]; !ok {
				t.Errorf("%q left %s behind", args, name)
				os.Remove(filepath.Join(dir, name))
			}
		}
	}
}

// TestRunStateSkipsApplied: a second committed run over the same input and
// state applies nothing again; a new line is applied once.
func TestRunStateSkipsApplied(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	state := filepath.Join(dir, "state.json")
	writeLines(t, in, "alice,10", "transfer,alice,bob,3")
	for i, want := range []int64{3, 4} {
		st := filepath.Join(dir, fmt.Sprintf("run-%d.csv", i))
		if code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", in, "--store", st,
			"--state", state); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		b, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		var s apps.LedgerState
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if s.Applied != want {
			t.Errorf("run %d: applied %d, want %d", i, s.Applied, want)
		}
		writeLines(t, in, "carol,1")
	}
	// The second run re-read nothing it had committed.
	r, err := csvstore.Open(filepath.Join(dir, "run-1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for e, err := range r.Stream("ledger") {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind.IsInput() {
			n++
		}
	}
	if n != 1 {
		t.Errorf("second run recorded %d inputs, want 1", n)
	}
}

// A run refused once its files exist (its context ended before the engine
// started) exits 2 and leaves no file it made: its recording, and --out
// and --out's marks (OUT.outbox) when they did not exist, are removed with
// their locks. An --out that existed is kept as it was, and so are the
// marks an earlier run left: the next run delivers each output once. (A
// recording the store cannot write, a full disk, fails at its first
// Append, which leaves nothing of its own: store/csvstore and
// store/sqlitestore test it.)
func TestARunRefusedWhileCreatingItsFilesLeavesNoneOfThem(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	run := func(args ...string) []string {
		return append([]string{"run", "--app", "ledger", "--input", "in.txt"}, args...)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T) // before the refused run, in its directory
		args  []string
		want  []string // --out's lines once a run that is not refused ran: the accounts posted, or a line of its own
	}{
		{"sqlite and a new out", nil, []string{"--store", "new.db", "--out", "out.jsonl"}, []string{"alice", "bob"}},
		{"csv and a new out", nil, []string{"--store", "new.csv", "--out", "out.jsonl"}, []string{"alice", "bob"}},
		{"envelope lines to a new out", nil, []string{"--store", "new.csv", "--out", "out.jsonl", "--out-format", "envelope"},
			[]string{"alice", "bob"}},
		{"an out that exists, without marks", func(t *testing.T) { writeLines(t, "out.jsonl", `{"mine":1}`) },
			[]string{"--store", "new.csv", "--out", "out.jsonl"}, []string{`{"mine":1}`, "alice", "bob"}},
		{"an out and the marks of an earlier run", func(t *testing.T) {
			if code, out := execute(t, context.Background(), run("--store", "first.csv", "--out", "out.jsonl")...); code != 0 {
				t.Fatalf("the earlier run: exit %d:\n%s", code, out)
			}
			writeLines(t, "in.txt", "carol,3")
		}, []string{"--store", "new.csv", "--out", "out.jsonl"}, []string{"alice", "bob", "carol"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			writeLines(t, "in.txt", "alice,1", "bob,2")
			if tt.setup != nil {
				tt.setup(t)
			}
			before, outBefore := listing(t, dir), readOrNil("out.jsonl")
			code, out := execute(t, cancelled, run(tt.args...)...)
			if code != cli.ExitFailure {
				t.Errorf("exit %d, want %d:\n%s", code, cli.ExitFailure, out)
			}
			if diff := cmp.Diff(before, listing(t, dir)); diff != "" {
				t.Errorf("files before and after the refused run (-before +after):\n%s", diff)
			}
			if got := readOrNil("out.jsonl"); !bytes.Equal(got, outBefore) {
				t.Errorf("--out changed by the refused run: %q, was %q", got, outBefore)
			}
			// What it left lets the next run deliver each output once.
			if code, out := execute(t, context.Background(), run(tt.args...)...); code != 0 {
				t.Fatalf("the run after it: exit %d:\n%s", code, out)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSuffix(string(readOrNil("out.jsonl")), "\n"), "\n") {
				var o struct {
					Account string          `json:"account"`
					Output  json.RawMessage `json:"output"` // --out-format envelope
				}
				if json.Unmarshal([]byte(l), &o) == nil && o.Output != nil {
					json.Unmarshal(o.Output, &o)
				}
				if o.Account == "" {
					o.Account = l
				}
				got = append(got, o.Account)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("--out after the next run (-want +got):\n%s", diff)
			}
		})
	}
}

// readOrNil is the content of the file at path, nil when it cannot be read.
func readOrNil(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// listing names every file and directory under dir (sorted, relative).
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
