package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/store"
)

// ledgerLines are lines from..to of a ledger input, each with its "\n".
func ledgerLines(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("acct-%02d,%d", i%3, i))
	}
	return out
}

// endOf is the byte offset after line n of in.txt (ledgerLines from 1).
func endOf(n int) int64 {
	var off int64
	for _, l := range ledgerLines(1, n) {
		off += int64(len(l)) + 1
	}
	return off
}

// awaitPointer waits (every 5ms, 30s at most: the run is another process)
// until the pointer file in dir is at off.
func awaitPointer(t *testing.T, dir string, off int64, what string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for {
		p, err := filesource.ReadPointer(filepath.Join(dir, "in.txt.ptr"))
		if err == nil && p.Offset == off {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("not within 30s: %s (the pointer at %d, %v; want %d)", what, p.Offset, err, off)
		}
	}
}

// TestASeekBackOverAFileReadsItAgainAndARestartAfterItHandsTheRangeAgain:
// `blackbox run --follow --listen` over a file accepts `blackbox ctl seek`
// back (pause, the seek with its plan's hash, resume): the run reads lines
// 6-20 again for the group (seqs 21-35), its recording verifies, replays
// identical and explain finds nothing lost, its CONTROL rows say the move
// back (20 -> 5). A second run, over 5 lines appended, is moved back to
// its seq 2 and SIGKILLed before resuming: the pointer, lowered by the
// move back, makes the restart hand the group lines 23-25 again, which
// explain says were moved back by the operator.
func TestASeekBackOverAFileReadsItAgainAndARestartAfterItHandsTheRangeAgain(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, filepath.Join(dir, "in.txt"), ledgerLines(1, 20)...)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	listen := func(store string) (*child, *console.Client, func(args ...string) string) {
		c := startListening(t, dir, "run", "--app", "ledger", "--input", "in.txt", "--store", store, "--follow",
			"--listen", "127.0.0.1:0", "--control-token-file", "tokens")
		addr := strings.TrimPrefix(c.addr, "http://")
		cl, err := console.NewClient(addr, console.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctl := func(args ...string) string {
			t.Helper()
			code, out := execute(t, ctx, append(append([]string{"ctl", addr}, args...), "--token-file", tokens, "--yes")...)
			if code != cli.ExitOK {
				t.Fatalf("ctl %v: exit %d\n%s", args, code, out)
			}
			return out
		}
		return c, cl, ctl
	}
	position := func(cl *console.Client, want int64) {
		t.Helper()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		timeout := time.After(30 * time.Second)
		for {
			bs, err := cl.Bindings(ctx)
			if err == nil && len(bs) == 1 && bs[0].Position == want && !bs[0].Fenced {
				return
			}
			select {
			case <-tick.C:
			case <-timeout:
				t.Fatalf("not within 30s: the binding at %d (%+v, %v)", want, bs, err)
			}
		}
	}

	c, cl, ctl := listen("run1.csv")
	position(cl, 20)
	awaitPointer(t, dir, endOf(20), "the 20 lines committed")
	ctl("pause", "--group", "main", "--indefinite", "--reason", "recompute")
	if out := ctl("seek", "--feed", "input", "--group", "main", "--to", "5", "--reason", "recompute"); !strings.Contains(out, "delivers seqs 6-20 again (15 items, under new seqs)") {
		t.Errorf("ctl seek back:\n%s", out)
	}
	awaitPointer(t, dir, endOf(5), "the move back: the pointer after line 5")
	ctl("resume", "--group", "main", "--reason", "recomputed")
	position(cl, 35)
	awaitPointer(t, dir, endOf(20), "the lines read again committed")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, c, cli.ExitOK)

	rec := filepath.Join(dir, "run1.csv")
	if code, out := execute(t, ctx, "verify", rec); code != cli.ExitOK {
		t.Errorf("verify: exit %d\n%s", code, out)
	}
	if code, out := execute(t, ctx, "replay", rec); code != cli.ExitOK || !strings.Contains(out, "identical") {
		t.Errorf("replay: exit %d\n%s", code, out)
	}
	if code, out := execute(t, ctx, "explain", rec); code != cli.ExitOK || !strings.Contains(out, "nothing lost") {
		t.Errorf("explain: exit %d\n%s", code, out)
	}
	r, err := store.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	got := recordedActions(t, r, func(ct store.Control) string {
		return fmt.Sprintf("%s %s %d-%d", ct.Who, ct.Action, ct.Before, ct.After)
	}, nil)
	r.Close()
	if want := []string{"alice pause 20-20", "alice seek 20-5", "alice resume 20-20"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("CONTROL rows %q, want %q", got, want)
	}

	// Five lines more; the second run reads them (seqs 1-5), is moved
	// back to its seq 2 (line 22) and killed before it resumes.
	writeLines(t, filepath.Join(dir, "in.txt"), ledgerLines(21, 25)...)
	c, cl, ctl = listen("run2.csv")
	position(cl, 5)
	awaitPointer(t, dir, endOf(25), "the 5 lines appended committed")
	ctl("pause", "--group", "main", "--indefinite", "--reason", "recompute")
	ctl("seek", "--feed", "input", "--group", "main", "--to", "2", "--reason", "recompute")
	awaitPointer(t, dir, endOf(22), "the move back: the pointer after line 22")
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()

	code, out := execute(t, ctx, "run", "--app", "ledger", "--input", filepath.Join(dir, "in.txt"), "--store", filepath.Join(dir, "run3.csv"))
	if code != cli.ExitOK || !strings.Contains(out, "3 lines") {
		t.Fatalf("the restart: exit %d, want 0 and lines 23-25 again:\n%s", code, out)
	}
	r, err = store.Open(filepath.Join(dir, "run3.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got3 []int64
	for e, err := range r.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == store.KindDelivery { // the input's position
			got3 = append(got3, e.Offset)
		}
	}
	if want := []int64{endOf(23), endOf(24), endOf(25)}; !slices.Equal(got3, want) {
		t.Errorf("the restart's inputs are at %v, want %v (lines 23-25)", got3, want)
	}
	// explain reads the recorded move back: each line the restart
	// delivered again was moved back by the operator (run 1's CONTROL row
	// of the seek), nothing is lost.
	code, out = execute(t, ctx, "explain", filepath.Join(dir, "run2.csv")+","+filepath.Join(dir, "run3.csv"))
	if code != cli.ExitOK || strings.Count(out, "applied-again (moved back by the operator: r1 CONTROL:") != 3 || !strings.Contains(out, "nothing lost") {
		t.Errorf("explain run2.csv,run3.csv: exit %d, want lines 23-25 delivered again for the move back, nothing lost:\n%s", code, out)
	}
}

// waitExit drains c's stderr and waits for its exit, which must be code.
func waitExit(t *testing.T, c *child, code int) {
	t.Helper()
	for l := range c.lines {
		t.Logf("stderr: %s", l)
	}
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if got := c.cmd.ProcessState.ExitCode(); got != code {
		t.Fatalf("exit %d, want %d:\n%s", got, code, c.stdout.String())
	}
}
