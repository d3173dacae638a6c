package orders_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/examples/orders"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
	"github.com/blackbox-audit/blackbox/testkit"
)

// The input every test reads (testdata/orders.txt) and the sequence
// numbers of its lines: line 1 is a comment.
const (
	inputFile = "testdata/orders.txt"
	seqO3     = 4 // o3,alice,30.00: takes alice over 50.00
	seqO5     = 6 // o5,bob,50.00: takes bob over 50.00
	seqO6     = 7 // o6,alice,45.00: takes alice over 100.00
)

// The clocks of a test run start here.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// router is the live core.Sink of a run: it keeps each output under the
// sink name the processor emitted it to, and refuses a sink it does not
// know. It is safe for concurrent use.
type router struct {
	mu     sync.Mutex
	got    map[string][]any
	cycles map[int64]int // the input's seq -> cycles run for it, when more than one
}

func (r *router) Write(processor, sink string, out any) error {
	if processor != orders.AppName {
		return fmt.Errorf("output of an unknown processor %q", processor)
	}
	if sink != orders.SinkTotals && sink != orders.SinkAlerts {
		return fmt.Errorf("output to an unknown sink %q", sink)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string][]any{}
	}
	r.got[sink] = append(r.got[sink], out)
	return nil
}

// handled keeps the cycle count of an input that ran more than one cycle
// (reentrant events): an engine.Observer's Handled hook.
func (r *router) handled(_ string, in *engine.Input, tr *core.Trace) {
	if tr.Cycles < 2 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cycles == nil {
		r.cycles = map[int64]int{}
	}
	r.cycles[in.Seq] = tr.Cycles
}

func (r *router) reentrant() map[int64]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.cycles)
}

func (r *router) outputs(sink string) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got[sink])
}

// A format is a store backend a run is recorded to.
type format struct {
	name   string
	ext    string
	create func(path string) (store.Writer, error)
	open   func(path string) (store.Reader, error)
}

var formats = []format{
	{"csv", ".csv",
		func(p string) (store.Writer, error) { return csvstore.Create(p) },
		func(p string) (store.Reader, error) { return csvstore.Open(p) }},
	{"sqlite", ".db",
		func(p string) (store.Writer, error) { return sqlitestore.Create(p) },
		func(p string) (store.Reader, error) { return sqlitestore.Open(p) }},
}

// build builds an orders processor with options.
func build(t *testing.T, options map[string]string) core.Processor {
	t.Helper()
	p, err := orders.App().Build(options)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeLines writes lines, one a line, to a new file in a temporary folder.
func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "input.txt")
	var b []byte
	for _, l := range lines {
		b = append(b, l+"\n"...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// recordLive runs processor p live over the lines of the file input (read
// once from the start with engine/filesource), records the run to w with
// recorder.Start and returns the outputs the live sink received, by sink,
// and the inputs that ran reentrant cycles. The cycles' clock steps a millisecond per reading from t0; the timer
// clock stands still during the run, so no window closes while lines are
// read. With closeWindows, once every line was handled the timer clock is
// moved a window on (window) and the run waits, on the engine's TimerFired
// hook, for every timer set to fire. Nothing waits on the wall clock. The
// caller closes w.
func recordLive(t *testing.T, w store.Writer, input string, p core.Processor, closeWindows bool, window time.Duration) *router {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	src, err := filesource.New(input, filesource.Options{Read: filesource.OnceEarliest, Epoch: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	timers := testkit.NewClock(t0) // stands still until the test moves it
	var set atomic.Int64
	fired := make(chan struct{}, 1024)
	sink := &router{}
	run, err := recorder.Start(ctx, recorder.RunConfig{
		Store:         w,
		Feed:          engine.FeedConfig{Name: "input", Source: src, QueueSize: 16},
		Processors:    []recorder.Processor{{Name: orders.AppName, App: orders.App(), Processor: p}},
		Clock:         core.NewStepClock(t0, time.Millisecond),
		TimerClock:    timers,
		RecorderClock: core.NewStepClock(t0, time.Second),
		Sink:          sink,
		Observer: engine.Observer{
			Handled:    sink.handled,
			TimerSet:   func(string, int, time.Time) { set.Add(1) },
			TimerFired: func(string, *core.Trace) { fired <- struct{}{} },
		},
		Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine().WaitSettled(ctx); err != nil {
		t.Fatalf("the run did not settle: %v", err)
	}
	if closeWindows {
		timers.Advance(window)
		for n := set.Load(); n > 0; n-- {
			select {
			case <-fired:
			case <-ctx.Done():
				t.Fatalf("%d timers did not fire: %v", n, ctx.Err())
			}
		}
	}
	stopErr, recErr := run.Stop(ctx)
	if stopErr != nil || recErr != nil {
		t.Fatalf("stop: %v; recording: %v", stopErr, recErr)
	}
	return sink
}

// recordMemory records p over input into a new in-memory recording with
// every window closed, and returns it.
func recordMemory(t *testing.T, input string, options map[string]string) *store.Memory {
	t.Helper()
	mem := store.NewMemory()
	recordLive(t, mem, input, build(t, options), true, orders.DefaultWindow)
	if err := mem.Close(); err != nil {
		t.Fatal(err)
	}
	return mem
}

// replay replays r with the orders app built with options.
func replay(t *testing.T, r store.Reader, options map[string]string) *replayer.Report {
	t.Helper()
	rep, err := replayer.Replay(context.Background(), r, []core.App{orders.App()},
		replayer.Options{AppOptions: map[string]map[string]string{orders.AppName: options}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// proven fails t unless rep is identical, complete and lossless.
func proven(t *testing.T, rep *replayer.Report) {
	t.Helper()
	if !rep.Identical || !rep.Complete || !rep.Lossless {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Errorf("replay: identical %v, complete %v, lossless %v:\n%s", rep.Identical, rep.Complete, rep.Lossless, b.String())
	}
}
