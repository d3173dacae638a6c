package cli_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/outbox"
)

// envelope is a line of --out-format envelope.
type envelope struct {
	Key    core.EffectKey  `json:"key"`
	Output json.RawMessage `json:"output"`
}

// envelopeKey is what a test wants of an envelope line: the account the
// output posts to ("timer" for a timer's summary) and its key.
type envelopeKey struct {
	Account string
	Key     core.EffectKey
}

// --out-format envelope writes each output as {"key":KEY,"output":VALUE},
// KEY the output's core.EffectKey: the feed, epoch and position of the
// input that produced it and its index among that input's outputs (a
// transfer's two postings: 1 and 2), the same across runs; a timer's
// output, which has no input position, names its recording (META's created
// instant), stream and row. Every key is unique, across runs too: a
// restart delivers no output again, and a reader of the file could drop a
// key it has seen.
func TestEnvelopeLinesCarryEachOutputsKeyOnce(t *testing.T) {
	pos := func(account string, offset, index int64) envelopeKey {
		return envelopeKey{account, core.EffectKey{Feed: "input", Position: core.Position{Offset: offset}, Index: index}}
	}
	// timer is the key of a timer's output in the recording created at
	// created: each run's CLI has a step clock whose first reading, META's
	// created, is epoch, and the clock of run i (from 0) begins i hours
	// later (two runs of a test must not share the instant: real ones do
	// not).
	timer := func(run int) envelopeKey {
		created := epoch.Add(time.Duration(run) * time.Hour).Format(time.RFC3339)
		return envelopeKey{"timer", core.EffectKey{Index: 1, Recording: created, Stream: "ledger"}}
	}
	tests := []struct {
		name string
		runs [][]string // the lines each run appends to the input before it runs
		args []string
		want []envelopeKey // Epoch: the input's, filled in; a timer's Row: checked positive, then left out
	}{
		{"one line", [][]string{{"alice,1"}}, nil, []envelopeKey{pos("alice", 8, 1)}},
		{"a transfer: two outputs of one line", [][]string{{"alice,1", "transfer,alice,bob,1", "bob,2"}}, nil,
			[]envelopeKey{pos("alice", 8, 1), pos("alice", 29, 1), pos("bob", 29, 2), pos("bob", 35, 1)}},
		{"a timer", [][]string{{"alice,1", "tick"}}, nil, []envelopeKey{timer(0), pos("alice", 8, 1)}},
		// The second run's timer is at the same row of its recording as
		// the first's: its key differs by its recording alone.
		{"a timer in each of two runs", [][]string{{"alice,1", "tick"}, {"bob,2", "tick"}}, nil,
			[]envelopeKey{timer(0), timer(1), pos("alice", 8, 1), pos("bob", 19, 1)}},
		{"a restart reads on", [][]string{{"alice,1", "bob,2"}, {"carol,3"}}, nil,
			[]envelopeKey{pos("alice", 8, 1), pos("bob", 14, 1), pos("carol", 22, 1)}},
		{"a restart with state", [][]string{{"alice,1", "bob,2"}, {"carol,3", "transfer,carol,alice,2"}}, []string{"--state", "st.json"},
			[]envelopeKey{pos("alice", 8, 1), pos("bob", 14, 1), pos("carol", 22, 1), pos("carol", 45, 1), pos("alice", 45, 2)}},
		{"two workers", [][]string{{"alice,1", "bob,2", "alice,3"}}, []string{"--workers", "2"},
			[]envelopeKey{pos("alice", 8, 1), pos("bob", 14, 1), pos("alice", 22, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			for i, lines := range tt.runs {
				writeLines(t, "in.txt", lines...)
				args := append([]string{"run", "--app", "ledger", "--input", "in.txt", "--store", fmt.Sprintf("r%d.csv", i+1),
					"--out", "out.jsonl", "--out-format", "envelope"}, tt.args...)
				var out bytes.Buffer
				clock := cli.WithClock(core.NewStepClock(epoch.Add(time.Duration(i)*time.Hour), time.Second))
				if code := newCLI(&out, clock).Execute(context.Background(), args); code != 0 {
					t.Fatalf("run %d: exit %d:\n%s", i+1, code, out.String())
				}
			}
			ptr, err := filesource.ReadPointer("in.txt.ptr")
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile("out.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			var got []envelopeKey
			seen := map[core.EffectKey]bool{}
			for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				var e envelope
				var o ledgerOut
				d := json.NewDecoder(strings.NewReader(l))
				d.DisallowUnknownFields() // {"key":{...},"output":...} and nothing else
				if err := d.Decode(&e); err != nil || json.Unmarshal(e.Output, &o) != nil {
					t.Fatalf("line %d: not an envelope (%v): %s", i+1, err, l)
				}
				if seen[e.Key] {
					t.Errorf("line %d: key again: %s", i+1, l)
				}
				seen[e.Key] = true
				k := envelopeKey{o.Account, e.Key}
				if o.Timer > 0 {
					k.Account = "timer"
					if k.Key.Row <= 0 {
						t.Errorf("line %d: a timer's output without its row: %s", i+1, l)
					}
					k.Key.Row = 0
				}
				got = append(got, k)
			}
			want := append([]envelopeKey(nil), tt.want...)
			for i := range want {
				if want[i].Key.Feed != "" {
					want[i].Key.Epoch = ptr.Epoch
				}
			}
			// In key order: workers' outputs come by worker; a timer's
			// outputs (position 0) first, by recording.
			byKey := func(a, b envelopeKey) int {
				return cmp.Or(cmpInt(a.Key.Position.Offset, b.Key.Position.Offset), cmpInt(a.Key.Index, b.Key.Index),
					strings.Compare(a.Key.Recording, b.Key.Recording))
			}
			slices.SortStableFunc(want, byKey)
			slices.SortStableFunc(got, byKey)
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("--out's keys (-want +got):\n%s\n%s", diff, b)
			}
		})
	}
}

