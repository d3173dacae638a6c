package incident_test

import (
	"iter"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// million is the length of the long recording of the size bars.
const million = 1_000_000

// heapReader is a Reader whose reads sample the growth of the live
// heap (HeapAlloc) over base every 65,536 rows, into peak. Not safe for
// concurrent use.
type heapReader struct {
	store.Reader
	base uint64
	peak *uint64
}

func (h heapReader) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	*h.peak = max(*h.peak, ms.HeapAlloc-min(ms.HeapAlloc, h.base))
}

func (h heapReader) sampled(rows iter.Seq2[store.Entry, error]) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		n := 0
		for e, err := range rows {
			if n++; n%(1<<16) == 0 {
				h.sample()
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

func (h heapReader) Rows() iter.Seq2[store.Entry, error]    { return h.sampled(h.Reader.Rows()) }
func (h heapReader) Scan() iter.Seq2[store.Entry, error]    { return h.sampled(h.Reader.Scan()) }
func (h heapReader) Streams() iter.Seq2[store.Entry, error] { return h.sampled(h.Reader.Streams()) }

// explainLong explains the recording at path and returns the Findings and
// the largest growth of the live heap it saw over its start, sampled as
// Explain reads and after.
func explainLong(tb testing.TB, path string) (*incident.Findings, uint64) {
	tb.Helper()
	r, err := csvstore.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	var peak uint64
	h := heapReader{Reader: r, base: ms.HeapAlloc, peak: &peak}
	f, err := incident.Explain([]incident.Recording{{File: path, Reader: h}}, incident.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	h.sample()
	return f, peak
}

// TestExplainOfAMillionInputsGrowsTheHeapByUnderTwentyMegabytes: Explain
// keeps of a run's inputs a few bytes each, so that the answers about a
// 1M-input recording take a live heap of under 20 MB (the report command's
// bar is 100 MB for the answers and the page), and it still answers: the
// run ended, nothing lost.
func TestExplainOfAMillionInputsGrowsTheHeapByUnderTwentyMegabytes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 1M-input recording")
	}
	path := filepath.Join(t.TempDir(), "long.csv")
	storetest.WriteLong(t, storetest.CSV, path, million)
	f, peak := explainLong(t, path)
	if len(f.Runs) != 1 || !f.Runs[0].Ended || f.Lost || !f.Complete || f.Runs[0].Counts["INLINE"] != million {
		t.Fatalf("the findings of %d inputs: %+v", million, f.Runs)
	}
	if peak >= 20<<20 {
		t.Errorf("the live heap grew by %d bytes while Explain read %d inputs, want under 20 MB", peak, million)
	}
	t.Logf("%d inputs: the live heap grew by at most %d bytes", million, peak)
}

// BenchmarkExplainOfAMillionInputs explains a 1M-input recording per op:
// peak-heap-MB is the largest growth of the live heap sampled as it reads,
// maxrss-MB the process's peak resident memory when it ends.
func BenchmarkExplainOfAMillionInputs(b *testing.B) {
	path := filepath.Join(b.TempDir(), "long.csv")
	storetest.WriteLong(b, storetest.CSV, path, million)
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		_, p := explainLong(b, path)
		peak = max(peak, p)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MB") // Linux: kilobytes
	}
}
