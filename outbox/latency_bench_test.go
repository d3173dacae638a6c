package outbox_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// latencyLines and latencyGap pace BenchmarkLatency's input: 2,000 ledger
// lines arriving one every 250µs (4,000 lines/s, half a second a run), so that the
// ledger's save interval (100ms, as `blackbox run --state` saves), not its
// batch of 1,000 lines, closes every batch of its state.
const (
	latencyLines = 2000
	latencyGap   = 250 * time.Microsecond
)

// BenchmarkLatency is the output latency the outbox adds (issue 31): the
// ledger with its state saved in batches at its defaults (every 1,000
// lines or 100ms) over lines arriving at a steady rate, each output timed
// from the arrival of its input line to the moment it reaches a sink. Each
// iteration runs the same lines twice: with a live core.Sink (an output
// leaves as it is emitted: the floor) and through the outbox (an output
// leaves once its input is recorded and committed: after its state batch
// is saved). The metrics are what the outbox adds over the live sink at
// the median, the 99th percentile and the worst output
// (added-p50-ms, added-p99-ms, added-max-ms), beside the save interval
// (interval-ms): the promise (docs/GUARANTEES.md, "Effects") is at most
// one interval plus a commit poll.
func BenchmarkLatency(b *testing.B) {
	lines := make([]string, latencyLines)
	for i := range lines {
		lines[i] = "acct-" + strconv.Itoa(i%50) + "," + strconv.Itoa(i%97+1)
	}
	var live, boxed []time.Duration
	for i := range b.N {
		live = append(live, latencyRun(b, lines, fmt.Sprintf("live-%d", i), false)...)
		boxed = append(boxed, latencyRun(b, lines, fmt.Sprintf("outbox-%d", i), true)...)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(boxed, 50)-percentile(live, 50)), "added-p50-ms")
	b.ReportMetric(ms(percentile(boxed, 99)-percentile(live, 99)), "added-p99-ms")
	b.ReportMetric(ms(percentile(boxed, 100)-percentile(live, 100)), "added-max-ms")
	b.ReportMetric(ms(apps.DefaultSaveInterval), "interval-ms")
	b.ReportMetric(0, "ns/op")
}

// percentile is the p-th percentile of ds (p in 1..100, nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

// latencyRun records one run of the ledger over lines (its state in a file
// of its own, saved at its defaults) to a CSV recording, its outputs to a
// live sink or through an outbox to a sink, and returns each output's
// latency: from its line's arrival on the tape to its delivery.
func latencyRun(b *testing.B, lines []string, name string, throughOutbox bool) []time.Duration {
	b.Helper()
	dir := b.TempDir()
	path := filepath.Join(dir, name+".csv")
	rec, err := store.Create(path, "")
	if err != nil {
		b.Fatal(err)
	}
	opts := map[string]string{apps.OptionState: filepath.Join(dir, name+".json")}
	proc, err := apps.LedgerApp().New(opts)
	if err != nil {
		b.Fatal(err)
	}
	tp := newTape()
	var (
		mu        sync.Mutex
		delivered []time.Time // by line, from 0
		box       *outbox.Outbox
	)
	cfg := recorder.RunConfig{
		Store:      rec,
		Feed:       engine.FeedConfig{Name: "in", Source: tp.source(), QueueSize: 1024},
		Processors: []recorder.Processor{{Name: "ledger", App: apps.LedgerApp(), Processor: proc, Options: opts}},
		Path:       path,
		Logger:     quiet,
	}
	if throughOutbox {
		delivered = make([]time.Time, len(lines))
		sink := effectSinkFunc(func(_ int64, effs []core.Effect) error {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, e := range effs {
				if i := e.Key.Position.Offset - 1; i >= 0 && i < int64(len(delivered)) && delivered[i].IsZero() {
					delivered[i] = now
				}
			}
			return nil
		})
		if box, err = outbox.Open(outbox.Config{Marks: filepath.Join(dir, name+".outbox"), Sink: sink, Logger: quiet}); err != nil {
			b.Fatal(err)
		}
		cfg.Outbox = box
	} else {
		// One posting per line, in order (one worker, every line valid).
		cfg.Sink = core.SinkFunc(func(_, _ string, _ any) error {
			mu.Lock()
			delivered = append(delivered, time.Now())
			mu.Unlock()
			return nil
		})
	}
	run, err := recorder.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	// The lines arrive one every latencyGap, as a tailed file receives
	// them; the tape's source publishes each at its next poll.
	arrived := make([]time.Time, len(lines))
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		start := time.Now()
		for i, l := range lines {
			time.Sleep(time.Until(start.Add(time.Duration(i) * latencyGap)))
			arrived[i] = time.Now()
			tp.add(l)
		}
		tp.setClosed(true)
	}()
	<-fed
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var failed <-chan struct{}
	if box != nil {
		failed = box.Failed()
	}
	if err := run.Wait(ctx, recorder.WaitConfig{Stop: failed}); err != nil || ctx.Err() != nil {
		b.Fatalf("%s: the run did not settle: %v %v", name, err, ctx.Err())
	}
	if stopErr, recErr := run.Stop(ctx); stopErr != nil || recErr != nil {
		b.Fatalf("%s: stop: %v; recording: %v", name, stopErr, recErr)
	}
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
	if box != nil {
		if err := box.Close(); err != nil {
			b.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delivered) != len(lines) {
		b.Fatalf("%s: %d outputs delivered, want %d", name, len(delivered), len(lines))
	}
	out := make([]time.Duration, len(lines))
	for i, at := range delivered {
		if at.IsZero() {
			b.Fatalf("%s: the output of line %d was never delivered", name, i+1)
		}
		out[i] = at.Sub(arrived[i])
	}
	return out
}

// effectSinkFunc adapts a function to core.EffectSink (at least once).
type effectSinkFunc func(batch int64, effs []core.Effect) error

func (f effectSinkFunc) Deliver(batch int64, effs []core.Effect) error { return f(batch, effs) }