func cmpInt(a, b int64) int { return cmp.Compare(a, b) }

// refused checks that a run was refused before any work: exit 2 with an
// error the CLI prints naming path, and no file of dir created, changed
// or removed (before: its snapshot).
func refused(t *testing.T, dir string, before map[string]string, code int, err error, out, path string) {
	t.Helper()
	if code != cli.ExitFailure || err == nil {
		t.Fatalf("exit %d, %v; want %d, refused:\n%s", code, err, cli.ExitFailure, out)
	}
	if !strings.Contains(out, "blackbox: ") || !strings.Contains(out, path) {
		t.Errorf("the refusal does not name %s:\n%s", path, out)
	}
	checkUnchanged(t, "the refused run", dir, before)
}

// execErr runs a command line like execute, also returning its error.
func execErr(t *testing.T, args ...string) (int, error, string) {
	t.Helper()
	var out bytes.Buffer
	code, err := runErr(t, context.Background(), newCLI(&out), args...)
	if err != nil {
		out.WriteString("blackbox: " + err.Error() + "\n") // as Execute prints it
	}
	return code, err, out.String()
}

// An --out whose marks (OUT.outbox) were written for another --out-format
// is refused before any work, exit 2 as another refused state is (the
// state of other workers), naming the marks file and its line: its lines
// would be of two formats. The marks, --out, the pointer and the state are
// left as they were, and a run with the marks' format goes on.
func TestARestartWithAnotherOutFormatIsRefusedNamingTheMarks(t *testing.T) {
	for _, tc := range []struct{ first, then string }{
		{outbox.FormatValue, outbox.FormatEnvelope},
		{outbox.FormatEnvelope, outbox.FormatValue},
	} {
		t.Run(tc.first+" then "+tc.then, func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.jsonl")
			run := func(store, format string) []string {
				return []string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, store), "--state",
					filepath.Join(dir, "st.json"), "--out", out, "--out-format", format}
			}
			writeLines(t, in, "alice,1", "bob,2")
			if code, out := execute(t, context.Background(), run("r1.csv", tc.first)...); code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			writeLines(t, in, "carol,3")
			before := snapshot(t, dir)
			code, err, text := execErr(t, run("r2.csv", tc.then)...)
			refused(t, dir, before, code, err, text, out+".outbox")
			var me *outbox.MarksError
			if !errors.As(err, &me) || me.Path != out+".outbox" || me.Line != 1 || !errors.Is(err, outbox.ErrMarks) {
				t.Errorf("error %v: want an *outbox.MarksError of %s line 1 (its header) wrapping outbox.ErrMarks", err, out+".outbox")
			}
			if code, text := execute(t, context.Background(), run("r2.csv", tc.first)...); code != 0 {
				t.Fatalf("a run with the marks' format: exit %d:\n%s", code, text)
			}
			if n := countLines(t, out); n != 3 {
				t.Errorf("--out holds %d lines, want 3", n)
			}
		})
	}
}

