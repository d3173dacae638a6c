package outbox_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// costLines is the input of each run of BenchmarkCost. A run with the
// outbox delivers its last outputs after the state save that follows them
// (up to one save interval, 100ms: BenchmarkLatency's figure), so a run
// must be long against that interval for the ratio to measure throughput:
// at 50,000 lines (a fifth of a second) the ratio of one count ranged from
// 0.68 to 0.99 on a quiet machine; at 200,000, 0.95 to 1.03.
const costLines = 200_000

// BenchmarkCost is what the outbox costs a run's throughput (issue 31):
// the ledger over a file of costLines lines read from its committed
// pointer, its state saved in batches at its defaults, recorded to CSV, as
// `blackbox run --app ledger --read committed --state S` runs it. Each
// iteration runs the same input twice, in turn: without an outbox (the
// floor) and with every output delivered through the outbox to a file
// (--out). The metrics are each one's throughput (floor-lines/s,
// outbox-lines/s) and their ratio (outbox/floor), the claim: the bar is at
// least 0.9; beside them the process's CPU time per line of each
// (floor-cpu-us/line, outbox-cpu-us/line: user and system, every
// goroutine's, the garbage collector's included), which another process
// on the machine moves less than the wall time.
func BenchmarkCost(b *testing.B) {
	dir := b.TempDir()
	input := filepath.Join(dir, "ledger.txt")
	f, err := os.Create(input)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range costLines { // bench/e2e's ledger lines: 1,000 accounts, small signed amounts
		fmt.Fprintf(w, "acct-%d,%d\n", (i*31)%1000, (i*7919)%2001-1000)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	var floor, boxed, floorCPU, boxedCPU time.Duration
	for i := range b.N {
		cpu := cpuTime(b)
		floor += costRun(b, input, filepath.Join(dir, "floor-"+strconv.Itoa(i)), false)
		mid := cpuTime(b)
		boxed += costRun(b, input, filepath.Join(dir, "outbox-"+strconv.Itoa(i)), true)
		floorCPU, boxedCPU = floorCPU+mid-cpu, boxedCPU+cpuTime(b)-mid
	}
	lines := float64(costLines) * float64(b.N)
	perSec := func(d time.Duration) float64 { return lines / d.Seconds() }
	perLine := func(d time.Duration) float64 { return float64(d.Microseconds()) / lines }
	b.ReportMetric(perSec(floor), "floor-lines/s")
	b.ReportMetric(perSec(boxed), "outbox-lines/s")
	b.ReportMetric(float64(floor)/float64(boxed), "outbox/floor")
	b.ReportMetric(perLine(floorCPU), "floor-cpu-us/line")
	b.ReportMetric(perLine(boxedCPU), "outbox-cpu-us/line")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the CPU time (user and system) the process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// costRun runs the ledger over input once, its files named from base, and
// returns its wall time: from the start of the run to its recording, and
// with throughOutbox its outbox, closed. With throughOutbox it checks
// that every line's output was delivered.
func costRun(b *testing.B, input, base string, throughOutbox bool) time.Duration {
	b.Helper()
	start := time.Now()
	rec, err := store.Create(base+".csv", "")
	if err != nil {
		b.Fatal(err)
	}
	opts := map[string]string{apps.OptionState: base + ".json"}
	proc, err := apps.LedgerApp().New(opts)
	if err != nil {
		b.Fatal(err)
	}
	src, err := filesource.New(input, filesource.Options{Read: filesource.Committed, Pointer: base + ".ptr", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	cfg := recorder.RunConfig{
		Store:      rec,
		Feed:       engine.FeedConfig{Name: "in", Source: src, QueueSize: 1024},
		Processors: []recorder.Processor{{Name: "ledger", App: apps.LedgerApp(), Processor: proc, Options: opts}},
		Path:       base + ".csv",
		Logger:     quiet,
	}
	var (
		box  *outbox.Outbox
		file *outbox.File
	)
	if throughOutbox {
		if file, err = outbox.OpenFile(base+".jsonl", outbox.FormatValue, false); err != nil {
			b.Fatal(err)
		}
		if box, err = outbox.Open(outbox.Config{Marks: base + ".jsonl.outbox", Sink: file, Logger: quiet}); err != nil {
			b.Fatal(err)
		}
		cfg.Outbox = box
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := recorder.Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var failed <-chan struct{}
	if box != nil {
		failed = box.Failed()
	}
	if err := run.Wait(ctx, recorder.WaitConfig{Stop: failed}); err != nil || ctx.Err() != nil {
		b.Fatalf("%s: the run did not settle: %v %v", base, err, ctx.Err())
	}
	if stopErr, recErr := run.Stop(ctx); stopErr != nil || recErr != nil {
		b.Fatalf("%s: stop: %v; recording: %v", base, stopErr, recErr)
	}
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
	if box != nil {
		if err := box.Close(); err != nil {
			b.Fatal(err)
		}
		if err := file.Close(); err != nil {
			b.Fatal(err)
		}
	}
	took := time.Since(start)
	if box != nil {
		if st := box.Status(); st.Delivered != costLines {
			b.Fatalf("%s: %d outputs delivered, want %d", base, st.Delivered, costLines)
		}
	}
	return took
}
