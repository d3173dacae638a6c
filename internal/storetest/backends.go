package storetest

import (
	"testing"

	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// The file stores as Backends (without a Corrupter: their own tests add
// one). Safe for concurrent use.
var (
	CSV    Backend = csvBackend{}
	SQLite Backend = sqliteBackend{}
)

type csvBackend struct{}

func (csvBackend) Create(path string) (Store, error) { return csvstore.Create(path) }
func (csvBackend) Open(path string) (Store, error)   { return csvstore.Open(path) }

type sqliteBackend struct{}

func (sqliteBackend) Create(path string) (Store, error) { return sqlitestore.Create(path) }
func (sqliteBackend) Open(path string) (Store, error)   { return sqlitestore.Open(path) }

// Reopen copies src into a new recording of b at path (store.Copy), closes
// it and opens it for reading. The test's cleanup closes what it returns.
func Reopen(t testing.TB, b Backend, path string, src store.Reader) Store {
	t.Helper()
	dst, err := b.Create(path)
	if err != nil {
		t.Fatalf("Create(%s): %v", path, err)
	}
	if err := store.Copy(dst, src); err != nil {
		t.Fatalf("Copy to %s: %v", path, err)
	}
	if err := dst.Close(); err != nil {
		t.Fatalf("Close(%s): %v", path, err)
	}
	r, err := b.Open(path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
