package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// fakeWriter keeps every Append call's rows. It validates rows as every
// store does (all or nothing), can be told to fail, and notices concurrent
// use (store.Writer is not safe for concurrent use).
type fakeWriter struct {
	mu         sync.Mutex
	calls      [][]store.Entry
	fail       func(rows []store.Entry) error
	busy       atomic.Bool
	concurrent atomic.Bool
}

func (w *fakeWriter) Append(rows ...store.Entry) error {
	if w.busy.Swap(true) {
		w.concurrent.Store(true)
	}
	defer w.busy.Store(false)
	for _, e := range rows {
		if err := store.Validate(e); err != nil {
			return fmt.Errorf("fake: %w", err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil {
		if err := w.fail(rows); err != nil {
			return err
		}
	}
	cp := make([]store.Entry, len(rows))
	for i, e := range rows {
		cp[i] = store.Normalize(e)
	}
	w.calls = append(w.calls, cp)
	return nil
}

func (w *fakeWriter) Close() error { return nil }

// Sync has nothing to sync.
func (w *fakeWriter) Sync() error { return nil }

func (w *fakeWriter) rows() []store.Entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []store.Entry
	for _, c := range w.calls {
		out = append(out, c...)
	}
	return out
}

func (w *fakeWriter) stream(processor string) []store.Entry {
	var out []store.Entry
	for _, e := range w.rows() {
		if e.Processor == processor && e.Kind != store.KindMeta && e.Kind != store.KindJournal {
			out = append(out, e)
		}
	}
	return out
}

// syncWriter is a fakeWriter that can sync; it notes how many rows were
// written at each Sync.
type syncWriter struct {
	fakeWriter
	syncErr error
	smu     sync.Mutex
	syncs   []int
}

func (w *syncWriter) Sync() error {
	n := len(w.rows())
	w.smu.Lock()
	defer w.smu.Unlock()
	w.syncs = append(w.syncs, n)
	return w.syncErr
}

func (w *syncWriter) syncedAt() []int {
	w.smu.Lock()
	defer w.smu.Unlock()
	return append([]int(nil), w.syncs...)
}

// problems runs the store's integrity checker over rows: its problems but
// recorded failures.
func problems(rows []store.Entry) []store.Problem {
	var c store.Checker
	for i, e := range rows {
		c.Add(e, int64(i+1))
	}
	var out []store.Problem
	for _, p := range c.Finish() {
		// A FAILED row's own problem (a recorded failure, past which its
		// stream is not reproducible) is what the tests that fail an input
		// record on purpose (the first FAILED row of a stream gives one):
		// it says nothing of how the recorder wrote the rows.
		if p.Kind != store.ProblemFailed {
			out = append(out, p)
		}
	}
	return out
}

var (
	t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) // recorder clock
	e0 = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC) // engine clock
)

// describe renders a row compactly: instants as offsets from t0, clock
// readings as offsets from e0.
func describe(e store.Entry) string {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "@-"
		}
		return "@" + t.Sub(t0).String()
	}
	reads := make([]string, len(e.Reads))
	for i, r := range e.Reads {
		reads[i] = r.Sub(e0).String()
	}
	s := fmt.Sprintf("%d %s", e.Index, e.Kind)
	switch e.Kind {
	case store.KindStart:
		s += fmt.Sprintf(" %s %s", at(e.Instant), e.Payload)
	case store.KindDelivery:
		s += fmt.Sprintf(" %s#%d epoch=%d key=%q off=%d attempt=%d", e.Source, e.Seq, e.Epoch, e.Key, e.Offset, e.N)
	case store.KindIndexed, store.KindInline:
		s += fmt.Sprintf(" %s#%d n=%d %s reads=[%s] %s", e.Source, e.Seq, e.N, at(e.Instant), strings.Join(reads, " "), e.Payload)
	case store.KindTimer:
		s += fmt.Sprintf(" timer=%d n=%d %s reads=[%s]", e.Seq, e.N, at(e.Instant), strings.Join(reads, " "))
	case store.KindOutput:
		s += fmt.Sprintf(" %s k=%d %s", e.Source, e.Seq, e.Payload)
	case store.KindDropped:
		s += fmt.Sprintf(" %s#%d off=%d n=%d %s", e.Source, e.Seq, e.Offset, e.N, e.Detail)
	case store.KindFailed:
		s += fmt.Sprintf(" %s#%d %s %s", e.Source, e.Seq, at(e.Instant), e.Detail)
	case store.KindEnd:
		s += fmt.Sprintf(" n=%d %s", e.N, at(e.Instant))
	case store.KindJournal:
		s += fmt.Sprintf(" %s#%d %s", e.Source, e.Seq, e.Payload)
	}
	return strings.TrimRight(s, " ")
}

func describeAll(rows []store.Entry) []string {
	out := make([]string, len(rows))
	for i, e := range rows {
		out[i] = describe(e)
	}
	return out
}

