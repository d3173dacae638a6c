package report_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/blackbox-audit/blackbox/report"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/storetest"
)

// million is the length of the long recording of the size bars.
const million = 1_000_000

// writeLong writes a CSV recording of n inputs (storetest.Input: a
// DELIVERY, an INLINE input and its OUTPUT each) of one processor stream,
// ended cleanly, with the store API directly, and returns its path.
func writeLong(tb testing.TB, n int64) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "long.csv")
	s, err := csvstore.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	rows := []store.Entry{store.EncodeMeta(store.Meta{Created: storetest.T0, Apps: map[string]string{"p": "ledger"}, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart, Instant: storetest.T0}}
	const batch = 2000
	for i := int64(1); i <= n; i++ {
		rows = append(rows, storetest.Input("p", i)...)
		if len(rows) >= 3*batch || i == n {
			if i == n {
				rows = append(rows, store.Entry{Processor: "p", Index: 3*n + 2, Kind: store.KindEnd, N: n, Instant: storetest.T0})
			}
			if err := s.Append(rows...); err != nil {
				tb.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// writeReport builds the report of the recording at path and writes it to
// out.
func writeReport(tb testing.TB, path, out string) {
	tb.Helper()
	r, err := csvstore.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	rep, err := report.Build(context.Background(), []report.Run{{Name: path, Reader: r}}, report.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := rep.WriteHTML(f); err != nil {
		tb.Fatal(err)
	}
}

// TestTheReportOfAMillionInputsIsUnderTwoMegabytes: a 1M-input recording
// gives a page under 2 MB, and building and writing it allocates under
// 100 MB in all (so its heap never holds more), whatever the recording's
// length: its timelines are bucketed.
func TestTheReportOfAMillionInputsIsUnderTwoMegabytes(t *testing.T) {
	path := writeLong(t, million)
	out := filepath.Join(t.TempDir(), "report.html")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	writeReport(t, path, out)
	runtime.ReadMemStats(&after)
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= 2<<20 {
		t.Errorf("the report of %d inputs is %d bytes, want under 2 MB", million, fi.Size())
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc >= 100<<20 {
		t.Errorf("the report of %d inputs allocated %d bytes, want under 100 MB", million, alloc)
	}
	t.Logf("%d inputs: a page of %d bytes, %d bytes allocated", million, fi.Size(), after.TotalAlloc-before.TotalAlloc)
}

// BenchmarkReportOfAMillionInputs builds and writes the report of a
// 1M-input recording per op (the bar: under 5 s and 100 MB).
func BenchmarkReportOfAMillionInputs(b *testing.B) {
	path := writeLong(b, million)
	out := filepath.Join(b.TempDir(), "report.html")
	b.ReportAllocs()
	for b.Loop() {
		writeReport(b, path, out)
	}
	if fi, err := os.Stat(out); err == nil {
		b.ReportMetric(float64(fi.Size()), "page-bytes")
	}
}
