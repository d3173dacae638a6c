package golden_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/golden"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

var update = flag.Bool("update", false, "re-record the golden cases of testdata/")

// builtins are the built-in apps (a ledger without a state file).
func builtins() []core.App { return apps.All() }

// TestGolden replays every golden case of testdata from its CSV recording
// (go test ./golden -update re-records them first).
func TestGolden(t *testing.T) {
	if *update {
		if err := golden.Update("testdata", builtins()...); err != nil {
			t.Fatal(err)
		}
	}
	golden.Check(t, "testdata", builtins()...)
}

// TestGoldenSQLite replays every golden recording after converting it to
// SQLite (store.Copy): every golden case, CSV and SQLite, identical and
// with no problem but a case's recorded failure.
func TestGoldenSQLite(t *testing.T) {
	cases, err := golden.Cases("testdata")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		files, _ := filepath.Glob(filepath.Join(c.Dir, "*.csv"))
		for _, f := range files {
			n++
			t.Run(c.Name+"/"+filepath.Base(f), func(t *testing.T) {
				src, err := csvstore.Open(f)
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				r := storetest.Reopen(t, storetest.SQLite, filepath.Join(t.TempDir(), "r.db"), src)
				rep, err := replayer.Replay(context.Background(), r, builtins(),
					replayer.Options{AppOptions: map[string]map[string]string{c.App: c.Options}})
				if err != nil {
					t.Fatal(err)
				}
				damaged := slices.ContainsFunc(rep.Problems, func(p store.Problem) bool { return p.Kind != store.ProblemFailed })
				if !rep.Identical || damaged {
					var b strings.Builder
					rep.WriteText(&b)
					t.Errorf("SQLite copy does not replay identical:\n%s", b.String())
				}
			})
		}
	}
	if n < 9 {
		t.Errorf("%d golden recordings, want at least 9 (8 cases, one with two runs)", n)
	}
}

