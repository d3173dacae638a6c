package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/store"
)

// fullDisk is a disk with room for room more bytes: a write puts what
// fits and fails with ENOSPC for the rest, as a write to a full disk does.
// It counts the writes that failed.
type fullDisk struct {
	w      io.Writer
	room   int
	failed int
}

func (d *fullDisk) Write(b []byte) (int, error) {
	n, err := d.w.Write(b[:min(len(b), d.room)])
	d.room -= n
	if err == nil && n < len(b) {
		d.failed++
		err = &os.PathError{Op: "write", Path: "out.jsonl", Err: syscall.ENOSPC}
	}
	return n, err
}

// runErr runs one command line in-process like Execute, and returns its
// exit code and its error (nil for exit 0), unprinted: its output goes
// to the CLI's stdout and stderr.
func runErr(t *testing.T, ctx context.Context, c *cli.CLI, args ...string) (int, error) {
	t.Helper()
	cmd := c.Command()
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	var ee *cli.ExitError
	switch {
	case err == nil:
		return cli.ExitOK, nil
	case errors.As(err, &ee):
		return ee.Code, err
	}
	return cli.ExitFailure, err
}

// recordedOutputs is the payloads of a recording's OUTPUT rows, in
// storage order.
func recordedOutputs(t *testing.T, path string) []string {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var outs []string
	for e, err := range r.Rows() {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if e.Kind == store.KindOutput {
			outs = append(outs, string(e.Payload))
		}
	}
	return outs
}

// ledgerOut is one line of a ledger run's --out: a posting, or the
// summary of a timer.
type ledgerOut struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Balance int64  `json:"balance"`
	Timer   int    `json:"timer"`
}

// outOnce checks that each line of the file out is a whole line of JSON,
// there once, that one of the recordings recs holds as an OUTPUT row, and
// returns the ledger's postings in it, in order, as "account,balance",
// and how many timer summaries it holds.
func outOnce(t *testing.T, out string, recs ...string) (postings []string, timers int) {
	t.Helper()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, r := range recs {
		for _, o := range recordedOutputs(t, r) {
			recorded[o] = true
		}
	}
	seen := map[string]bool{}
	for i, l := range strings.SplitAfter(string(b), "\n") {
		if l == "" {
			continue
		}
		line := strings.TrimSuffix(l, "\n")
		var o ledgerOut
		switch {
		case line == l:
			t.Errorf("%s: line %d is cut: %q", out, i+1, l)
		case json.Unmarshal([]byte(line), &o) != nil:
			t.Errorf("%s: line %d is not JSON: %q", out, i+1, line)
		case seen[line]:
			t.Errorf("%s: line %d again: %s", out, i+1, line)
		case !recorded[line]:
			t.Errorf("%s: line %d is no recorded output: %s", out, i+1, line)
		case o.Timer > 0:
			timers++
		default:
			postings = append(postings, fmt.Sprintf("%s,%d", o.Account, o.Balance))
		}
		seen[line] = true
	}
	return postings, timers
}

// checkOutOnce checks that the file out holds each output of the ledger
// exactly once (outOnce), the postings in order, and timers summaries.
func checkOutOnce(t *testing.T, out string, postings []string, timers int, recs ...string) {
	t.Helper()
	got, ticks := outOnce(t, out, recs...)
	if diff := cmp.Diff(postings, got); diff != "" || ticks != timers {
		t.Errorf("%s: the postings in order (-want +got):\n%s\n%d timer summaries, want %d", out, diff, ticks, timers)
	}
}

// A full disk on --out (every write tried 3 times, then failed): the
// outbox stops delivering, the run stops and exits 3 naming the file, and
// nothing is lost: the outputs are recorded and committed (the status is
// lossless, as the engine says), and the restart, with room on the disk,
// delivers the rest first (the line the full disk cut completed), so that
// --out holds each output exactly once, in order. (The run used to write
// each output as it was emitted: a lost one was not lossless, and a crash
// between a line and its recording left a line no recording holds.)
func TestAFullDiskOnOutStopsTheRunAndTheRestartDeliversTheRestOnce(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	out := filepath.Join(dir, "out.jsonl")
	state := filepath.Join(dir, "state.json")
	status := filepath.Join(dir, "status.json")
	writeLines(t, in, "alice,1", "bob,2", "carol,3", "dave,4", "tick", "erin,5")
	args := func(store string) []string {
		return []string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, store), "--state", state,
			"--out", out, "--status", status}
	}
	const room = 100 // a line and a bit: the disk is full in the middle of a line
	disk := &fullDisk{room: room}
	var buf bytes.Buffer
	c := newCLI(&buf, cli.WithOutWriter(func(w io.Writer) io.Writer { disk.w = w; return disk }))
	code, err := runErr(t, context.Background(), c, args("r1.csv")...)
	if code != cli.ExitIncomplete || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(fmt.Sprint(err), out) {
		t.Fatalf("exit %d, %v; want %d, ENOSPC naming %s:\n%s", code, err, cli.ExitIncomplete, out, buf.String())
	}
	if disk.failed != 3 {
		t.Errorf("the failing batch was written %d times, want 3 tries and nothing after them", disk.failed)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() != room {
		t.Errorf("--out after the full disk: %v, %v; want the %d bytes the disk took", fi, err, room)
	}
	var st engine.Status
	b, err := os.ReadFile(status)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !st.Lossless || !strings.Contains(buf.String(), "lossless: yes") {
		t.Errorf("not lossless: an output not delivered yet is recorded and committed, not lost:\n%s\n%s", buf.String(), b)
	}
	if n := len(recordedOutputs(t, filepath.Join(dir, "r1.csv"))); n != 6 {
		t.Errorf("the stopped run recorded %d outputs, want 6", n)
	}

	// The disk has room again: the restart delivers first what the
	// stopped run recorded and committed.
	buf.Reset()
	code, err = runErr(t, context.Background(), newCLI(&buf), args("r2.csv")...)
	if code != cli.ExitOK {
		t.Fatalf("the restart: exit %d, %v:\n%s", code, err, buf.String())
	}
	if !strings.Contains(buf.String(), " of them from earlier runs") {
		t.Errorf("the restart does not say it delivered earlier runs' outputs:\n%s", buf.String())
	}
	checkOutOnce(t, out, []string{"alice,1", "bob,2", "carol,3", "dave,4", "erin,5"}, 1,
		filepath.Join(dir, "r1.csv"), filepath.Join(dir, "r2.csv"))
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
