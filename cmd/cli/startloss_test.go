package cli_test

import (
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// truncatedLedgerInput runs the ledger once over 20 lines of dir/in.txt
// (with state FILE when state is not ""), then truncates in.txt in place
// and writes 3 other lines into it, shorter than what was read: the rest
// of the file the pointer describes is gone. It returns the pointer as
// the run left it and every account's total over the 23 lines.
func truncatedLedgerInput(t *testing.T, dir, state string) (filesource.Pointer, map[string]int64) {
	t.Helper()
	in := filepath.Join(dir, "in.txt")
	totals := map[string]int64{}
	ledgerInput(t, in, 0, 20, totals)
	args := []string{"run", "--app", "ledger", "--input", "in.txt", "--store", "run-1.csv"}
	if state != "" {
		args = append(args, "--state", state, "--state-every", "1")
	}
	if out, code, _ := blackbox(t, dir, nil, args...); code != 0 {
		t.Fatalf("the first run exited %d:\n%s", code, out)
	}
	before, err := filesource.ReadPointer(in + ".ptr")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(in, 0); err != nil {
		t.Fatal(err)
	}
	ledgerInput(t, in, 100, 3, totals)
	return before, totals
}

// streamKinds are the kinds of the rows of the ledger's stream in a
// recording, a run of rows of one kind named once, and its LOST rows.
func streamKinds(t *testing.T, r interface {
	Stream(string) iter.Seq2[store.Entry, error]
}) (string, []store.Entry) {
	t.Helper()
	var kinds []string
	var lost []store.Entry
	for e, err := range r.Stream("ledger") {
		if err != nil {
			t.Fatal(err)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != string(e.Kind) {
			kinds = append(kinds, string(e.Kind))
		}
		if e.Kind == "LOST" {
			lost = append(lost, e)
		}
	}
	return strings.Join(kinds, " "), lost
}

// TestARunKilledBeforeRecordingALossCountedAtItsStartLeavesItToTheNextRun:
// the input truncated while stopped, a run counts the rest of the file the
// pointer describes as lost (unread), and is killed (SIGKILL) inside the
// write of its first rows after the START (store-write:2, SQLite: before
// the transaction's COMMIT), so before it recorded the loss or committed
// anything. It leaves the pointer as it found it, so the next run finds
// the same truncation, counts the loss, records it (a LOST row at the old
// offset and epoch, before its first input) and exits 3, and explain says
// it. The killed run used to write the new file's pointer at its start:
// the next run found a pointer that agreed with the file, counted nothing
// and exited 0, and no recording held the loss.
func TestARunKilledBeforeRecordingALossCountedAtItsStartLeavesItToTheNextRun(t *testing.T) {
	dir := t.TempDir()
	before, _ := truncatedLedgerInput(t, dir, "")
	args := func(store string) []string {
		return []string{"run", "--app", "ledger", "--input", "in.txt", "--store", store}
	}
	out, code, killed := blackbox(t, dir, []string{killpoint.Env + "=" + killpoint.Value(killpoint.StoreWrite, 2)}, args("run-2.db")...)
	if !killed {
		t.Fatalf("the run was not killed at store-write:2 (exit %d):\n%s", code, out)
	}
	killedRec, err := sqlitestore.Open(filepath.Join(dir, "run-2.db"))
	if err != nil {
		t.Fatal(err)
	}
	kinds, _ := streamKinds(t, killedRec)
	killedRec.Close()
	if kinds != "START" {
		t.Fatalf("the killed run recorded %s, want its START only: the test wants a run killed before it recorded the loss", kinds)
	}
	after, err := filesource.ReadPointer(filepath.Join(dir, "in.txt.ptr"))
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("the killed run left the pointer %+v, want it as it found it, %+v", after, before)
	}

	if out, code, _ := blackbox(t, dir, nil, args("run-3.csv")...); code != cli.ExitIncomplete {
		t.Fatalf("the next run exited %d, want %d (the loss counted):\n%s", code, cli.ExitIncomplete, out)
	}
	r, err := csvstore.Open(filepath.Join(dir, "run-3.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	kinds, lost := streamKinds(t, r)
	if !strings.HasPrefix(kinds, "START LOST DELIVERY") || len(lost) != 1 {
		t.Fatalf("the next run's stream is %s, want one LOST row before its first input", kinds)
	}
	if e := lost[0]; e.Offset != before.Offset || e.Epoch != before.Epoch || !strings.Contains(e.Detail, `"reason":"unread"`) {
		t.Errorf("LOST row %+v: want the old file unread from offset %d of epoch %d", e, before.Offset, before.Epoch)
	}
	if out, code, _ := blackbox(t, dir, nil, "explain", "run-1.csv,run-2.db,run-3.csv"); code != cli.ExitIncomplete || !strings.Contains(out, "unread") {
		t.Fatalf("explain: exit %d, want %d naming the unread file:\n%s", code, cli.ExitIncomplete, out)
	}
}

// TestALineAppliedAfterALossAtTheStartIsAppliedOnceAcrossAKillBeforeTheFirstCommit:
// the input truncated while stopped, a run with --state (saved at every
// line) counts the loss, applies the first new line, saves its state and
// is killed (SIGKILL)
// before its first commit: the pointer still describes the old file, and
// the next run counts the loss again and reads the new lines again, under
// the same epoch as the killed run (the pointer file's pending header), so
// that the state skips the line it holds: every line applied once.
func TestALineAppliedAfterALossAtTheStartIsAppliedOnceAcrossAKillBeforeTheFirstCommit(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "st.json")
	before, totals := truncatedLedgerInput(t, dir, state)
	args := func(store string) []string {
		return []string{"run", "--app", "ledger", "--input", "in.txt", "--store", store, "--state", state, "--state-every", "1"}
	}
	out, code, killed := blackbox(t, dir, []string{killpoint.Env + "=" + killpoint.Value(killpoint.StateSaved, 1)}, args("run-2.csv")...)
	if !killed {
		t.Fatalf("the run was not killed at state-saved:1 (exit %d):\n%s", code, out)
	}
	after, err := filesource.ReadPointer(filepath.Join(dir, "in.txt.ptr"))
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("the killed run left the pointer %+v, want it as it found it, %+v", after, before)
	}
	if _, applied := stateBalances(t, state, 1); applied != 21 {
		t.Fatalf("the killed run's state applied %d lines, want 21: the test wants a line applied before the first commit", applied)
	}
	if out, code, _ := blackbox(t, dir, nil, args("run-3.csv")...); code != cli.ExitIncomplete {
		t.Fatalf("the next run exited %d, want %d (the loss counted):\n%s", code, cli.ExitIncomplete, out)
	}
	balances, applied := stateBalances(t, state, 1)
	if applied != 23 {
		t.Fatalf("applied %d lines, want 23 (each once)", applied)
	}
	for acct, want := range totals {
		if balances[acct] != want {
			t.Errorf("%s: balance %d, want %d", acct, balances[acct], want)
		}
	}
}