// copyCases copies testdata's case.json and input.txt files (no recording)
// into a new folder.
func copyCases(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cases, err := golden.Cases("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if err := os.Mkdir(filepath.Join(dir, c.Name), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{golden.CaseFile, golden.InputFile} {
			b, err := os.ReadFile(filepath.Join(c.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, c.Name, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// TestUpdateIsDeterministic re-records every case twice, into two folders:
// the bytes are equal, and equal to the committed recordings.
func TestUpdateIsDeterministic(t *testing.T) {
	a, b := copyCases(t), copyCases(t)
	for _, d := range []string{a, b} {
		if err := golden.Update(d, builtins()...); err != nil {
			t.Fatal(err)
		}
	}
	cases, err := golden.Cases("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		files, _ := filepath.Glob(filepath.Join(c.Dir, "*.csv"))
		if len(files) == 0 {
			t.Errorf("case %s has no recording", c.Name)
		}
		for _, f := range files {
			name := filepath.Join(c.Name, filepath.Base(f))
			ba, err := os.ReadFile(filepath.Join(a, name))
			if err != nil {
				t.Fatal(err)
			}
			bb, err := os.ReadFile(filepath.Join(b, name))
			if err != nil {
				t.Fatal(err)
			}
			committed, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ba, bb) {
				t.Errorf("%s: two recordings of the same input differ:\n%s\n---\n%s", name, ba, bb)
			}
			if !bytes.Equal(ba, committed) {
				t.Errorf("%s: a re-recording differs from the committed one (go test ./golden -update if deliberate):\n%s\n--- committed:\n%s",
					name, ba, committed)
			}
		}
	}
	// Nothing but the recordings was written into the case folders.
	ents, _ := filepath.Glob(filepath.Join(a, "*", ".*"))
	if len(ents) > 0 {
		t.Errorf("left-over files: %v", ents)
	}
}

// recordingTB captures what Check reports.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Fatal(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

// TestCheckFailsOnAChange: an app that changed makes Check fail with the
// first divergence; a recorded failure and a recorded loss do not.
func TestCheckFailsOnAChange(t *testing.T) {
	tb := &recordingTB{TB: t}
	golden.Check(tb, "testdata", builtins()...)
	if len(tb.errs) != 0 {
		t.Fatalf("Check of the committed goldens: %v", tb.errs)
	}
	// A ledger whose postings are off by one.
	changed := []core.App{apps.AlertsApp(), {Name: "ledger", Decode: apps.Decode, New: func(map[string]string) (core.Processor, error) {
		l, err := apps.NewLedger(apps.LedgerOptions{})
		return offByOne{l}, err
	}}}
	tb = &recordingTB{TB: t}
	golden.Check(tb, "testdata", changed...)
	if len(tb.errs) != 7 { // every ledger recording (the restart case has two)
		t.Fatalf("want 7 errors (one per ledger recording), got %d:\n%s", len(tb.errs), strings.Join(tb.errs, "\n"))
	}
	if e := tb.errs[0]; !strings.Contains(e, "ledger-drop, recording.csv no longer reproduces") || !strings.Contains(e, "first divergence at index 3") {
		t.Errorf("first error:\n%s", e)
	}
	ok, report, err := golden.Verify("testdata", changed...)
	if err != nil || ok || !strings.Contains(report, "FAIL ledger-plain/recording.csv: diverged") ||
		!strings.Contains(report, "ok   alerts-journal/recording.csv") {
		t.Errorf("Verify: ok %v err %v report:\n%s", ok, err, report)
	}
	ok, report, err = golden.Verify("testdata", builtins()...)
	if err != nil || !ok || !strings.Contains(report, "ok   ledger-fail/recording.csv: ledger stops at its recorded failure") ||
		!strings.Contains(report, "ok   ledger-drop/recording.csv: ledger lost 5 items (recorded)") {
		t.Errorf("Verify: ok %v err %v report:\n%s", ok, err, report)
	}
}

// offByOne is a ledger that adds one to every amount.
type offByOne struct{ *apps.Ledger }

func (o offByOne) OnEvent(c *core.Cycle, ev any) error {
	if s, ok := ev.(string); ok {
		if i := strings.LastIndexByte(s, ','); i > 0 && !strings.HasPrefix(s, "transfer") {
			var n int64
			if _, err := fmt.Sscan(s[i+1:], &n); err == nil {
				ev = fmt.Sprintf("%s,%d", s[:i], n+1)
			}
		}
	}
	return o.Ledger.OnEvent(c, ev)
}

func TestCasesErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, caseJSON string) {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, golden.CaseFile), []byte(caseJSON), 0o644)
		os.WriteFile(filepath.Join(dir, name, golden.InputFile), []byte("a,1\n"), 0o644)
	}
	for _, bad := range []string{`{"app": ""}`, `{"app": "ledger", "format": "sqlite"}`, `{"app": "ledger", "nope": 1}`,
		`{"app": "ledger", "policy": "WAIT"}`, `{"app": "ledger", "drop": true, "restart_after": 2}`} {
		os.RemoveAll(dir)
		write("c", bad)
		_, err := golden.Cases(dir)
		var ce *golden.CaseError
		if !errors.Is(err, golden.ErrCase) || !errors.As(err, &ce) || ce.Case != "c" {
			t.Errorf("%s: err %v, want a CaseError wrapping ErrCase", bad, err)
		}
	}
	os.RemoveAll(dir)
	write("c", `{"app": "ledger", "options": {"threshold": "5"}}`)
	var ce *golden.CaseError
	if err := golden.Update(dir, builtins()...); !errors.Is(err, core.ErrOption) || !errors.As(err, &ce) || ce.Case != "c" {
		t.Errorf("an option the ledger does not take: %v, want a CaseError wrapping core.ErrOption", err)
	}
	os.RemoveAll(dir)
	write("c", `{"app": "ledger"}`)
	ok, report, err := golden.Verify(dir, builtins()...)
	if err != nil || ok || !strings.Contains(report, "FAIL c/recording.csv: golden: no recording") {
		t.Errorf("no recording: ok %v err %v %s", ok, err, report)
	}
	if err := golden.Update(dir); !errors.Is(err, replayer.ErrUnknownApp) {
		t.Errorf("unknown app: %v", err)
	}
}