// A marks file with a line that is not a mark, not its torn last line, is
// refused before any work, naming the file and the line
// (*outbox.MarksError): the outbox cannot know what it delivered. The
// marks are those of a run stopped by a full disk on --out: a clean run
// leaves a header alone, this one its run, commit and batch lines.
func TestAMarksFileWithABadLineIsRefusedNamingItsLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		line int    // the line replaced
		with string // by this
	}{
		{"a header that is not one", 1, `{"outbox":1,"sink":"file","format":"value","batch":0,"size":0,"extra":1}`},
		{"a middle line cut short", 3, `{"commit":{"run":0,"feed":"in`},
		{"a middle line of no known kind", 3, `{"what":1}`},
		{"a commit of a run not named", 3, `{"commit":{"run":7,"feed":"input","key":"","seq":1,"epoch":1,"offset":8}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.jsonl")
			marks := out + ".outbox"
			run := func(store string) []string {
				return []string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, store), "--out", out}
			}
			writeLines(t, in, "alice,1", "bob,2")
			var buf bytes.Buffer
			full := cli.WithOutWriter(func(w io.Writer) io.Writer { return &fullDisk{w: w, room: 100} })
			if code, err := runErr(t, context.Background(), newCLI(&buf, full), run("r1.csv")...); code != cli.ExitIncomplete || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("the run on a full disk: exit %d, %v; want %d, ENOSPC:\n%s", code, err, cli.ExitIncomplete, buf.String())
			}
			b, err := os.ReadFile(marks)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitAfter(string(b), "\n")
			if len(lines) < 5 { // a header, a run, a commit, a batch; "" after the last line break
				t.Fatalf("the marks hold %d lines, want a header, a run, commits and batches:\n%s", len(lines)-1, b)
			}
			lines[tc.line-1] = tc.with + "\n"
			if err := os.WriteFile(marks, []byte(strings.Join(lines, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			writeLines(t, in, "carol,3")
			before := snapshot(t, dir)
			code, err, text := execErr(t, run("r2.csv")...)
			refused(t, dir, before, code, err, text, marks)
			var me *outbox.MarksError
			if !errors.As(err, &me) || me.Path != marks || me.Line != tc.line || !errors.Is(err, outbox.ErrMarks) {
				t.Errorf("error %v: want an *outbox.MarksError of %s line %d wrapping outbox.ErrMarks", err, marks, tc.line)
			}
			if !strings.Contains(text, fmt.Sprintf("%s:%d:", marks, tc.line)) {
				t.Errorf("the refusal does not name the line as %s:%d:\n%s", marks, tc.line, text)
			}
		})
	}
}

// lastBatchSize is the size --out had before the last batch its marks
// name (docs/FORMAT.md, the outbox's marks: {"batch":{"size":...}}).
func lastBatchSize(t *testing.T, marks string) int64 {
	t.Helper()
	b, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(-1)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] { // after the header
		var m struct {
			Batch *struct{ Size int64 } `json:"batch"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v: %s", marks, err, l)
		}
		if m.Batch != nil {
			size = m.Batch.Size
		}
	}
	if size < 0 {
		t.Fatalf("%s names no batch:\n%s", marks, b)
	}
	return size
}

