package report_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/report"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// million is the length of the long recording of the size bars.
const million = 1_000_000

// writeLong writes a CSV recording of n inputs (storetest.WriteLong) and
// returns its path.
func writeLong(tb testing.TB, n int64) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "long.csv")
	storetest.WriteLong(tb, storetest.CSV, path, n)
	return path
}

// writeReport explains the recording at path (incident.Explain), builds
// its report with the answers and writes it to out, as `blackbox report`
// does. It returns the largest growth of the live heap (HeapAlloc) it saw
// over its start, sampled after Explain, as Build reads (Options.Progress)
// and after. (incident's TestExplainOfAMillionInputsGrowsTheHeapByUnderTwentyMegabytes
// samples Explain as it reads.)
func writeReport(tb testing.TB, path, out string) (peak uint64) {
	tb.Helper()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	sample := func(int, int64) {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc-min(ms.HeapAlloc, base))
	}
	r, err := csvstore.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	fd, err := incident.Explain([]incident.Recording{{File: path, Reader: r}}, incident.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	sample(0, 0)
	rep, err := report.Build(context.Background(), []report.Run{{Name: path, Reader: r}}, report.Options{Findings: fd, Progress: sample})
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
	sample(0, 0)
	return peak
}

// TestTheReportOfAMillionInputsIsUnderTwoMegabytes: a 1M-input recording
// gives a page under 2 MB, and its live heap grows by under 100 MB while
// it is explained and its report built and written: the timelines are
// bucketed, and the answers keep a few bytes per input.
func TestTheReportOfAMillionInputsIsUnderTwoMegabytes(t *testing.T) {
	path := writeLong(t, million)
	out := filepath.Join(t.TempDir(), "report.html")
	peak := writeReport(t, path, out)
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= 2<<20 {
		t.Errorf("the report of %d inputs is %d bytes, want under 2 MB", million, fi.Size())
	}
	if peak >= 100<<20 {
		t.Errorf("the live heap grew by %d bytes while the report of %d inputs was written, want under 100 MB", peak, million)
	}
	t.Logf("%d inputs: a page of %d bytes, the live heap grew by at most %d bytes", million, fi.Size(), peak)
}

// BenchmarkReportOfAMillionInputs explains a 1M-input recording, builds
// and writes its report per op (the bar: under 5 s and 100 MB).
func BenchmarkReportOfAMillionInputs(b *testing.B) {
	path := writeLong(b, million)
	out := filepath.Join(b.TempDir(), "report.html")
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		peak = max(peak, writeReport(b, path, out))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	if fi, err := os.Stat(out); err == nil {
		b.ReportMetric(float64(fi.Size()), "page-bytes")
	}
}

// BenchmarkReportCommandOfAMillionInputs runs `blackbox report` over a
// 1M-input recording per op, in this process: the explain answers
// (incident.Explain) and the page. maxrss-MB is the process's peak
// resident memory when it ends (the recording is written in batches
// before, in far less).
func BenchmarkReportCommandOfAMillionInputs(b *testing.B) {
	path := writeLong(b, million)
	out := filepath.Join(b.TempDir(), "report.html")
	c := cli.New(cli.WithStdout(io.Discard), cli.WithStderr(io.Discard))
	for b.Loop() {
		if code := c.Execute(context.Background(), []string{"report", path, "-o", out}); code != cli.ExitOK {
			b.Fatalf("blackbox report exited %d", code)
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MB") // Linux: kilobytes
	}
}
