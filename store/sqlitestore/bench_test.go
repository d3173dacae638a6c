package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// BenchmarkAppend appends one input per op (DELIVERY + INLINE + OUTPUT,
// one Append, one transaction) to a database on disk. Compare its rows/s
// with BenchmarkFloorInsert.
func BenchmarkAppend(b *testing.B) { storetest.BenchAppend(b, backend{}) }

// BenchmarkAppendBatch appends 100 inputs per Append, as a group commit
// under load does.
func BenchmarkAppendBatch(b *testing.B) { storetest.BenchAppendBatch(b, backend{}, 100) }

// BenchmarkFloorInsert is the floor of BenchmarkAppend: the same schema
// and pragmas (WAL, synchronous=NORMAL), a bare prepared INSERT of the
// same three rows' column values, one transaction per input.
func BenchmarkFloorInsert(b *testing.B) {
	fc := storetest.FloorDB(b, filepath.Join(b.TempDir(), "floor.db"), sqlitestore.Schema)
	rows := storetest.Input("p", 1)
	var n int64
	for b.Loop() {
		n++
		storetest.Renumber(rows, n)
		fc.Insert(rows)
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkStream opens a recording of a million rows and streams one
// processor's rows (storetest.BenchStream).
func BenchmarkStream(b *testing.B) { storetest.BenchStream(b, backend{}, 10000) }