// scaled is an app of a user's own, named "alerts" like a built-in one: it
// emits each line's number times its option factor (default 1).
func scaled() core.App {
	return core.App{Name: "alerts", Decode: apps.Decode, New: func(o map[string]string) (core.Processor, error) {
		factor := 1
		for k, v := range o {
			n, err := strconv.Atoi(v)
			if k != "factor" || err != nil {
				return nil, fmt.Errorf("%w: %s=%s", core.ErrOption, k, v)
			}
			factor = n
		}
		return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			n, err := strconv.Atoi(ev.(string))
			if err != nil {
				return err
			}
			c.Emit("scaled", n*factor)
			return nil
		}), nil
	}}
}

// A case's options configure any app, the user's own too, when it is
// recorded and when it is checked; an app of a built-in's name is the
// user's, never swapped for the built-in one.
func TestCaseOptionsConfigureTheUsersOwnApp(t *testing.T) {
	dir := t.TempDir()
	cdir := filepath.Join(dir, "mine")
	writeCase := func(caseJSON string) {
		t.Helper()
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{golden.CaseFile: caseJSON, golden.InputFile: "1\n2\n"} {
			if err := os.WriteFile(filepath.Join(cdir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeCase(`{"app": "alerts", "options": {"factor": "3"}}`)
	if err := golden.Update(dir, scaled()); err != nil {
		t.Fatal(err)
	}
	r, err := csvstore.Open(filepath.Join(cdir, golden.Recording))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for e, err := range r.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == store.KindOutput {
			got = append(got, string(e.Payload))
		}
	}
	r.Close()
	if want := []string{"3", "6"}; !slices.Equal(got, want) {
		t.Fatalf("recorded outputs %q, want %q (factor 3, the user's app)", got, want)
	}
	tb := &recordingTB{TB: t}
	golden.Check(tb, dir, scaled())
	if len(tb.errs) != 0 {
		t.Fatalf("Check with the recorded options: %v", tb.errs)
	}
	writeCase(`{"app": "alerts", "options": {"factor": "4"}}`)
	tb = &recordingTB{TB: t}
	golden.Check(tb, dir, scaled())
	if len(tb.errs) != 1 {
		t.Fatalf("Check with factor 4: %d errors, want 1 (a divergence): %v", len(tb.errs), tb.errs)
	}
}

// TestACaseWhoseOptionsChangedSinceItsRecordingFails: a golden recording
// holds the options it was made with; a case.json whose options changed
// since (one given another value, one removed) fails the check, naming
// both, until the update records it again.
func TestACaseWhoseOptionsChangedSinceItsRecordingFails(t *testing.T) {
	for _, tc := range []struct {
		name, caseJSON, want string
	}{
		{"another value", `{"app": "alerts", "options": {"threshold": "700"}}`,
			"the case's options are threshold=700, its recording's threshold=500"},
		{"removed", `{"app": "alerts"}`, "the case's options are none, its recording's threshold=500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := filepath.Join(dir, "alerts-threshold")
			if err := os.Mkdir(c, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{golden.InputFile, golden.Recording} {
				b, err := os.ReadFile(filepath.Join("testdata", "alerts-threshold", f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(c, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(c, golden.CaseFile), []byte(tc.caseJSON), 0o644); err != nil {
				t.Fatal(err)
			}
			ok, report, err := golden.Verify(dir, builtins()...)
			if err != nil {
				t.Fatal(err)
			}
			if ok || !strings.Contains(report, tc.want) {
				t.Errorf("check ok %v, want false, naming %q:\n%s", ok, tc.want, report)
			}
			if err := golden.Update(dir, builtins()...); err != nil {
				t.Fatal(err)
			}
			if ok, report, err := golden.Verify(dir, builtins()...); err != nil || !ok {
				t.Errorf("after the update: ok %v, err %v:\n%s", ok, err, report)
			}
		})
	}
}
