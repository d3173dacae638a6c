package csvstore_test

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/blackbox-audit/blackbox/store"
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
			e := &rows[i]
			fields[0] = e.Processor
			fields[1] = strconv.FormatInt(e.Index, 10)
			fields[2] = string(e.Kind)
			fields[3] = e.Source
			fields[4] = strconv.FormatInt(e.Seq, 10)
			fields[5] = store.FormatInstant(e.Instant)
			fields[6] = strconv.FormatInt(e.Epoch, 10)
			fields[7] = e.Key
			fields[8] = strconv.FormatInt(e.Offset, 10)
			fields[9] = strconv.FormatInt(e.N, 10)
			fields[10] = string(e.Payload)
			fields[11] = e.Detail
			fields[12] = store.FormatReads(e.Reads)
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
