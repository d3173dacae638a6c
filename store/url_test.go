package store_test

import (
	"errors"
	"testing"

	"github.com/blackbox-audit/blackbox/store"
)

// errRouted is the error of the fake URL backend: Open and Create were
// handed path.
type errRouted struct{ op, path string }

func (e *errRouted) Error() string { return e.op + " " + e.path }

func init() {
	store.Register(store.Driver{Name: "fakeurl", Schemes: []string{"fake", "fakes"},
		Sniff:  func([]byte) bool { return false },
		Open:   func(p string) (store.Backend, error) { return nil, &errRouted{"open", p} },
		Create: func(p string) (store.Backend, error) { return nil, &errRouted{"create", p} }})
}

// TestAURLGoesToTheBackendOfItsScheme: Open, Create and Sniff hand a path
// beginning with a registered scheme and "://" (any case) to that backend
// without touching a file; a path of no registered scheme is a file path;
// Create refuses a URL with another backend named.
func TestAURLGoesToTheBackendOfItsScheme(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"fake://host/db?run=1", "fakeurl"},
		{"FAKES://host/db", "fakeurl"},
		{"other://host/db", ""},
		{"fake:/host/db", ""},
		{"dir/fake://x", ""},
	} {
		if got := store.URLBackend(tc.path); got != tc.want {
			t.Errorf("URLBackend(%q) = %q, want %q", tc.path, got, tc.want)
		}
		if tc.want == "" {
			continue
		}
		if got, err := store.Sniff(tc.path); got != tc.want || err != nil {
			t.Errorf("Sniff(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
		var re *errRouted
		if _, err := store.Open(tc.path); !errors.As(err, &re) || re.op != "open" || re.path != tc.path {
			t.Errorf("Open(%q): %v, want the backend's open of it", tc.path, err)
		}
		for _, name := range []string{"", "fakeurl"} {
			if _, err := store.Create(tc.path, name); !errors.As(err, &re) || re.op != "create" || re.path != tc.path {
				t.Errorf("Create(%q, %q): %v, want the backend's create of it", tc.path, name, err)
			}
		}
		if _, err := store.Create(tc.path, "csv"); !errors.Is(err, store.ErrFormat) {
			t.Errorf("Create(%q, csv): %v, want ErrFormat", tc.path, err)
		}
	}
}
