package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
)

// TestAnInputWhoseOutputRowsACrashCutIsIncompleteNotDiverged: a CSV
// recording killed inside a write whose last input row is whole but whose
// OUTPUT row is torn holds an input with fewer OUTPUT rows than its n (an
// orphan the store reports). The recording is incomplete there, which says
// nothing of what the input emitted: replay stops the stream there as
// incomplete (identical, not complete, exit 3), diff (against itself and
// against the whole recording) lists no difference and says not complete,
// and explain says not complete, each exiting 3. replay called it
// "DIVERGED ... want: no output" and exited 1, and diff against the whole
// recording listed the input as different.
func TestAnInputWhoseOutputRowsACrashCutIsIncompleteNotDiverged(t *testing.T) {
	t.Chdir(t.TempDir())
	writeLines(t, "in.txt", "alice,1", "bob,2", "carol,3")
	if code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", "in.txt", "--store", "whole.csv"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	b, err := os.ReadFile("whole.csv")
	if err != nil {
		t.Fatal(err)
	}
	// Keep the lines up to the last OUTPUT row, and cut that one short.
	lines := bytes.SplitAfter(b, []byte("\n"))
	last := -1
	for i, l := range lines {
		if bytes.Contains(l, []byte(",OUTPUT,")) {
			last = i
		}
	}
	if last < 0 {
		t.Fatalf("no OUTPUT row in the recording:\n%s", b)
	}
	cut := bytes.Join(lines[:last+1], nil)
	cut = cut[:len(cut)-20]
	if err := os.WriteFile("cut.csv", cut, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, v := range verdicts(t, "cut.csv") {
		name, _, _ := strings.Cut(v.command, " ")
		if v.code != cli.ExitIncomplete {
			t.Errorf("%s: exit %d, want %d:\n%s", v.command, v.code, cli.ExitIncomplete, v.out)
		}
		says := map[string]string{"verify": "1 orphan, 1 torn, 1 unfinished", "replay": "identical, INCOMPLETE",
			"diff": "NOT COMPLETE", "explain": "not complete", "report": "NOT COMPLETE"}[name]
		if !strings.Contains(v.out, says) || strings.Contains(v.out, "DIVERGED") || strings.Contains(v.out, "different:") {
			t.Errorf("%s: want it to say %q, and no divergence or difference:\n%s", v.command, says, v.out)
		}
	}

	code, out := execute(t, context.Background(), "replay", "cut.csv", "--json")
	var rep struct {
		Identical, Complete bool
		Processors          []struct {
			Inputs, Outputs, Divergences int64
			StopKind                     string
			StopIndex                    int64
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("replay --json: exit %d, %v:\n%s", code, err, out)
	}
	if code != cli.ExitIncomplete || !rep.Identical || rep.Complete || len(rep.Processors) != 1 {
		t.Fatalf("replay --json: exit %d, %+v: want %d, identical, not complete, one processor", code, rep, cli.ExitIncomplete)
	}
	// The stream: START, then DELIVERY, INLINE, OUTPUT per line: the third
	// line's input is index 9, its OUTPUT (index 10) torn.
	if p := rep.Processors[0]; p.StopKind != "incomplete" || p.StopIndex != 9 || p.Divergences != 0 || p.Outputs != 2 {
		t.Errorf("replay of the ledger: %+v: want stopped incomplete at index 9, 2 outputs compared, no divergence", p)
	}

	code, out = execute(t, context.Background(), "diff", "cut.csv", "whole.csv")
	if code != cli.ExitIncomplete || !strings.Contains(out, "NOT COMPLETE") || strings.Contains(out, "different:") ||
		!strings.Contains(out, "0 different") {
		t.Errorf("diff cut.csv whole.csv: exit %d, want %d, not complete and no difference:\n%s", code, cli.ExitIncomplete, out)
	}
}
