package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// fullDisk passes its first ok writes on and fails every later one with
// ENOSPC, as a write to a full disk does.
type fullDisk struct {
	w      io.Writer
	ok     int
	failed int
}

func (d *fullDisk) Write(b []byte) (int, error) {
	if d.ok == 0 {
		d.failed++
		return 0, &os.PathError{Op: "write", Path: "out.jsonl", Err: syscall.ENOSPC}
	}
	d.ok--
	return d.w.Write(b)
}

// TestAFailedOutputWriteIsNotLossless: when --out cannot be written (a
// full disk), the output is tried again, then counted as not written: the
// run stops and exits 3 naming the file, its status is not lossless, and
// nothing after the lost output reaches the saved state (it used to exit 0
// "lossless" with the state past the lost postings).
func TestAFailedOutputWriteIsNotLossless(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	out := filepath.Join(dir, "out.jsonl")
	state := filepath.Join(dir, "state.json")
	writeLines(t, in, "alice,1", "bob,2", "carol,3", "dave,4", "tick", "erin,5")
	disk := &fullDisk{ok: 2}
	var buf bytes.Buffer
	c := newCLI(&buf, cli.WithOutWriter(func(w io.Writer) io.Writer { disk.w = w; return disk }))
	code := c.Execute(context.Background(), []string{"run", "--app", "ledger", "--input", in, "--store",
		filepath.Join(dir, "r.csv"), "--state", state, "--out", out, "--status", filepath.Join(dir, "status.json")})
	if code != cli.ExitIncomplete {
		t.Fatalf("exit %d, want %d:\n%s", code, cli.ExitIncomplete, buf.String())
	}
	if !strings.Contains(buf.String(), " not written, the run stopped: "+out+": ") ||
		!strings.Contains(buf.String(), "lossless: no") {
		t.Errorf("output:\n%s", buf.String())
	}
	if disk.failed != 3 {
		t.Errorf("the lost output was written %d times, want 3 tries", disk.failed)
	}
	if n := countLines(t, out); n != 2 {
		t.Errorf("out.jsonl holds %d lines, want 2", n)
	}
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var s apps.LedgerState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Applied != 2 || s.Balances["carol"] != 0 {
		t.Errorf("saved state: applied %d, carol %d; want 2 postings applied, none lost", s.Applied, s.Balances["carol"])
	}
	var st engine.Status
	b, err = os.ReadFile(filepath.Join(dir, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Lossless || st.Feeds[0].Lossless {
		t.Errorf("status says lossless: %s", b)
	}
}

// halfFirst writes the first try of each output line (one that begins it,
// "{") in part, half of it, as a write interrupted by a signal may: the
// sink writes the rest at its next try.
type halfFirst struct{ w io.Writer }

func (h halfFirst) Write(b []byte) (int, error) {
	if len(b) > 1 && b[0] == '{' {
		return h.w.Write(b[:len(b)/2])
	}
	return h.w.Write(b)
}

// TestTheOutputsOfWorkersReachOutWholeOneAtATime: with --workers, the
// workers emit at once, and each output line goes to --out whole, never
// cut by another worker's line between its parts (the sink wrote for each
// worker at once: a line written in two parts had another worker's line
// between them, and its size count raced).
func TestTheOutputsOfWorkersReachOutWholeOneAtATime(t *testing.T) {
	const n = 80
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	out := filepath.Join(dir, "out.jsonl")
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf("acct-%d,%d", i%8, i+1))
	}
	writeLines(t, in, lines...)
	var buf bytes.Buffer
	c := newCLI(&buf, cli.WithOutWriter(func(w io.Writer) io.Writer { return halfFirst{w} }))
	if code := c.Execute(context.Background(), []string{"run", "--app", "ledger", "--input", in, "--store",
		filepath.Join(dir, "r.csv"), "--workers", "4", "--out", out}); code != 0 {
		t.Fatalf("exit %d:\n%s", code, buf.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	bad := 0
	for _, l := range got {
		var p apps.Posting
		if err := json.Unmarshal([]byte(l), &p); err != nil || p.Account == "" {
			bad++
		}
	}
	if len(got) != n || bad > 0 {
		t.Errorf("%d lines in --out, %d not one whole output; want %d whole:\n%s", len(got), bad, n, b)
	}
}
