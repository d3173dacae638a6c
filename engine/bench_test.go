package engine_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// The floor: a plain buffered Go channel hand-off of the same items to a
// consumer goroutine.
func BenchmarkChannelHandoff(b *testing.B) {
	ch := make(chan any, 1024)
	done := make(chan struct{})
	var n atomic.Int64
	go func() {
		for v := range ch {
			if v != nil {
				n.Add(1)
			}
		}
		close(done)
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch <- i
	}
	close(ch)
	<-done
	b.StopTimer()
	if n.Load() != int64(b.N) {
		b.Fatalf("consumed %d of %d", n.Load(), b.N)
	}
}

func noop() core.Processor {
	return core.ProcessorFunc(func(*core.Cycle, any) error { return nil })
}

func benchEngine(b *testing.B, pol engine.Policy) (*engine.Engine, *engine.Feed) {
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Policy: pol, QueueSize: 1024}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: noop()}}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Stop(context.Background()) })
	return e, e.Feed("in")
}

func waitDispatched(b *testing.B, f *engine.Feed, n int64) {
	for f.Status().Subscribers[0].Dispatched < n {
		runtime.Gosched()
	}
}

// The default publish path: one DROP queue, no observer, publish to
// dispatched.
func BenchmarkPublish(b *testing.B) {
	_, f := benchEngine(b, engine.DropAfterSpin(engine.DefaultSpin))
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.Publish(ctx, i)
	}
	waitDispatched(b, f, int64(b.N)-f.Status().Dropped)
	b.StopTimer()
	b.ReportMetric(float64(f.Status().Dropped), "dropped")
}

// TryPublish under PAUSE, as a re-readable source publishes: retry on a
// pause.
func BenchmarkTryPublishPause(b *testing.B) {
	_, f := benchEngine(b, engine.Pause())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for !f.Intake().TryPublish(i, core.Position{Offset: int64(i + 1)}) {
			runtime.Gosched()
		}
	}
	waitDispatched(b, f, int64(b.N))
}

// TryPublish under PAUSE on a positioned feed: the acknowledgement window
// and a commit per 1,024 items, as the file source does.
func BenchmarkTryPublishPauseCommitted(b *testing.B) {
	_, f := benchEngine(b, engine.Pause())
	f.Intake().SetCommitter(&committer{})
	publishPositioned(b, f)
}

// publishPositioned publishes b.N items at positions 1..b.N under PAUSE,
// polling acknowledgements (to f's committer) every 1,024 items and when
// the queue is full, and waits until they are dispatched; the timer starts
// at its call.
func publishPositioned(b *testing.B, f *engine.Feed) {
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for !f.Intake().TryPublish(i, core.Position{Offset: int64(i + 1)}) {
			f.Intake().PollAcks()
			runtime.Gosched()
		}
		if i%1024 == 0 {
			f.Intake().PollAcks()
		}
	}
	waitDispatched(b, f, int64(b.N))
}

// The deterministic core alone: one input through one processor.
func BenchmarkHostHandle(b *testing.B) {
	h := core.NewHost("p", noop(), core.SystemClock())
	for i := 0; i < b.N; i++ {
		if t := h.Handle(nil, i); t.Err != nil {
			b.Fatal(t.Err)
		}
	}
}

// pipeline is an engine with one positioned PAUSE feed subscribed by some
// no-op groups, fed and acknowledged as a source would.
type pipeline struct {
	e    *engine.Engine
	f    *engine.Feed
	c    *lastCommitter
	next int
	// patient: while the feed refuses items or the commit is behind, the
	// publisher waits as the file source does (a few yields, then sleeps
	// cut short by Ready) instead of yielding in a loop, leaving the cores
	// to the workers.
	patient bool
}

// lastCommitter keeps only the last offset acknowledged and committed, as
// a file source's committer does (the tests' committer keeps every offset:
// a cost a benchmark should not measure).
type lastCommitter struct {
	acked     int64 // the publisher's goroutine only (PollAcks)
	committed atomic.Int64
}

func (c *lastCommitter) Acknowledged(_, _ int64, pos core.Position) { c.acked = pos.Offset }
func (c *lastCommitter) Commit() error                              { c.committed.Store(c.acked); return nil }
func (c *lastCommitter) Committed() int64                           { return c.committed.Load() }

