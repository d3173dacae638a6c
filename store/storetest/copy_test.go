package storetest_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
	"github.com/blackbox-audit/blackbox/store/storetest"
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

	type step struct {
		name   string
		create func(string) (store.Store, error)
		open   func(string) (store.Store, error)
	}
	csvStep := step{"csv",
		func(p string) (store.Store, error) { return csvstore.Create(p) },
		func(p string) (store.Store, error) { return csvstore.Open(p) }}
	sqliteStep := step{"sqlite",
		func(p string) (store.Store, error) { return sqlitestore.Create(p) },
		func(p string) (store.Store, error) { return sqlitestore.Open(p) }}

	var src store.Reader = mem
	for i, st := range []step{csvStep, sqliteStep, csvStep} {
		p := filepath.Join(dir, string(rune('a'+i))+"."+st.name)
		dst, err := st.create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Copy(dst, src); err != nil {
			t.Fatalf("Copy to %s: %v", p, err)
		}
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := st.open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
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
		for _, w := range []store.Store{c, s} {
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
