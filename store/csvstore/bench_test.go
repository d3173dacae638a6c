package csvstore_test

import (
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// BenchmarkAppend appends one input per op (DELIVERY + INLINE + OUTPUT,
// one Append, one write) to a file on disk. Compare its rows/s with
// BenchmarkFloorEncodingCSV.
func BenchmarkAppend(b *testing.B) { storetest.BenchAppend(b, backend{}) }

// BenchmarkFloorEncodingCSV is the floor of BenchmarkAppend: encoding/csv
// writing the same three rows' fields (formatted the same way) into a
// buffer, then one file write per input, no fsync: the same flush policy.
func BenchmarkFloorEncodingCSV(b *testing.B) {
	fl := storetest.FloorCSV(b, filepath.Join(b.TempDir(), "floor.csv"), csvstore.Header)
	rows := storetest.Input("p", 1)
	var n int64
	for b.Loop() {
		n++
		storetest.Renumber(rows, n)
		fl.Write(rows)
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkStream opens a recording of a million rows and streams one
// processor's rows (storetest.BenchStream).
func BenchmarkStream(b *testing.B) { storetest.BenchStream(b, backend{}, 1000) }