// An --out that does not hold what its marks say it was given (cut short
// by hand before its last batch, emptied, a line appended by another
// program, its last batch's bytes changed) is refused before any work
// (outbox.ErrOut), naming the file: the outbox cannot know which outputs
// it holds. Nothing is appended. An --out cut within its last batch is
// what a crash in the middle of the batch's write leaves: the restart
// appends the rest, and --out holds each output once.
//
// The marks name a last batch only after a run that did not end clean (a
// clean one leaves a header alone): the second run's disk fills in the
// middle of its line, and the run stops with its batch part written, as a
// crash in its write leaves it. So the line appended and the byte changed
// follow that part, not a whole line, and the cut within the batch is a
// cut within that part: the restart appends the rest of the line.
func TestAnOutFileChangedUnderItsMarksIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(b []byte, last int64) []byte // last: the size before the last batch
		refused bool
	}{
		{"cut before its last batch", func(b []byte, last int64) []byte { return b[:last-1] }, true},
		{"emptied", func([]byte, int64) []byte { return nil }, true},
		{"a line appended", func(b []byte, _ int64) []byte { return append(b, "{\"mine\":1}\n"...) }, true},
		{"its last batch changed", func(b []byte, _ int64) []byte {
			c := bytes.Clone(b)
			c[len(c)-2] = ' ' // a byte of the part of its line the last batch wrote
			return c
		}, true},
		{"cut within its last batch, as a crash cuts its write", func(b []byte, last int64) []byte { return b[:last+5] }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.jsonl")
			run := func(store string) []string {
				return []string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, store), "--out", out}
			}
			// Two runs: the last batch, the second run's, begins after
			// the first run's lines; the disk took room bytes of it.
			const room = 20
			writeLines(t, in, "alice,1", "bob,2")
			if code, out := execute(t, context.Background(), run("r1.csv")...); code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			writeLines(t, in, "carol,3")
			var buf bytes.Buffer
			full := cli.WithOutWriter(func(w io.Writer) io.Writer { return &fullDisk{w: w, room: room} })
			if code, err := runErr(t, context.Background(), newCLI(&buf, full), run("r2.csv")...); code != cli.ExitIncomplete || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("the second run on a full disk: exit %d, %v; want %d, ENOSPC:\n%s", code, err, cli.ExitIncomplete, buf.String())
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			last := lastBatchSize(t, out+".outbox")
			if last <= 0 || last+room != int64(len(b)) {
				t.Fatalf("the last batch begins at %d of --out's %d bytes: want it to hold the %d bytes of the second run's line the disk took", last, len(b), room)
			}
			if err := os.WriteFile(out, tc.change(b, last), 0o644); err != nil {
				t.Fatal(err)
			}
			writeLines(t, in, "dave,4")
			before := snapshot(t, dir)
			code, err, text := execErr(t, run("r3.csv")...)
			if !tc.refused {
				if code != 0 {
					t.Fatalf("exit %d, %v:\n%s", code, err, text)
				}
				checkOutOnce(t, out, []string{"alice,1", "bob,2", "carol,3", "dave,4"}, 0,
					filepath.Join(dir, "r1.csv"), filepath.Join(dir, "r2.csv"), filepath.Join(dir, "r3.csv"))
				return
			}
			refused(t, dir, before, code, err, text, out)
			if !errors.Is(err, outbox.ErrOut) {
				t.Errorf("error %v: want outbox.ErrOut", err)
			}
		})
	}
}

// --out-format takes value or envelope, and only with --out: anything else
// is a usage error (exit 2) before any work.
func TestABadOutFormatIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, "alice,1")
	base := []string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, "r.csv")}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"without --out", []string{"--out-format", "envelope"}, "--out-format needs --out"},
		{"an unknown format", []string{"--out", filepath.Join(dir, "o.jsonl"), "--out-format", "xml"}, `unknown --out-format "xml"`},
		{"empty", []string{"--out", filepath.Join(dir, "o.jsonl"), "--out-format", ""}, `unknown --out-format ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, dir)
			code, out := execute(t, context.Background(), append(append([]string{}, base...), tc.args...)...)
			if code != cli.ExitFailure || !strings.Contains(out, tc.want) || !strings.Contains(out, "Run 'blackbox run --help' for usage.") {
				t.Errorf("exit %d, output:\n%s\nwant exit 2, %q and the usage hint", code, out, tc.want)
			}
			checkUnchanged(t, "the refused run", dir, before)
		})
	}
}

// A recording whose outputs the marks say were not all delivered (a run
// stopped by a full disk on --out) that is gone when the next run starts
// is refused before any work (outbox.ErrRecording), naming it: its outputs
// cannot be delivered. Put back, the next run delivers them, each once.
func TestARecordingTheMarksNeedThatIsGoneIsRefused(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.jsonl")
	r1 := filepath.Join(dir, "r1.csv")
	run := func(store string) []string {
		return []string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, store), "--out", out}
	}
	writeLines(t, in, "alice,1", "bob,2", "carol,3")
	var buf bytes.Buffer
	full := cli.WithOutWriter(func(w io.Writer) io.Writer { return &fullDisk{w: w} })
	if code, err := runErr(t, context.Background(), newCLI(&buf, full), run("r1.csv")...); code != cli.ExitIncomplete || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the run on a full disk: exit %d, %v; want %d, ENOSPC:\n%s", code, err, cli.ExitIncomplete, buf.String())
	}
	if err := os.Rename(r1, r1+".aside"); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	code, err, text := execErr(t, run("r2.csv")...)
	refused(t, dir, before, code, err, text, r1)
	if !errors.Is(err, outbox.ErrRecording) {
		t.Errorf("error %v: want outbox.ErrRecording", err)
	}
	if err := os.Rename(r1+".aside", r1); err != nil {
		t.Fatal(err)
	}
	if code, text := execute(t, context.Background(), run("r2.csv")...); code != 0 {
		t.Fatalf("with the recording back: exit %d:\n%s", code, text)
	}
	checkOutOnce(t, out, []string{"alice,1", "bob,2", "carol,3"}, 0, r1, filepath.Join(dir, "r2.csv"))
}
