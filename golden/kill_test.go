package golden_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/golden"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// A run of this test binary with childDirEnv set is golden.Update of that
// folder (killed at a point of internal/killpoint when the test arms it).
const childDirEnv = "GOLDEN_TEST_UPDATE_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		if err := golden.Update(dir, builtins()...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// killUpdateAt runs golden.Update(dir) in a child process with TMPDIR
// tmpdir and internal/killpoint armed at point's first reach, and fails t
// unless SIGKILL ended the child.
func killUpdateAt(t *testing.T, dir, tmpdir, point string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, killpoint.Env+"="+killpoint.Value(point, 1), "TMPDIR="+tmpdir)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		t.Fatal(err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the update was not killed at %s (%v):\n%s", point, err, out)
	}
}

// restartCase makes a folder holding the ledger-restart case of testdata,
// recorded.
func restartCase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cdir := filepath.Join(dir, "ledger-restart")
	if err := os.Mkdir(cdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{golden.CaseFile, golden.InputFile} {
		b, err := os.ReadFile(filepath.Join("testdata", "ledger-restart", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cdir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := golden.Update(dir, builtins()...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readAll maps the names in dir to their contents.
func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		m[e.Name()] = string(b)
	}
	return m
}

// TestAKilledUpdateLeavesEveryCaseWholeAndARetrySucceeds: an update of
// two cases (each input with a new last line, so that every recording must
// be re-recorded) killed with SIGKILL inside the first case, its new
// recording written in its temporary folder (GoldenRecorded), or after the
// first case (GoldenUpdate), leaves nothing in the system's temporary
// folder (it used to leave /tmp/blackbox-golden-* folders); every case's
// recording is whole (store.Verify: complete), the new input's in the
// cases updated before the kill and untouched in the others, and beside
// it only the killed case's temporary folder. The next update re-records
// the rest, removes that folder (each case holds only its files) and every
// case checks.
func TestAKilledUpdateLeavesEveryCaseWholeAndARetrySucceeds(t *testing.T) {
	cases := []string{"ledger-plain", "ledger-transfer"}
	caseFiles := []string{golden.CaseFile, golden.InputFile, golden.Recording}
	for _, tc := range []struct {
		point      string
		rerecorded int // the first cases re-recorded by the killed update
		temps      int // the temporary folders the first case holds after the kill
	}{
		{killpoint.GoldenRecorded, 0, 1},
		{killpoint.GoldenUpdate, 1, 0},
	} {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			before := map[string]map[string]string{}
			for _, c := range cases {
				if err := os.CopyFS(filepath.Join(dir, c), os.DirFS(filepath.Join("testdata", c))); err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(filepath.Join(dir, c, golden.InputFile), os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.WriteString("zed,42\n")
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
				before[c] = readAll(t, filepath.Join(dir, c))
			}
			tmpdir := t.TempDir()
			killUpdateAt(t, dir, tmpdir, tc.point)
			if left, _ := os.ReadDir(tmpdir); len(left) > 0 {
				t.Errorf("the killed update left %d files in TMPDIR: %v", len(left), left)
			}
			for i, c := range cases {
				after := readAll(t, filepath.Join(dir, c))
				var temps, others []string
				for name := range after {
					if strings.HasPrefix(name, ".golden-update-tmp-") {
						temps = append(temps, name)
					} else {
						others = append(others, name)
					}
				}
				slices.Sort(others)
				if want := slices.Sorted(slices.Values(caseFiles)); !slices.Equal(others, want) {
					t.Errorf("case %s holds %q after the kill, want %q", c, others, want)
				}
				wantTemps := 0
				if i == 0 {
					wantTemps = tc.temps
				}
				if len(temps) != wantTemps {
					t.Errorf("case %s holds %d temporary folders after the kill, want %d: %q", c, len(temps), wantTemps, temps)
				}
				if err := verifyComplete(filepath.Join(dir, c, golden.Recording)); err != nil {
					t.Errorf("case %s's recording after the kill: %v", c, err)
				}
				for _, name := range caseFiles {
					changed := after[name] != before[c][name]
					if want := name == golden.Recording && i < tc.rerecorded; changed != want {
						t.Errorf("case %s: %s changed by the killed update: %v, want %v", c, name, changed, want)
					}
				}
			}
			if err := golden.Update(dir, builtins()...); err != nil {
				t.Fatal(err)
			}
			if ok, report, err := golden.Verify(dir, builtins()...); err != nil || !ok {
				t.Errorf("Verify after the next update: ok %v err %v:\n%s", ok, err, report)
			}
			for _, c := range cases {
				got := readAll(t, filepath.Join(dir, c))
				if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, slices.Sorted(slices.Values(caseFiles))) {
					t.Errorf("after the next update case %s holds %q, want %q", c, names, caseFiles)
				}
				if got[golden.Recording] == before[c][golden.Recording] {
					t.Errorf("case %s was not re-recorded by the next update", c)
				}
			}
		})
	}
}

// verifyComplete reads the CSV recording at path whole: nil when it is
// complete.
func verifyComplete(path string) error {
	r, err := csvstore.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	if ps := r.Problems(); len(ps) > 0 {
		return fmt.Errorf("not complete: %v", ps)
	}
	return nil
}

// TestAHalfReplacedPairIsNoticed: a restart case's run1.csv and run2.csv
// are replaced together: an update killed after it replaced run1.csv but
// not run2.csv (of a changed input) makes Check fail (each file alone
// still replays identical: the pair used to pass), and the next update
// finishes it: the pair is the new input's.
func TestAHalfReplacedPairIsNoticed(t *testing.T) {
	dir := restartCase(t)
	cdir := filepath.Join(dir, "ledger-restart")
	old := readAll(t, cdir)
	in := filepath.Join(cdir, golden.InputFile)
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, append([]byte("zed,7\n"), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	killUpdateAt(t, dir, t.TempDir(), killpoint.GoldenMoved) // the first rename: run1.csv
	half := readAll(t, cdir)
	if half["run1.csv"] == old["run1.csv"] || half["run2.csv"] != old["run2.csv"] {
		t.Fatalf("the kill did not fall between the two renames")
	}
	ok, report, err := golden.Verify(dir, builtins()...)
	if err != nil || ok || !strings.Contains(report, "FAIL ledger-restart/"+golden.ReadyDir) {
		t.Errorf("Verify of a half-replaced pair: ok %v err %v, want a failure naming %s:\n%s", ok, err, golden.ReadyDir, report)
	}
	if err := golden.Update(dir, builtins()...); err != nil {
		t.Fatal(err)
	}
	if ok, report, err := golden.Verify(dir, builtins()...); err != nil || !ok {
		t.Errorf("Verify after the next update: ok %v err %v:\n%s", ok, err, report)
	}
	// The pair is what a clean update of the new input records.
	fresh := t.TempDir()
	if err := os.Mkdir(filepath.Join(fresh, "ledger-restart"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{golden.CaseFile, golden.InputFile} {
		b, _ := os.ReadFile(filepath.Join(cdir, f))
		os.WriteFile(filepath.Join(fresh, "ledger-restart", f), b, 0o644)
	}
	if err := golden.Update(fresh, builtins()...); err != nil {
		t.Fatal(err)
	}
	want, got := readAll(t, filepath.Join(fresh, "ledger-restart")), readAll(t, cdir)
	for _, f := range []string{"run1.csv", "run2.csv"} {
		if !bytes.Equal([]byte(got[f]), []byte(want[f])) {
			t.Errorf("%s is not the new input's", f)
		}
	}
	if len(got) != len(want) {
		t.Errorf("case files %v, want %v", keys(got), keys(want))
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
