package torture_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/torture"
)

var (
	seedFlag      = flag.Uint64("torture.seed", 0, "the first scenario's seed (default: the time)")
	scenariosFlag = flag.Int("torture.scenarios", 200, "how many scenarios TestTortureScenarios runs")
	budgetFlag    = flag.Duration("torture.budget", 65*time.Second, "no scenario starts after this much time (a backlog scenario started then ends within about 20 s: the package stays within 90 s)")
)

// binary builds cmd/blackbox once, without the race detector: the
// scenarios run it as their child many times, and the session itself runs
// in it (the harness's cluster, its oracle's reads of SQLite recordings),
// at full speed.
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
		return "", errors.New("go build ../cmd/blackbox: " + err.Error() + "\n" + out.String())
	}
	return bin, nil
})

func seed() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return uint64(time.Now().UnixNano())
}

// TestTortureScenarios runs a fixed budget of generated scenarios with
// `blackbox torture` (seeds varied per run and printed: -torture.seed
// repeats a session) and fails on any broken invariant, printing the
// command that reproduces it. The session runs in the binary, not under
// the race detector: TestEngineScenariosUnderRace runs the harness's
// in-process scenarios here.
func TestTortureScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("torture scenarios run child processes for a minute")
	}
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	s := seed()
	t.Logf("torture seed %d (repeat with -torture.seed %d)", s, s)
	cmd := exec.Command(bin, "torture", "--seed", strconv.FormatUint(s, 10), "--scenarios", strconv.Itoa(*scenariosFlag),
		"--time", budgetFlag.String(), "--parallel", "4", "--dir", t.TempDir(), "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("blackbox torture: %v\n%s", err, stderr.String())
	}
	var rep torture.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("blackbox torture --json: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var sum strings.Builder
	rep.Summary(&sum)
	t.Log(sum.String())
	if rep.Scenarios < *scenariosFlag {
		t.Logf("the budget of %s covered %d of %d scenarios", *budgetFlag, rep.Scenarios, *scenariosFlag)
	}
	if rep.Scenarios >= 200 {
		for _, d := range torture.AllDimensions() {
			if rep.Dimensions[d] == 0 {
				t.Errorf("%d scenarios covered no %s", rep.Scenarios, d)
			}
		}
	}
	if len(rep.Inconclusive) > 0 {
		t.Logf("inconclusive (kfake kept a killed member): seeds %v", rep.Inconclusive)
	}
	for _, f := range rep.Failures {
		t.Errorf("seed %d: %s\n  reproduce: %s", f.Seed, f.Violations[0], f.Command)
	}
}

// TestEngineScenariosUnderRace runs the harness's engine scenarios (the
// engine driven in-process by an operator's actions) in the test process,
// under the race detector when it is on.
func TestEngineScenariosUnderRace(t *testing.T) {
	s := seed()
	t.Logf("engine scenarios from seed %d (repeat with -torture.seed %d)", s, s)
	rep, err := torture.Run(context.Background(), torture.Config{Binary: "unused", Seed: s, Scenarios: 100, Parallel: 2,
		Dir: t.TempDir(), Only: torture.Only{Kind: "engine"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scenarios != 100 {
		t.Errorf("%d engine scenarios ran, want 100", rep.Scenarios)
	}
	for _, f := range rep.Failures {
		t.Errorf("seed %d: %s\n  reproduce: %s", f.Seed, f.Violations[0], f.Command)
	}
}

// TestEveryKillPointIsOneTheBinaryAccepts: the scenarios kill runs at the
// points crashtest.RunKillPoints names (the harness keeps no list of its
// own); each must be one BLACKBOX_KILL_AT arms in the binary (an unknown
// point stops a process at start-up with exit 2).
func TestEveryKillPointIsOneTheBinaryAccepts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range torture.AllDimensions() {
		point, ok := strings.CutPrefix(d, "killpoint=")
		if !ok {
			continue
		}
		n++
		cmd := exec.Command(bin, "--help")
		cmd.Env = append(os.Environ(), "BLACKBOX_KILL_AT="+point+":1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("BLACKBOX_KILL_AT=%s:1 blackbox --help: %v\n%s", point, err, out)
		}
	}
	if n < 4 {
		t.Errorf("%d kill points, want at least the recorded run's 4", n)
	}
}
