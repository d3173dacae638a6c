package torture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// crashSpec is a crashtest scenario: `blackbox crashtest` with these
// flags, whose verdict the oracle checks against the artifacts it leaves.
// A plain value.
type crashSpec struct {
	Lines      int
	Kills      int
	KillAt     string // "": kills at random moments
	StateEvery int
	Workers    int
	Format     string
}

func genCrash(r *rand.Rand) crashSpec {
	c := crashSpec{Lines: 100 + r.IntN(300), Kills: 1 + r.IntN(3), StateEvery: 1, Workers: 1, Format: pick(r, "csv", "sqlite")}
	if r.IntN(2) == 0 {
		c.StateEvery = 2 + r.IntN(40)
	}
	if r.IntN(3) > 0 {
		c.KillAt = pick(r, killPoints...)
	}
	if r.IntN(3) == 0 {
		c.Workers = 2 + r.IntN(3)
	}
	return c
}

func (c crashSpec) dimensions() []string {
	d := []string{"kind=crashtest", "format=" + c.Format}
	if c.KillAt != "" {
		d = append(d, "killpoint="+c.KillAt)
	}
	if c.StateEvery > 1 {
		d = append(d, "state-every")
	}
	if c.Workers > 1 {
		d = append(d, "workers")
	}
	return d
}

func (c crashSpec) args(seed uint64) []string {
	args := []string{"crashtest", "--dir", "ct", "--lines", strconv.Itoa(c.Lines), "--kills", strconv.Itoa(c.Kills),
		"--seed", strconv.FormatUint(seed, 10), "--format", c.Format, "--state-every", strconv.Itoa(c.StateEvery),
		"--workers", strconv.Itoa(c.Workers), "--json"}
	if c.KillAt != "" {
		args = append(args, "--kill-at", c.KillAt)
	}
	return args
}

// crashDoc is the part of `crashtest --json` the oracle reads.
type crashDoc struct {
	Holds    bool     `json:"holds"`
	Failures []string `json:"failures"`
	Missing  int      `json:"missing"`
}

// checkCrashtest runs the scenario's crashtest and checks its verdict
// against what the oracle finds in what it leaves: the crashed runs'
// state equals the clean run's (every line applied exactly once) and
// every clean output is in the crashed runs' --out (the clock reading "at"
// aside). crashtest checks more (its bounds on duplicates and lag), so
// only a "holds" the oracle refutes, or a "does not hold" whose every
// failure the oracle's own checks refute, is a violation.
func (o *oracle) checkCrashtest() []Violation {
	c := o.sr.s.Crash
	b, code := o.blackbox(c.args(o.sr.s.Seed)...)
	o.sr.logf("blackbox %s: exit %d", strings.Join(c.args(o.sr.s.Seed), " "), code)
	var d crashDoc
	if err := json.Unmarshal(b, &d); err != nil {
		o.fail(InvAgree, "crashtest: exit %d, no JSON: %s", code, firstLine(string(b)))
		return o.vs
	}
	if want := boolExit(d.Holds, 0, 1); code != want {
		o.fail(InvAgree, "crashtest says holds %v but exits %d", d.Holds, code)
	}
	dir := filepath.Join(o.sr.dir, "ct")
	var found []string
	crashed, err1 := ledgerStateSum(filepath.Join(dir, "crash-state.json"), c.Workers)
	clean, err2 := ledgerStateSum(filepath.Join(dir, "clean-state.json"), 1)
	switch {
	case err1 != nil || err2 != nil:
		found = append(found, fmt.Sprintf("state unreadable: %v %v", err1, err2))
	case !crashed.equal(clean):
		found = append(found, fmt.Sprintf("the crashed runs' state (%d postings) differs from the clean run's (%d postings)", crashed.applied, clean.applied))
	}
	want, err1 := outputLines(filepath.Join(dir, "clean-out.jsonl"))
	got, err2 := outputLines(filepath.Join(dir, "crash-out.jsonl"))
	missing := 0
	if err1 != nil || err2 != nil {
		found = append(found, fmt.Sprintf("out unreadable: %v %v", err1, err2))
	}
	for line, n := range want {
		if got[line] < n && c.Workers == 1 {
			missing += n - got[line]
		}
	}
	if missing > 0 {
		found = append(found, fmt.Sprintf("%d clean outputs missing from the crashed runs' out", missing))
	}
	switch {
	case d.Holds && len(found) > 0:
		o.fail(InvAgree, "crashtest says the guarantees held, but %s", strings.Join(found, "; "))
	case !d.Holds && len(found) == 0 && !anyFailureBeyond(d.Failures):
		o.fail(InvAgree, "crashtest says the guarantees did not hold (%s), but the crashed state equals the clean one and no output is missing",
			strings.Join(head(d.Failures, 3), "; "))
	}
	return o.vs
}

// anyFailureBeyond reports whether crashtest names a failure the oracle
// does not check itself (duplicates past its bound, a recording problem, a
// difference), which the oracle then cannot refute.
func anyFailureBeyond(failures []string) bool {
	for _, f := range failures {
		if !strings.Contains(f, "outlived") && !strings.Contains(f, "state") && !strings.Contains(f, "missing") {
			return true
		}
	}
	return false
}

// ledgerSum is a ledger state summed over its files: balances, postings.
type ledgerSum struct {
	balances map[string]int64
	applied  int64
}

func (a ledgerSum) equal(b ledgerSum) bool {
	if a.applied != b.applied {
		return false
	}
	for k, v := range a.balances {
		if b.balances[k] != v {
			return false
		}
	}
	for k, v := range b.balances {
		if a.balances[k] != v {
			return false
		}
	}
	return true
}

// ledgerStateSum reads a ledger state (FILE, or FILE#wK for workers > 1).
func ledgerStateSum(path string, workers int) (ledgerSum, error) {
	sum := ledgerSum{balances: map[string]int64{}}
	names := []string{path}
	if workers > 1 {
		names = names[:0]
		for w := range workers {
			names = append(names, path+"#w"+strconv.Itoa(w))
		}
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return sum, err
		}
		var st struct {
			Balances map[string]int64 `json:"balances"`
			Applied  int64            `json:"applied"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return sum, fmt.Errorf("%s: %w", n, err)
		}
		for k, v := range st.Balances {
			sum.balances[k] += v
		}
		sum.applied += st.Applied
	}
	return sum, nil
}

// outputLines counts an out file's lines, the key "at" left out.
func outputLines(path string) (map[string]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			out[sc.Text()]++
			continue
		}
		delete(m, "at")
		k, _ := json.Marshal(m)
		out[string(k)]++
	}
	return out, sc.Err()
}
