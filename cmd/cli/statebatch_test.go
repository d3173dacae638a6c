package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/internal/apps"
)

// --state-every and --state-interval: a positive count and duration, and
// only with --state; anything else is a usage error (exit 2), and so is
// setting one both as a flag and as --option.
func TestABadStateBatchFlagIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, "a,1")
	base := []string{"run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, "r.csv")}
	state := []string{"--state", filepath.Join(dir, "st.json")}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"every without state", []string{"--state-every", "10"}, "need --state"},
		{"interval without state", []string{"--state-interval", "1s"}, "need --state"},
		{"every 0", append(state, "--state-every", "0"), "--state-every must be at least 1"},
		{"interval 0", append(state, "--state-interval", "0s"), "--state-interval must be positive"},
		{"flag and option", append(state, "--state-every", "5", "--option", "state-every=7"), "--state-every and --option state-every"},
		{"state flag and option", append(state, "--option", "state=other.json"), "--state and --option state=... both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := execute(t, context.Background(), append(append([]string{}, base...), tt.args...)...)
			if code != 2 || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, output:\n%s\nwant exit 2 and %q", code, out, tt.want)
			}
		})
	}
}

// A run with --state and batches of 7 lines ends settled (every line
// committed) with every line in the state file: the last batch, not full,
// is saved within the interval, and its lines committed.
func TestARunWithBatchedStateSavesEveryLineAndCommitsThem(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	var lines []string
	for i := range 100 {
		lines = append(lines, "acct-"+string(rune('a'+i%5))+",2")
	}
	writeLines(t, in, lines...)
	st := filepath.Join(dir, "st.json")
	code, out := execute(t, context.Background(), "run", "--app", "ledger", "--input", in, "--store", filepath.Join(dir, "r.csv"),
		"--state", st, "--state-every", "7", "--state-interval", "20ms")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	b, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	var s apps.LedgerState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	if s.Applied != 100 || s.Offset != fi.Size() || s.Balances["acct-a"] != 40 {
		t.Errorf("saved state: applied %d, offset %d, acct-a %d; want 100, %d, 40", s.Applied, s.Offset, s.Balances["acct-a"], fi.Size())
	}
	if !strings.Contains(out, "settled: yes") {
		t.Errorf("the run did not settle (every line committed):\n%s", out)
	}
}
