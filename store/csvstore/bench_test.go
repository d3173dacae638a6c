package csvstore_test

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/storetest"
)

// BenchmarkAppend appends one input per op (DELIVERY + INLINE + OUTPUT,
// one Append, one write) to a file on disk. Compare its rows/s with
// BenchmarkFloorEncodingCSV.
func BenchmarkAppend(b *testing.B) {
	s, err := csvstore.Create(filepath.Join(b.TempDir(), "r.csv"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	head := []store.Entry{store.EncodeMeta(store.Meta{Created: storetest.T0}),
		{Processor: "p", Index: 1, Kind: store.KindStart}}
	if err := s.Append(head...); err != nil {
		b.Fatal(err)
	}
	rows := storetest.Input("p", 1)
	var n int64
	for b.Loop() {
		n++
		rows[0].Index, rows[1].Index, rows[2].Index = 3*n-1, 3*n, 3*n+1
		rows[0].Seq, rows[1].Seq = n, n
		if err := s.Append(rows...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

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
		rows[0].Index, rows[1].Index, rows[2].Index = 3*n-1, 3*n, 3*n+1
		rows[0].Seq, rows[1].Seq = n, n
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

// streamRows is the size of BenchmarkStream's recording.
const streamRows = 1_000_000

// BenchmarkStream opens a recording of a million rows and streams one
// processor's rows. heap-MB is the largest growth of the live heap over
// the opening and the iteration: it stays flat, whatever the length of
// the recording.
func BenchmarkStream(b *testing.B) {
	p := filepath.Join(b.TempDir(), "big.csv")
	w, err := csvstore.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Append(store.EncodeMeta(store.Meta{Created: storetest.T0}),
		store.Entry{Processor: "p", Index: 1, Kind: store.KindStart}); err != nil {
		b.Fatal(err)
	}
	inputs := int64((streamRows - 3) / 3)
	batch := make([]store.Entry, 0, 3000)
	for i := int64(1); i <= inputs; i++ {
		batch = append(batch, storetest.Input("p", i)...)
		if len(batch) == cap(batch) || i == inputs {
			if err := w.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.Append(store.Entry{Processor: "p", Index: 3*inputs + 2, Kind: store.KindEnd, N: inputs}); err != nil {
		b.Fatal(err)
	}
	w.Close()
	fi, _ := os.Stat(p)

	var peak uint64
	var ms runtime.MemStats
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var rows int64
	var openTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := csvstore.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		openTime += time.Since(t0)
		sample()
		if ps := s.Problems(); len(ps) != 0 {
			b.Fatal(ps)
		}
		for _, err := range s.Stream("p") {
			if err != nil {
				b.Fatal(err)
			}
			if rows++; rows%100_000 == 0 {
				sample()
			}
		}
		s.Close()
	}
	b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-MB")
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
	b.ReportMetric(openTime.Seconds()/float64(b.N), "open-s/op")
}
