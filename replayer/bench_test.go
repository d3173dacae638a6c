package replayer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// The record and replay benchmarks measure, in one `go test -bench` run,
// the throughput of recording b.N ledger inputs through the engine (a
// generated input file read by the file source, one clock reading, one output and one
// completion per input: DELIVERY + INLINE + OUTPUT rows) and of replaying
// such a recording from the file, opening (and so verifying) it included.
// Run the 1M-input figures with
//
//	go test -run '^$' -bench 'Record|Replay' -benchtime 1000000x ./replayer/
//
// The replay benchmarks also report the peak resident memory (VmRSS) and
// the peak heap in use while replaying. BenchmarkReplayCSV also reports its
// floor, measured in the same run on the same recording just before the
// replay: floor-inputs/s is the recording's inputs divided by the time
// encoding/csv takes merely to read every row of the file (readCSVRows: a
// bufio.Reader, a csv.Reader reusing its record, no decoding of any field).

func BenchmarkRecordCSV(b *testing.B) {
	benchRecord(b, func(p string) (store.Writer, error) { return csvstore.Create(p) })
}

func BenchmarkReplayCSV(b *testing.B) {
	benchReplay(b, func(p string) (store.Writer, error) { return csvstore.Create(p) },
		func(p string) (store.Reader, error) { return csvstore.Open(p) }, readCSVRows)
}

// readCSVRows is the floor of a replay from CSV: encoding/csv reading
// every row of the recording at path (every field split and unquoted, none
// decoded), returning the rows read.
func readCSVRows(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, 64<<10))
	r.ReuseRecord = true
	var n int64
	for {
		_, err := r.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

func BenchmarkRecordSQLite(b *testing.B) {
	benchRecord(b, func(p string) (store.Writer, error) { return sqlitestore.Create(p) })
}

func BenchmarkReplaySQLite(b *testing.B) {
	benchReplay(b, func(p string) (store.Writer, error) { return sqlitestore.Create(p) },
		func(p string) (store.Reader, error) { return sqlitestore.Open(p) }, nil)
}

// BenchmarkDiffCSV compares two CSV recordings of the same 100,000 ledger
// inputs per op (opening both included). Their outputs differ only in the
// clock reading "at": same ignores it (verdict Same: the index of both
// sides and their alignment, the pass every Diff makes); different does
// not (every input differs: the second pass fetches and compares the
// DefaultDiffLimit inputs listed).
func BenchmarkDiffCSV(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	var paths [2]string
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("r%d.csv", i))
		w, err := csvstore.Create(paths[i])
		if err != nil {
			b.Fatal(err)
		}
		recordLedger(b, w, n)
	}
	for _, c := range []struct {
		name   string
		ignore []string
		want   replayer.DiffVerdict
	}{{"same", []string{"at"}, replayer.DiffSame}, {"different", nil, replayer.DiffDifferent}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var sides [2][]store.Reader
				for i, p := range paths {
					r, err := csvstore.Open(p)
					if err != nil {
						b.Fatal(err)
					}
					sides[i] = []store.Reader{r}
				}
				rep, err := replayer.Diff(context.Background(), sides[0], sides[1], replayer.DiffOptions{Ignore: c.ignore})
				if err != nil {
					b.Fatal(err)
				}
				if rep.Verdict != c.want || rep.Processors[0].Common != n {
					var buf bytes.Buffer
					rep.WriteText(&buf)
					b.Fatalf("diff of two recordings of %d inputs, want %s:\n%.2000s", n, c.want, buf.String())
				}
				for _, s := range sides {
					s[0].Close()
				}
			}
			b.ReportMetric(float64(2*n)*float64(b.N)/b.Elapsed().Seconds(), "inputs/s")
		})
	}
}

