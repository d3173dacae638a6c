package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
)

// tally keeps a total per account over lines ACCOUNT,N, emitting the new
// total; a line tick,ACCOUNT sets a timer that emits the account's total
// as of the tick. Its outputs depend only on their account's lines: the
// same with any number of key-ordered workers (keyed by account).
type tally struct {
	totals map[string]int
	due    map[int]string // timer number -> what it emits
}

func (p *tally) OnEvent(c *core.Cycle, ev any) error {
	acct, v, _ := strings.Cut(ev.(string), ",")
	if acct == "tick" {
		p.due[c.After(0)] = fmt.Sprintf("%s at tick: %d", v, p.totals[v])
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return err
	}
	p.totals[acct] += n
	c.Emit("totals", fmt.Sprintf("%s=%d", acct, p.totals[acct]))
	return nil
}

func (p *tally) OnTimer(c *core.Cycle, n int) error {
	c.Emit("ticks", p.due[n])
	delete(p.due, n)
	return nil
}

func tallyApp() core.App {
	key := func(item any) string {
		acct, v, _ := strings.Cut(item.(string), ",")
		if acct == "tick" {
			return v
		}
		return acct
	}
	return core.App{Name: "tally",
		Decode: func(b []byte) (any, error) { var s string; err := json.Unmarshal(b, &s); return s, err },
		KeyFor: func(map[string]string) (func(any) string, error) { return key, nil },
		New: func(map[string]string) (core.Processor, error) {
			return &tally{totals: map[string]int{}, due: map[int]string{}}, nil
		}}
}

// TestDiffOfOneWorkerAgainstFourIsSameForAnAppWithTimers: an app whose
// outputs, its timers' included, depend only on their key's lines, run on
// one worker and on four: the diff is "same" (exit 0), each timer aligned
// with the one that emitted the same, whichever worker fired it and
// whatever its number there.
func TestDiffOfOneWorkerAgainstFourIsSameForAnAppWithTimers(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	var lines []string
	for i := range 40 {
		acct := []string{"alice", "bob", "carol", "dave", "erin"}[i%5]
		lines = append(lines, fmt.Sprintf("%s,%d", acct, i+1))
		if i%3 == 2 {
			lines = append(lines, "tick,"+acct)
		}
	}
	writeLines(t, in, lines...)
	for _, w := range []string{"1", "4"} {
		var out bytes.Buffer
		code := newCLI(&out, cli.WithApps(tallyApp())).Execute(t.Context(), []string{"run", "--app", "tally", "--read", "once-earliest",
			"--input", in, "--pointer", filepath.Join(dir, "w"+w+".ptr"), "--store", filepath.Join(dir, "w"+w+".csv"), "--workers", w})
		if code != cli.ExitOK {
			t.Fatalf("run --workers %s: exit %d:\n%s", w, code, out.String())
		}
	}
	var out bytes.Buffer
	code := newCLI(&out, cli.WithApps(tallyApp())).Execute(t.Context(), []string{"diff", filepath.Join(dir, "w1.csv"), filepath.Join(dir, "w4.csv")})
	if code != cli.ExitOK {
		t.Fatalf("diff of 1 worker against 4: exit %d, want 0 (same):\n%s", code, out.String())
	}
	// 53 lines and 13 timers
	if want := "66 inputs in A, 66 inputs in B, 66 common"; !strings.Contains(out.String(), want) {
		t.Errorf("diff output lacks %q:\n%s", want, out.String())
	}
}
