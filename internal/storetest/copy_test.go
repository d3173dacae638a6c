package storetest_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// TestCopyChain converts memory -> CSV -> SQLite -> CSV and compares every
// step with the original, row for row, and their problems.
func TestCopyChain(t *testing.T) {
	dir := t.TempDir()
	mem := store.NewMemory()
	for _, g := range storetest.Groups(storetest.Recording()) {
		if err := mem.Append(g...); err != nil {
			t.Fatal(err)
		}
	}
	want := storetest.Normalized(storetest.Recording())

	steps := []struct {
		name string
		b    storetest.Backend
	}{{"csv", storetest.CSV}, {"sqlite", storetest.SQLite}, {"csv", storetest.CSV}}

	var src store.Reader = mem
	for i, st := range steps {
		p := filepath.Join(dir, string(rune('a'+i))+"."+st.name)
		r := storetest.Reopen(t, st.b, p, src)
		got, errs := storetest.ReadAll(r)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", p, errs)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("step %d (%s) (-want +got):\n%s", i+1, st.name, d)
		}
		if ps := r.Problems(); len(ps) != 0 {
			t.Errorf("step %d (%s): problems %v", i+1, st.name, ps)
		}
		src = r
	}
}

// TestSameProblems checks that the three stores report the same problems
// for the same rows, incomplete ones included (an unfinished recording cut
// after each row).
func TestSameProblems(t *testing.T) {
	rows := storetest.Recording()
	type key struct {
		Kind      store.ProblemKind
		Processor string
		Index     int64
		Row       store.Kind
	}
	keys := func(ps []store.Problem) []key {
		var out []key
		for _, p := range ps {
			out = append(out, key{p.Kind, p.Processor, p.Index, p.Row})
		}
		return out
	}
	for n := 1; n <= len(rows); n++ {
		mem, err := store.OpenMemory(rows[:n]...)
		if err != nil {
			t.Fatal(err)
		}
		want := keys(mem.Problems())
		dir := t.TempDir()
		c, err := csvstore.Create(filepath.Join(dir, "r.csv"))
		if err != nil {
			t.Fatal(err)
		}
		s, err := sqlitestore.Create(filepath.Join(dir, "r.db"))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []storetest.Store{c, s} {
			if err := w.Append(rows[:n]...); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, keys(w.Problems())); d != "" {
				t.Errorf("%d rows, %T (-memory +store):\n%s", n, w, d)
			}
			w.Close()
		}
	}
}
