package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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

// closeCounted is a reader opened from path that counts the Closes of
// the readers it is one of.
type closeCounted struct {
	store.Reader
	path   string
	closes *int
}

func (r closeCounted) Close() error {
	*r.closes++
	return r.Reader.Close()
}

// TestOpenAllOpensInOrderAndClosesWhatItOpenedWhenOneFails: OpenAll opens
// each path in order and returns the readers in that order; when one
// fails it returns that error, opens none after it and closes those it
// opened before.
func TestOpenAllOpensInOrderAndClosesWhatItOpenedWhenOneFails(t *testing.T) {
	errBad := errors.New("bad recording")
	tests := []struct {
		name       string
		paths      []string
		wantOpened []string
		wantErr    error
		wantClosed int
	}{
		{"all open", []string{"a", "b", "c"}, []string{"a", "b", "c"}, nil, 0},
		{"the first fails", []string{"bad", "b"}, []string{"bad"}, errBad, 0},
		{"a later one fails", []string{"a", "b", "bad", "c"}, []string{"a", "b", "bad"}, errBad, 2},
		{"none", nil, nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opened []string
			closes := 0
			rs, err := store.OpenAll(tt.paths, func(p string) (store.Reader, error) {
				opened = append(opened, p)
				if p == "bad" {
					return nil, errBad
				}
				return closeCounted{store.NewMemory(), p, &closes}, nil
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("OpenAll: %v, want %v", err, tt.wantErr)
			}
			if !slices.Equal(opened, tt.wantOpened) || closes != tt.wantClosed {
				t.Errorf("opened %q, closed %d; want %q, %d", opened, closes, tt.wantOpened, tt.wantClosed)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.(closeCounted).path)
			}
			want := tt.paths
			if err != nil {
				want = nil // no reader with the error
			}
			if !slices.Equal(got, want) {
				t.Errorf("readers of %q, want %q", got, want)
			}
		})
	}
}