// recordLedger records n ledger inputs into w, read from a generated input
// file by the file source (once-earliest), and returns how long the engine
// took from Start to the last input handled.
func recordLedger(tb testing.TB, w store.Writer, n int) time.Duration {
	tb.Helper()
	input := filepath.Join(tb.TempDir(), "input.txt")
	f, err := os.Create(input)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(bw, "acct%d,1\n", i%100)
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	src, err := filesource.New(input, filesource.Options{Read: filesource.OnceEarliest, Epoch: 1})
	if err != nil {
		tb.Fatal(err)
	}
	ledger, err := apps.LedgerApp().Build(nil)
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := recorder.New(w, recorder.Options{Apps: map[string]string{"ledger": "ledger"}})
	if err != nil {
		tb.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "input", Source: src, QueueSize: 4096}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"input"},
			Processors: []engine.ProcessorConfig{{Name: "ledger", Processor: ledger}}}},
		Observer: rec.Observer(),
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if err := e.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.WaitSettled(ctx); err != nil {
		tb.Fatal(err)
	}
	elapsed := time.Since(start)
	if err := e.Stop(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return elapsed
}

// benchRecord reports the recording run's inputs/s, its peak resident
// memory and the recording's bytes per input.
func benchRecord(b *testing.B, create func(string) (store.Writer, error)) {
	dir := b.TempDir()
	path := filepath.Join(dir, "r")
	w, err := create(path)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	peak := sampleMemory()
	b.ResetTimer()
	elapsed := recordLedger(b, w, b.N)
	b.StopTimer()
	rss, _ := peak()
	var size int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries { // the recording and any -wal beside it
		if fi, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), "r") {
			size += fi.Size()
		}
	}
	if rss > 100<<20 {
		b.Errorf("peak resident memory %.1f MB while recording, want < 100 MB", float64(rss)/(1<<20))
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "inputs/s")
	b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
	b.ReportMetric(float64(size)/float64(b.N), "bytes/input")
}

// benchReplay records b.N ledger inputs, then times opening and replaying
// the recording; floor, if set, is timed over the same file first and
// reported as floor-inputs/s.
func benchReplay(b *testing.B, create func(string) (store.Writer, error), open func(string) (store.Reader, error),
	floor func(path string) (int64, error)) {
	path := filepath.Join(b.TempDir(), "r")
	w, err := create(path)
	if err != nil {
		b.Fatal(err)
	}
	recordLedger(b, w, b.N)
	var floorElapsed time.Duration
	if floor != nil {
		start := time.Now()
		rows, err := floor(path)
		floorElapsed = time.Since(start)
		if err != nil || rows < 3*int64(b.N) {
			b.Fatalf("floor read %d rows of a recording of %d inputs: %v", rows, b.N, err)
		}
	}
	reg := []core.App{apps.LedgerApp()}
	runtime.GC()
	debug.FreeOSMemory()
	peak := sampleMemory()
	b.ResetTimer()
	start := time.Now()
	r, err := open(path)
	if err != nil {
		b.Fatal(err)
	}
	rep, err := replayer.Replay(context.Background(), r, reg, replayer.Options{})
	if err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	rss, heap := peak()
	r.Close()
	if !rep.Identical || !rep.Complete || rep.Processors[0].Inputs != int64(b.N) {
		var buf bytes.Buffer
		rep.WriteText(&buf)
		b.Fatalf("replay of %d inputs:\n%s", b.N, buf.String())
	}
	if rss > 100<<20 {
		b.Errorf("peak resident memory %.1f MB while replaying, want < 100 MB", float64(rss)/(1<<20))
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "inputs/s")
	b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
	b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MB")
	if floor != nil {
		b.ReportMetric(float64(b.N)/floorElapsed.Seconds(), "floor-inputs/s")
	}
}

// sampleMemory samples the process's resident memory (VmRSS, 0 where
// /proc is missing) and heap in use every 5ms until the returned function is
// called, which returns the peaks.
func sampleMemory() func() (rss, heap uint64) {
	var mu sync.Mutex
	var maxRSS, maxHeap uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		r := vmRSS()
		mu.Lock()
		maxRSS, maxHeap = max(maxRSS, r), max(maxHeap, ms.HeapInuse)
		mu.Unlock()
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() (uint64, uint64) {
		sample()
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return maxRSS, maxHeap
	}
}

// vmRSS is the process's resident set size, from /proc/self/status.
func vmRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb uint64
		if n, _ := fmt.Sscanf(sc.Text(), "VmRSS: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 0
}