// wait is what the publisher does while the feed refuses its item or the
// commit is behind; idle counts the waits since it last made progress.
func (p *pipeline) wait(idle *int) {
	const yields = 64 // as filesource.Source.idle
	if *idle++; !p.patient || *idle <= yields {
		runtime.Gosched()
		return
	}
	t := time.NewTimer(min(time.Millisecond, 20*time.Microsecond<<min(*idle-yields-1, 16)))
	defer t.Stop()
	select {
	case <-p.f.Intake().Ready():
		*idle = 0
	case <-t.C:
	}
}

func newPipeline(b *testing.B, groups int) *pipeline {
	var gs []engine.GroupConfig
	for g := 0; g < groups; g++ {
		name := "g" + strconv.Itoa(g)
		gs = append(gs, engine.GroupConfig{Name: name, Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p" + name, Processor: noop()}}})
	}
	p := startPipeline(b, gs...)
	p.run(10_000) // warm up
	return p
}

// startPipeline starts the pipeline of the groups gs, each subscribing
// feed "in".
func startPipeline(b *testing.B, gs ...engine.GroupConfig) *pipeline {
	e, err := engine.New(engine.Config{Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 1024}}, Groups: gs})
	if err != nil {
		b.Fatal(err)
	}
	p := &pipeline{e: e, f: e.Feed("in"), c: &lastCommitter{}}
	p.f.Intake().SetCommitter(p.c)
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Stop(context.Background()) })
	return p
}

// run publishes n more items and waits until all are acknowledged.
func (p *pipeline) run(n int) time.Duration {
	began := time.Now()
	idle := 0
	for end := p.next + n; p.next < end; {
		if !p.f.Intake().TryPublish(p.next, core.Position{Offset: int64(p.next + 1)}) {
			p.f.Intake().PollAcks()
			p.wait(&idle)
			continue
		}
		idle = 0
		if p.next&1023 == 0 {
			p.f.Intake().PollAcks()
		}
		p.next++
	}
	for idle = 0; p.c.Committed() < int64(p.next); {
		p.f.Intake().PollAcks()
		p.wait(&idle)
	}
	return time.Since(began)
}

// BenchmarkScaleItems: the per-item cost end to end (publish, processor,
// acknowledged) must stay flat from 10K to 1M items.
func BenchmarkScaleItems(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run("items="+strconv.Itoa(n), func(b *testing.B) {
			p := newPipeline(b, 1)
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += p.run(n)
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*n), "ns/item")
		})
	}
}

// BenchmarkGroups: throughput of one feed with 1, 2, 4 and 16 subscribing
// groups (each item dispatched once per group).
func BenchmarkGroups(b *testing.B) {
	const n = 200_000
	for _, g := range []int{1, 2, 4, 16} {
		b.Run("groups="+strconv.Itoa(g), func(b *testing.B) {
			p := newPipeline(b, g)
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += p.run(n)
			}
			b.ReportMetric(float64(b.N*n)/total.Seconds(), "items/s")
		})
	}
}

// lastGroupCommitter is a lastCommitter that is also told each group's
// progress (engine.GroupCommitter), keeping the last offset per group.
type lastGroupCommitter struct {
	lastCommitter
	groups map[string]int64
}

func (c *lastGroupCommitter) GroupAcknowledged(group string, cm engine.Commit) {
	c.groups[group] = cm.Position.Offset
}

// BenchmarkGroupProgress: what keeping each group's progress costs (the
// feed reads each group's completed prefix at every poll): 1 group (where
// a group's progress is the feed's commit) and 4, a plain committer
// against a GroupCommitter.
func BenchmarkGroupProgress(b *testing.B) {
	const n = 200_000
	for _, groups := range []int{1, 4} {
		for _, progress := range []bool{false, true} {
			b.Run("groups="+strconv.Itoa(groups)+"/progress="+strconv.FormatBool(progress), func(b *testing.B) {
				benchGroupProgress(b, n, groups, progress)
			})
		}
	}
}

func benchGroupProgress(b *testing.B, n, groups int, progress bool) {
	var gs []engine.GroupConfig
	for g := range groups {
		name := "g" + strconv.Itoa(g)
		gs = append(gs, engine.GroupConfig{Name: name, Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p" + name, Processor: noop()}}})
	}
	p := startPipeline(b, gs...)
	if progress {
		gc := &lastGroupCommitter{groups: map[string]int64{}}
		p.f.Intake().SetCommitter(gc)
		p.c = &gc.lastCommitter
	}
	p.run(10_000) // warm up
	var total time.Duration
	for i := 0; i < b.N; i++ {
		total += p.run(n)
	}
	b.ReportMetric(float64(b.N*n)/total.Seconds(), "items/s")
}
