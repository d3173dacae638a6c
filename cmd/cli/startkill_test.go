package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// TestARunKilledInItsFirstWritesLeavesNothingOrEveryStreamStarted: a run
// killed with SIGKILL inside the store's first Append (store-write:1: the
// CSV store writes half of its bytes and dies, SQLite dies before the
// COMMIT) or its second, in both formats, on one worker and on four (a
// stream per worker), leaves either an empty file (nothing was written:
// readers say so, the next run takes the path without --force, and explain
// refuses it in a list of runs, saying that it is empty) or a recording
// whose only problems are a killed run's (unfinished; torn and orphan for
// a kill inside a CSV write), which explain accepts stitched before its
// restart. The first write carries the CSV header or the SQLite schema, META
// and every stream's START. A CSV store killed at its first write left its
// header and half a META row ("not a blackbox recording", refused by
// explain and by run even with --force), an SQLite store a schema with no
// rows, and a kill at the second write on four workers left META without
// every START (missing-stream).
func TestARunKilledInItsFirstWritesLeavesNothingOrEveryStreamStarted(t *testing.T) {
	for _, format := range []string{"csv", "sqlite"} {
		for _, workers := range []string{"1", "4"} {
			for _, n := range []int64{1, 2} {
				t.Run(fmt.Sprintf("%s/workers=%s/store-write:%d", format, workers, n), func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					ledgerInput(t, filepath.Join(dir, "in.txt"), 0, 300, map[string]int64{})
					ext := map[string]string{"csv": ".csv", "sqlite": ".db"}[format]
					run1, run2 := "run-1"+ext, "run-2"+ext
					args := func(store string) []string {
						return []string{"run", "--app", "ledger", "--input", "in.txt", "--store", store, "--workers", workers}
					}
					out, code, killed := blackbox(t, dir, []string{killpoint.Env + "=" + killpoint.Value(killpoint.StoreWrite, n)}, args(run1)...)
					if !killed {
						t.Fatalf("the run was not killed at store-write:%d (exit %d):\n%s", n, code, out)
					}
					fi, err := os.Stat(filepath.Join(dir, run1))
					if err != nil {
						t.Fatalf("the killed run left no %s: %v", run1, err)
					}
					if out, code, _ := blackbox(t, dir, nil, args(run2)...); code != 0 {
						t.Fatalf("the restart exited %d:\n%s", code, out)
					}
					if fi.Size() == 0 {
						if n > 1 {
							t.Errorf("killed at its write %d, the run left an empty %s: its first write did not reach the file", n, run1)
						}
						out, code, _ := blackbox(t, dir, nil, "verify", run1)
						if code != cli.ExitFailure || !strings.Contains(out, "empty file") {
							t.Errorf("verify %s (empty): exit %d, want %d saying it is empty:\n%s", run1, code, cli.ExitFailure, out)
						}
						out, code, _ = blackbox(t, dir, nil, "explain", run1+","+run2)
						if code != cli.ExitFailure || !strings.Contains(out, run1) || !strings.Contains(out, "empty file") {
							t.Errorf("explain %s,%s: exit %d, want %d naming %s, empty:\n%s", run1, run2, code, cli.ExitFailure, run1, out)
						}
						// The next run at the same path takes it without --force.
						if out, code, _ := blackbox(t, dir, nil, args(run1)...); code != 0 {
							t.Errorf("a run into the empty %s exited %d:\n%s", run1, code, out)
						}
						if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
							t.Errorf("left behind once %s was written again: %v", run1, left)
						}
						return
					}
					out, code, _ = blackbox(t, dir, nil, "verify", run1, "--json")
					var v struct {
						Complete bool
						Problems []struct{ Kind string }
					}
					if err := json.Unmarshal([]byte(out), &v); err != nil {
						t.Fatalf("verify %s: exit %d, no JSON (%v):\n%s", run1, code, err, out)
					}
					kinds := map[string]bool{}
					for _, p := range v.Problems {
						kinds[p.Kind] = true
						switch p.Kind {
						case "unfinished":
						case "torn", "orphan":
							if format != "csv" {
								t.Errorf("verify %s: a %s problem in an SQLite recording", run1, p.Kind)
							}
						default:
							t.Errorf("verify %s: a %s problem, want only a killed run's (unfinished, torn, orphan):\n%s", run1, p.Kind, out)
						}
					}
					if code != cli.ExitIncomplete || !kinds["unfinished"] {
						t.Errorf("verify %s: exit %d, want %d naming it unfinished:\n%s", run1, code, cli.ExitIncomplete, out)
					}
					out, code, _ = blackbox(t, dir, nil, "explain", run1+","+run2)
					if code != 0 || !strings.Contains(out, "nothing lost") {
						t.Errorf("explain %s,%s: exit %d, want 0 and nothing lost:\n%s", run1, run2, code, out)
					}
				})
			}
		}
	}
}
