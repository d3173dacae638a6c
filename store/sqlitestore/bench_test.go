package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/store/sqlitestore"
	"github.com/blackbox-audit/blackbox/store/storetest"
)

// BenchmarkAppend appends one input per op (DELIVERY + INLINE + OUTPUT,
// one Append, one transaction) to a database on disk. Compare its rows/s
// with BenchmarkFloorInsert.
func BenchmarkAppend(b *testing.B) { storetest.BenchAppend(b, backend{}) }

// BenchmarkFloorInsert is the floor of BenchmarkAppend: the same schema
// and pragmas (WAL, synchronous=NORMAL), a bare prepared INSERT of the
// same three rows' column values, one transaction per input.
func BenchmarkFloorInsert(b *testing.B) {
	p := filepath.Join(b.TempDir(), "floor.db")
	db, err := sql.Open("sqlite", "file:"+p+"?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, sqlitestore.Schema); err != nil {
		b.Fatal(err)
	}
	ins, err := conn.PrepareContext(ctx, storetest.FloorInsert)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	rows := storetest.Input("p", 1)
	var n int64
	for b.Loop() {
		n++
		storetest.Renumber(rows, n)
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			b.Fatal(err)
		}
		for i := range rows {
			if _, err := ins.ExecContext(ctx, storetest.InsertArgs(&rows[i])...); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkStream opens a recording of a million rows and streams one
// processor's rows (storetest.BenchStream).
func BenchmarkStream(b *testing.B) { storetest.BenchStream(b, backend{}, 10000) }
