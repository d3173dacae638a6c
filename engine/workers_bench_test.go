package engine_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// The workers' benchmarks: throughput (items/s, publish to acknowledged,
// as BenchmarkGroups measures it) of one group with 1 to 64 workers, for a
// processor that waits (BenchmarkWorkersIO) and one that computes
// (BenchmarkWorkersCPU). make bench compares each figure with the one
// worker's of the same run of the benchmark binary.

// workersPipeline is a pipeline of one group "g" of processor "p" on
// workers built by mk, items shared out by order (by the item modulo
// 65,536 as key for OrderKey). Its publisher is patient: a publisher
// yielding in a loop would take a core's share from the workers.
func workersPipeline(b *testing.B, workers int, order engine.Order, mk func() core.Processor) *pipeline {
	gc := engine.GroupConfig{Name: "g", Feeds: []string{"in"}, Workers: workers, Order: order,
		Processors: []engine.ProcessorConfig{{Name: "p", Processor: mk(), New: func() (core.Processor, error) { return mk(), nil }}}}
	if order == engine.OrderKey {
		gc.Key = func(item any) string { return strconv.Itoa(item.(int) % 65536) }
	}
	p := startPipeline(b, gc)
	p.patient = true
	return p
}

// benchWorkers runs items items through the pipeline per iteration, after
// a warm-up of warm items, and reports the throughput.
func benchWorkers(b *testing.B, p *pipeline, warm, items int) {
	p.run(warm)
	var total time.Duration
	for b.Loop() {
		total += p.run(items)
	}
	b.ReportMetric(float64(b.N*items)/total.Seconds(), "items/s")
}

var workerCounts = []int{1, 2, 4, 8, 16, 32, 64}

// BenchmarkWorkersIO: a processor that waits 1 ms per item (time.Sleep,
// as a call to a database or a service waits), with 1 to 64 workers,
// unordered and by key (65,536 keys). Each worker count handles 500 items
// per worker, about half a second at full speed.
func BenchmarkWorkersIO(b *testing.B) {
	wait := func() core.Processor {
		return core.ProcessorFunc(func(*core.Cycle, any) error {
			time.Sleep(time.Millisecond)
			return nil
		})
	}
	for _, order := range []engine.Order{engine.OrderNone, engine.OrderKey} {
		for _, n := range workerCounts {
			b.Run("order="+string(order)+"/workers="+strconv.Itoa(n), func(b *testing.B) {
				if n == 1 && order == engine.OrderKey {
					b.Skip("one worker has no order to keep: the same as order=none/workers=1")
				}
				benchWorkers(b, workersPipeline(b, n, order, wait), 4*n, 500*n)
			})
		}
	}
}

// BenchmarkWorkersIOFloor: the same 1 ms waits without the engine, 500
// per goroutine, taken from a channel by 1 and 64 plain goroutines: what
// this machine's timers give 64 waiting goroutines against one.
func BenchmarkWorkersIOFloor(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run("goroutines="+strconv.Itoa(n), func(b *testing.B) {
			items := 500 * n
			var total time.Duration
			for b.Loop() {
				began := time.Now()
				ch := make(chan int, 16)
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						for range ch {
							time.Sleep(time.Millisecond)
						}
					})
				}
				for i := range items {
					ch <- i
				}
				close(ch)
				wg.Wait()
				total += time.Since(began)
			}
			b.ReportMetric(float64(b.N*items)/total.Seconds(), "items/s")
		})
	}
}

// cpuIters is the busy loop's length: a fixed count of xorshift rounds
// (three dependent shift-xors each), so that every run does the same work.
// 1,000 rounds take about 2 us on an idle core of the machine of
// docs/PERFORMANCE.md;
// BenchmarkWorkersCPULoop measures what they take where it runs.
const cpuIters = 1000

// busy is the CPU-bound work of one item: cpuIters xorshift rounds from
// seed x.
func busy(x uint64) uint64 {
	x |= 1
	for range cpuIters {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// cruncher is a processor that computes busy for each item, keeping the
// result in its own state (so the work is not optimized away), padded to a
// cache line of its own: two workers' instances must not share one.
type cruncher struct {
	sum uint64
	_   [56]byte
}

func (c *cruncher) OnEvent(_ *core.Cycle, ev any) error {
	c.sum += busy(uint64(ev.(int)))
	return nil
}

// BenchmarkWorkersCPU: a CPU-bound processor (busy, about 2 us per item)
// with 1 and 2 workers, unordered: 100,000 items per iteration.
func BenchmarkWorkersCPU(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run("workers="+strconv.Itoa(n), func(b *testing.B) {
			p := workersPipeline(b, n, engine.OrderNone, func() core.Processor { return &cruncher{} })
			benchWorkers(b, p, 10_000, 100_000)
		})
	}
}

// BenchmarkWorkersCPUFloor: the same 100,000 items' busy loops shared by
// 1 and 2 plain goroutines, without the engine: what this machine gives two
// goroutines against one, the ceiling of BenchmarkWorkersCPU's ratio.
func BenchmarkWorkersCPUFloor(b *testing.B) {
	const items = 100_000
	for _, n := range []int{1, 2} {
		b.Run("goroutines="+strconv.Itoa(n), func(b *testing.B) {
			sums := make([]cruncher, n)
			var total time.Duration
			for b.Loop() {
				began := time.Now()
				var wg sync.WaitGroup
				for g := range n {
					wg.Go(func() {
						var sum uint64
						for i := g; i < items; i += n {
							sum += busy(uint64(i))
						}
						sums[g].sum = sum
					})
				}
				wg.Wait()
				total += time.Since(began)
			}
			b.ReportMetric(float64(b.N*items)/total.Seconds(), "items/s")
		})
	}
}

// BenchmarkWorkersCPULoop: the cost of one item's busy loop alone, on one
// goroutine.
func BenchmarkWorkersCPULoop(b *testing.B) {
	var c cruncher
	i := 0
	for b.Loop() {
		c.OnEvent(nil, i)
		i++
	}
	cpuSink = c.sum
}

var cpuSink uint64
