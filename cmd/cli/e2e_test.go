package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCrashtestBinary builds the blackbox binary and runs its crash test:
// five SIGKILLs of a recorded run over 5,000 ledger lines, then the
// comparison with a clean run. CI runs it; -short skips it.
func TestCrashtestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it five times")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "blackbox")
	build := exec.Command(gobin, "build", "-o", bin, "../blackbox")
	build.Env = append(os.Environ(), childEnv+"=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "crash")
	cmd := exec.Command(bin, "crashtest", "--kills", "5", "--lines", "5000", "--dir", dir)
	cmd.Env = append(os.Environ(), childEnv+"=")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("crashtest: %v", err)
	}
	for _, want := range []string{"verdict   holds", "missing 0", "5 killed (unfinished)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
