package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	_ "github.com/blackbox-audit/blackbox/store/csvstore"
	_ "github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// TestCreatePicksTheBackendByExtensionAndOpenByTheFilesHead: store.Create
// gives a .csv path to the csv backend and any other to sqlite (or the
// backend named); store.Open and store.Sniff find the backend by the
// file's first bytes, whatever its name, and refuse an empty file and
// another file (ErrFormat).
func TestCreatePicksTheBackendByExtensionAndOpenByTheFilesHead(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, backend, want string
	}{
		{"r.csv", "", "csv"},
		{"r.CSV", "", "csv"},
		{"r.db", "", "sqlite"},
		{"r", "", "sqlite"},
		{"named.db", "csv", "csv"},
		{"named.csv", "sqlite", "sqlite"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			w, err := store.Create(p, tc.backend)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Append(storetest.Recording()...); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got, err := store.Sniff(p); err != nil || got != tc.want {
				t.Errorf("Sniff = %q, %v; want %q", got, err, tc.want)
			}
			r, err := store.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if ps := r.Problems(); len(ps) != 0 {
				t.Errorf("Problems: %v", ps)
			}
		})
	}
	for name, content := range map[string]string{"empty": "", "other": "not a recording\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Open(p); !errors.Is(err, store.ErrFormat) {
			t.Errorf("Open(%s file) = %v, want ErrFormat", name, err)
		}
		if got, err := store.Sniff(p); got != "" || err != nil {
			t.Errorf("Sniff(%s file) = %q, %v; want none", name, got, err)
		}
	}
	if _, err := store.Create(filepath.Join(dir, "x"), "parquet"); !errors.Is(err, store.ErrFormat) {
		t.Errorf("Create with an unknown backend: %v, want ErrFormat", err)
	}
}
