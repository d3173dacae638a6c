package torture_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/torture"
)

var (
	seedFlag      = flag.Uint64("torture.seed", 0, "the first scenario's seed (default: the time)")
	scenariosFlag = flag.Int("torture.scenarios", 200, "how many scenarios TestTortureScenarios runs")
	budgetFlag    = flag.Duration("torture.budget", 85*time.Second, "no scenario starts after this much time")
)

// binary builds cmd/blackbox once, without the race detector (the
// scenarios run it as their child, many times).
var binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "blackbox-torture-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "blackbox")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/blackbox")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", &buildError{err: err, out: out.String()}
	}
	return bin, nil
})

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	return "go build ../cmd/blackbox: " + e.err.Error() + "\n" + e.out
}

// TestTortureScenarios runs a fixed budget of generated scenarios (seeds
// varied per run and printed: -torture.seed repeats a session) and fails
// on any broken invariant, printing the command that reproduces it.
func TestTortureScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("torture scenarios run child processes for a minute")
	}
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("torture seed %d (repeat with -torture.seed %d)", seed, seed)
	var log bytes.Buffer
	rep, err := torture.Run(context.Background(), torture.Config{Binary: bin, Seed: seed, Scenarios: *scenariosFlag,
		Time: *budgetFlag, Parallel: 4, Dir: t.TempDir(), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	rep.Summary(&sum)
	t.Log(sum.String())
	if rep.Scenarios < *scenariosFlag {
		t.Logf("the budget of %s covered %d of %d scenarios", *budgetFlag, rep.Scenarios, *scenariosFlag)
	}
	if len(rep.Inconclusive) > 0 {
		t.Logf("inconclusive (kfake kept a killed member): seeds %v", rep.Inconclusive)
	}
	for _, f := range rep.Failures {
		t.Errorf("seed %d: %s\n  reproduce: %s", f.Seed, f.Violations[0], f.Command)
	}
}
