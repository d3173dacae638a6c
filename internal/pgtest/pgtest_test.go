package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestDatabasesAreFreshAndSeparate: each test database starts empty and
// what one holds the other does not; the server runs the settings Main
// promises.
func TestDatabasesAreFreshAndSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := Database(t), Database(t)
	if a == b {
		t.Fatalf("two databases with one URL %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE x (v int); INSERT INTO x VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'x'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database b holds a's table x")
	}
	for _, tc := range []struct{ setting, want string }{
		{"fsync", "off"}, {"synchronous_commit", "off"}, {"full_page_writes", "off"}, {"listen_addresses", ""},
	} {
		var got string
		if err := ca.QueryRow(ctx, "SELECT current_setting($1)", tc.setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s = %q, want %q", tc.setting, got, tc.want)
		}
	}
}