// run records one engine run: it builds the engine from cfg (given the
// recorder, for its Journal), starts it, waits until it is settled or a
// group failed (engine.ErrObserver: the recorder could not write), stops it
// and closes the recorder. The run is inside a testing/synctest bubble:
// every timer of the run is on the bubble's clock, and the run leaves no
// goroutine behind.
func run(t *testing.T, w store.Writer, opts recorder.Options, cfg func(*recorder.Recorder) engine.Config) (rec *recorder.Recorder, st engine.Status) {
	t.Helper()
	done := false
	synctest.Test(t, func(t *testing.T) {
		rec, st = runIn(t, w, opts, cfg)
		done = true
	})
	if !done { // the bubble's test failed and stopped: so does this one
		t.FailNow()
	}
	return rec, st
}

// runIn is run inside the caller's bubble.
func runIn(t *testing.T, w store.Writer, opts recorder.Options, cfg func(*recorder.Recorder) engine.Config) (*recorder.Recorder, engine.Status) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testutil.Logger(t)
	}
	rec, err := recorder.New(w, opts)
	if err != nil {
		t.Fatalf("recorder.New: %v", err)
	}
	c := cfg(rec)
	c.Observer = rec.Observer().Then(c.Observer)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	e, err := engine.New(c)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := e.WaitSettled(wctx); err != nil && !errors.Is(err, engine.ErrObserver) {
		t.Fatalf("not settled: %+v", e.Status())
	}
	if err := e.Stop(ctx); err != nil && !errors.Is(err, engine.ErrObserver) {
		t.Fatalf("engine.Stop: %v", err)
	}
	_ = rec.Close()
	return rec, e.Status()
}

// errFail is what the test processors fail with.
var errFail = errors.New("failed on purpose")

// reentrant is an event a testProc queues to itself.
type reentrant string

// testProc is a processor driven by its string items:
//
//	"r:x"   queues the reentrant event "x" (which emits "re:x")
//	"tick"  sets a timer (which emits its number to sink "timer")
//	"fail"  fails every attempt
//	"flaky" fails its first attempt only
//
// and emits each item to sink "out", reading the clock once per cycle.
type testProc struct {
	attempts map[string]int
	failTime bool // OnTimer fails
}

func (p *testProc) OnEvent(c *core.Cycle, ev any) error {
	switch v := ev.(type) {
	case reentrant:
		c.Now()
		c.Emit("out", "re:"+string(v))
		return nil
	case string:
		if p.attempts == nil {
			p.attempts = map[string]int{}
		}
		p.attempts[v]++
		switch {
		case v == "fail":
			return fmt.Errorf("%w: %s", errFail, v)
		case v == "flaky" && p.attempts[v] == 1:
			return fmt.Errorf("%w: %s attempt 1", errFail, v)
		case v == "tick":
			c.After(0)
		case strings.HasPrefix(v, "r:"):
			c.Queue(reentrant(v[2:]))
		}
		c.Now()
		c.Emit("out", v)
		return nil
	}
	return fmt.Errorf("unexpected %T", ev)
}

func (p *testProc) OnTimer(c *core.Cycle, n int) error {
	if p.failTime {
		return fmt.Errorf("%w: timer", errFail)
	}
	c.Now()
	c.Emit("timer", n)
	return nil
}

// snapProc emits nothing and has a snapshot.
type snapProc struct{}

func (snapProc) OnEvent(*core.Cycle, any) error { return nil }
func (snapProc) Snapshot() ([]byte, error)      { return []byte(`{"state":1}`), nil }
func (snapProc) Restore([]byte) error           { return nil }

// completer registers, for each positioned item, a completion that fails
// the first time for item "x".
type completer struct {
	tries map[any]int
}

type completion struct {
	c  *completer
	ev any
}

func (c *completion) Complete(*core.Delivery) error {
	c.c.tries[c.ev]++
	if c.ev == "x" && c.c.tries[c.ev] == 1 {
		return fmt.Errorf("%w: completion of x", errFail)
	}
	return nil
}

func (c *completer) OnEvent(cy *core.Cycle, ev any) error {
	if c.tries == nil {
		c.tries = map[any]int{}
	}
	cy.OnComplete(&completion{c: c, ev: ev})
	cy.Emit("out", ev)
	return nil
}

func logFeed(name string, journal engine.Journal, items ...any) engine.FeedConfig {
	l := memsource.NewLog(items...)
	l.Close()
	return engine.FeedConfig{Name: name, Source: l.Source(), QueueSize: 64, Journal: journal}
}

func listFeed(name string, journal engine.Journal, items ...any) engine.FeedConfig {
	return engine.FeedConfig{Name: name, Source: memsource.NewList(items...), Policy: engine.BlockWithDeadline(time.Minute),
		QueueSize: 64, Journal: journal}
}

func group(name string, feeds []string, retry int, procs ...engine.ProcessorConfig) engine.GroupConfig {
	return engine.GroupConfig{Name: name, Feeds: feeds, Processors: procs, Retry: engine.RetryPolicy{Attempts: retry}}
}

func pc(name string, p core.Processor) engine.ProcessorConfig {
	return engine.ProcessorConfig{Name: name, Processor: p}
}
