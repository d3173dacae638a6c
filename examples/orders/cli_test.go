package orders_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goTool is the go command the tests build and list with.
func goTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command: %v", err)
	}
	return path
}

// run runs the command and returns its exit code and its output.
func run(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("%s %q: %v", name, args, err)
	return 0, ""
}

// The example's own binary (cmd/orders: cli.Main with cli.WithApps) runs,
// replays and diffs the orders app, passes its options to it, refuses
// options it does not take, checks its golden cases, and still knows the
// built-in apps.
func TestTheOrdersBinaryRunsAndReplaysItsOwnApp(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "orders")
	if code, out := run(t, goTool(t), "build", "-o", bin, "./cmd/orders"); code != 0 {
		t.Fatalf("go build: exit %d\n%s", code, out)
	}
	input := filepath.Join(dir, "orders.txt")
	b, err := os.ReadFile(inputFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(input, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rec, same, changed := filepath.Join(dir, "x.csv"), filepath.Join(dir, "same.csv"), filepath.Join(dir, "changed.db")
	tests := []struct {
		name string
		args []string
		code int
		want string // in the output
	}{
		{"run", []string{"run", "--app", "orders", "--option", "limit=50.00", "--read", "once-earliest",
			"--input", input, "--store", rec}, 0, "settled: yes  lossless: yes"},
		{"replay with the run's options", []string{"replay", rec, "--option", "orders:limit=50.00"}, 0, ""},
		{"replay with another limit diverges", []string{"replay", rec, "--option", "orders:limit=100.00"}, 1, `"o3,alice,30.00"`},
		{"an option orders does not take", []string{"run", "--app", "orders", "--option", "currency=EUR", "--read", "once-earliest",
			"--input", input, "--store", filepath.Join(dir, "y.csv")}, 2, `unknown option "currency"`},
		{"a second run, same version", []string{"run", "--app", "orders", "--option", "limit=50.00", "--read", "once-earliest",
			"--input", input, "--store", same}, 0, "settled: yes  lossless: yes"},
		{"a run of a changed version", []string{"run", "--app", "orders", "--option", "limit=100.00", "--read", "once-earliest",
			"--input", input, "--store", changed}, 0, "settled: yes  lossless: yes"},
		{"diff of two runs of one version", []string{"diff", rec, same}, 0, ""},
		{"diff of two versions", []string{"diff", rec, changed}, 1, `"o3,alice,30.00"`},
		{"golden check of the example's cases", []string{"golden", "check", goldenDir}, 0, "ok   restart/run2.csv"},
		{"the built-in apps are still there", []string{"run", "--help"}, 0, "this binary knows: alerts, ledger, orders"},
	}
	for _, tt := range tests {
		code, out := run(t, bin, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%s: orders %s: exit %d, want %d with %q in the output:\n%s", tt.name, strings.Join(tt.args, " "), code, tt.code, tt.want, out)
		}
	}
}

// The example's packages, their tests included, import no internal package
// of blackbox: the example shows the public API only. (The module path lies
// under blackbox's, so Go's internal rule would let it import them; the
// public packages it imports do use internal ones, which is their business.)
func TestTheExampleUsesOnlyThePublicAPI(t *testing.T) {
	code, out := run(t, goTool(t), "list", "-f",
		`{{range .Imports}}{{.}} {{end}}{{range .TestImports}}{{.}} {{end}}{{range .XTestImports}}{{.}} {{end}}`, "./...")
	if code != 0 {
		t.Fatalf("go list: exit %d\n%s", code, out)
	}
	n := 0
	for _, pkg := range strings.Fields(out) {
		if strings.HasPrefix(pkg, "github.com/blackbox-audit/blackbox/") {
			n++
			if strings.Contains(pkg+"/", "/internal/") {
				t.Errorf("the example imports %s", pkg)
			}
		}
	}
	if n == 0 {
		t.Errorf("go list names no blackbox import:\n%s", out)
	}
}
