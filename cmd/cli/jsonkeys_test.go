package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/cmd/cli"
)

// TestJSONKeysAreStable: the JSON a command prints with --json (and the
// status file run --status writes) is the stable interface docs/CLI.md
// promises. Each command runs on a real run's files; the key paths of its
// decoded JSON are compared with testdata/jsonkeys/NAME.txt. A key added,
// renamed, moved or removed fails here: record it in CHANGELOG.md, then
// rewrite the lists with -update.
func TestJSONKeysAreStable(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	writeLines(t, p("a.txt"), "alice,100", "bob,-2000", "transfer,alice,bob,40", "oops", "fail", "tick", "carol,5")
	writeLines(t, p("b.txt"), "alice,100", "bob,-2000", "transfer,alice,bob,41", "oops", "tick", "carol,5", "dave,7")

	// stdout runs one command line; stderr (warnings) is left out.
	stdout := func(t *testing.T, args ...string) []byte {
		t.Helper()
		var out bytes.Buffer
		code := newCLI(&out, cli.WithStderr(io.Discard)).Execute(context.Background(), args)
		if code == cli.ExitFailure {
			t.Fatalf("blackbox %s: exit %d:\n%s", strings.Join(args, " "), code, out.String())
		}
		return out.Bytes()
	}
	// The runs the other commands read: a.csv with a failed line, b.csv
	// of an input that differs from it.
	ran := stdout(t, "run", "--app", "ledger", "--input", p("a.txt"), "--store", p("a.csv"), "--status", p("status.json"),
		"--out", p("out.jsonl"), "--json")
	stdout(t, "run", "--app", "ledger", "--input", p("b.txt"), "--store", p("b.csv"), "--read", "once-earliest")
	// explain's transcript holds the recordings of a crashed run and its
	// two restarts, and the state file they left.
	_, files := readTranscript(t, filepath.Join("testdata", "explain.txt"))
	for _, name := range []string{"run-1.csv", "run-2.csv", "run-3.csv", "crash-state.json"} {
		if err := os.WriteFile(p(name), []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Each command's JSON. data lists the paths of objects keyed by data
	// (names of apps, options, row kinds), not by the interface: their
	// keys are listed as *.
	cases := []struct {
		name string
		data []string
		json func(t *testing.T) []byte
	}{
		{"run", []string{".feeds[].losses"}, func(*testing.T) []byte { return ran }},
		{"run-status", []string{".feeds[].losses"}, func(t *testing.T) []byte {
			b, err := os.ReadFile(p("status.json"))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"replay", []string{".processors[].options"}, func(t *testing.T) []byte {
			return stdout(t, "replay", p("a.csv"), "--json")
		}},
		{"diff", []string{".processors[].optionsA", ".processors[].optionsB"}, func(t *testing.T) []byte {
			return stdout(t, "diff", p("a.csv"), p("b.csv"), "--json")
		}},
		{"explain", []string{".runs[].counts"}, func(t *testing.T) []byte {
			return stdout(t, "explain", p("a.csv"), "--pointer", p("a.txt.ptr"), "--json")
		}},
		{"explain-crash", []string{".runs[].counts"}, func(t *testing.T) []byte {
			return stdout(t, "explain", p("run-1.csv")+","+p("run-2.csv")+","+p("run-3.csv"), "--state", p("crash-state.json"), "--json")
		}},
		{"verify", nil, func(t *testing.T) []byte { return stdout(t, "verify", p("a.csv"), "--json") }},
		{"inspect", []string{".apps", ".options", ".appOptions", ".appOptions.*", ".processors[].rows"}, func(t *testing.T) []byte { return stdout(t, "inspect", p("a.csv"), "--limit", "30", "--json") }},
		{"demo", []string{".status.feeds[].losses", ".replay.processors[].options"}, func(t *testing.T) []byte { return stdout(t, "demo", "--dir", p("demo"), "--lines", "20", "--json") }},
		{"crashtest", nil, func(t *testing.T) []byte {
			return stdout(t, "crashtest", "--lines", "40", "--kills", "1", "--dir", p("crash"), "--format", "csv", "--json")
		}},
		{"ctl", nil, func(t *testing.T) []byte {
			_, addr := ctlWindow(t)
			return stdout(t, "ctl", addr, "seek", "--feed", "input", "--group", "main", "--to", "18", "--reason", "r",
				"--token-file", tokenFile(t), "--yes", "--json")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.json(t)
			var v any
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("not one JSON document: %v\n%s", err, out)
			}
			got := keyPaths(v, tc.data)
			golden := filepath.Join("testdata", "jsonkeys", tc.name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the JSON keys of %s changed (-was +now):\n%s\n"+
					"They are the stable interface (docs/CLI.md, \"Machine-readable output\"): record the change in "+
					"CHANGELOG.md (Unreleased), then run go test ./cmd/cli -run TestJSONKeysAreStable -update", tc.name, d)
			}
		})
	}
}

// keyPaths lists the key paths of a decoded JSON value, sorted: a key of an
// object is .key under its parent's path (.* under a path of data), the
// elements of an array [].
func keyPaths(v any, data []string) []string {
	seen := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if slices.Contains(data, path) {
					k = "*"
				}
				p := path + "." + k
				seen[p] = true
				walk(p, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[]", x)
			}
		}
	}
	walk("", v)
	return slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
}
