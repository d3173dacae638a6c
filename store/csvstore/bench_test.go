package csvstore_test

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/storetest"
)

// BenchmarkAppend appends one input per op (DELIVERY + INLINE + OUTPUT,
// one Append, one write) to a file on disk. Compare its rows/s with
// BenchmarkFloorEncodingCSV.
func BenchmarkAppend(b *testing.B) { storetest.BenchAppend(b, backend{}) }

// BenchmarkFloorEncodingCSV is the floor of BenchmarkAppend: encoding/csv
// writing the same three rows' fields (formatted the same way) into a
// buffer, then one file write per input, no fsync: the same flush policy.
func BenchmarkFloorEncodingCSV(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "floor.csv"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write([]string{csvstore.Header})
	w.Flush()
	f.Write(buf.Bytes())
	rows := storetest.Input("p", 1)
	fields := make([]string, 13)
	var n int64
	for b.Loop() {
		n++
		storetest.Renumber(rows, n)
		buf.Reset()
		for i := range rows {
			storetest.CSVFields(&rows[i], fields)
			if err := w.Write(fields); err != nil {
				b.Fatal(err)
			}
		}
		w.Flush()
		if _, err := f.Write(buf.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkStream opens a recording of a million rows and streams one
// processor's rows (storetest.BenchStream).
func BenchmarkStream(b *testing.B) { storetest.BenchStream(b, backend{}, 1000) }
