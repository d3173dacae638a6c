package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestHost runs the transcripts in testdata/: each drives one Host with a
// scripted processor and prints what every call did. Run
// `go test ./core/ -run TestHost -rewrite` to regenerate the expected output
// after a deliberate change, and read the diff.
//
// Commands (the input block of handle and fire is the script of that cycle):
//
//	new name=p [notimers] [timers=none] [ctx=v] [nilctx] [nosink]
//	    a Host with a StepClock (2026-01-01T00:00:00Z, +1s per reading), a
//	    timer clock (12:00:00, +1m per reading) and a logging Sink.
//	    notimers: the processor is no TimerHandler; timers=none: no
//	    WithTimers; ctx=v: WithContext of a context carrying v; nilctx:
//	    WithContext(nil); nosink: no WithSink.
//	script ev=b          the script of event b, run when a cycle queues b
//	handle item=a [seq=1 epoch=1 offset=10 key=k feed=f attempt=0]
//	    Host.Handle of event a (a Delivery when seq is given)
//	fire timer=1         Host.Fire(1)
//	complete             Host.Complete of each completion of the last trace
//	pending timer=(1,2)  Host.PendingTimer
//	setclock start=RFC3339 step=1s   Host.SetClock(a new StepClock)
//	limits cycles=3 completions=2    lower maxCycles and maxCompletions
//
// Script lines:
//
//	emit sink=x value=v      Cycle.Emit
//	queue b [c ...]          Cycle.Queue
//	after 2s                 Cycle.After
//	now                      Cycle.Now
//	complete name=c1 [kind=pointer|func|value|uncomparable] [fail=msg] [panic=v]
//	    Cycle.OnComplete: the same name is the same pointer (or equal value);
//	    fail and panic set what the completion does when it runs
//	complete-nil             Cycle.OnComplete(nil)
//	fail msg                 return a *scriptError
//	panic v                  panic(v); panic-err panics with an error wrapping errScripted
//	sinkfail, sinkpanic      the Sink's next Write fails (errSink) or panics
//	context, delivery, name  log Cycle.Context, Cycle.Delivery, Cycle.Processor
func TestHost(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		defer func(c, n int) { maxCycles, maxCompletions = c, n }(maxCycles, maxCompletions)
		var h *harness
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "new" {
				h = newHarness(t, d)
				return h.flush()
			}
			if h == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			h.t = t
			return h.run(d)
		})
	})
}

// errScripted is what panic-err panics with (wrapped); errSink is what the
// Sink returns after sinkfail.
var (
	errScripted = errors.New("scripted failure")
	errSink     = errors.New("sink refused the output")
)

// scriptError is the error a fail line returns.
type scriptError struct{ msg string }

func (e *scriptError) Error() string { return "script: " + e.msg }

type ctxKey struct{}

var (
	cycleStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timerStart = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
)

// harness is one Host under test, its scripted processor and what they
// logged during the current command.
type harness struct {
	t           *testing.T
	host        *Host
	scripts     map[string]string     // event name -> script
	timerScript string                // the script of the timer being fired
	completions map[string]Completion // name -> the value registered under it
	trace       *Trace                // the last Trace returned
	cycles      int                   // cycles run in the current command
	log         []string
	sinkFail    bool
	sinkPanic   bool
}

// scriptProc runs the script of each event; timedProc adds OnTimer.
type scriptProc struct{ h *harness }

func (p *scriptProc) OnEvent(c *Cycle, ev any) error {
	name := ev.(string)
	script, ok := p.h.scripts[name]
	if !ok {
		p.h.t.Fatalf("event %q has no script", name)
	}
	return p.h.runScript(c, "event "+name, script)
}

type timedProc struct{ scriptProc }

func (p *timedProc) OnTimer(c *Cycle, timer int) error {
	return p.h.runScript(c, "timer "+strconv.Itoa(timer), p.h.timerScript)
}

func newHarness(t *testing.T, d *datadriven.TestData) *harness {
	h := &harness{t: t, scripts: map[string]string{}, completions: map[string]Completion{}}
	var name string
	d.ScanArgs(t, "name", &name)
	var p Processor = &timedProc{scriptProc{h}}
	kind := "a TimerHandler"
	if d.HasArg("notimers") {
		p, kind = &scriptProc{h}, "no TimerHandler"
	}
	var opts []HostOption
	if !d.HasArg("nosink") {
		opts = append(opts, WithSink(SinkFunc(h.write)))
	}
	timers := "timer clock"
	if d.MaybeScanArgs(t, "timers", &timers) && timers != "none" {
		d.Fatalf(t, "timers=%s: only timers=none", timers)
	}
	if timers != "none" {
		opts = append(opts, WithTimers(NewStepClock(timerStart, time.Minute), func(n int, due time.Time) {
			h.logf("  scheduled timer %d due %s", n, due.Format(time.RFC3339))
		}))
	}
	var v string
	if d.MaybeScanArgs(t, "ctx", &v) {
		opts = append(opts, WithContext(context.WithValue(context.Background(), ctxKey{}, v)))
	}
	if d.HasArg("nilctx") {
		opts = append(opts, WithContext(nil))
	}
	h.host = NewHost(name, p, NewStepClock(cycleStart, time.Second), opts...)
	if h.host.Processor() != p {
		t.Fatalf("Host.Processor() = %v, want the processor given to NewHost", h.host.Processor())
	}
	h.logf("host %s: %s, timers: %s", h.host.Name(), kind, timers)
	return h
}

func (h *harness) run(d *datadriven.TestData) string {
	t := h.t
	switch d.Cmd {
	case "script":
		var ev string
		d.ScanArgs(t, "ev", &ev)
		h.scripts[ev] = d.Input
		return ""
	case "handle":
		var item string
		d.ScanArgs(t, "item", &item)
		h.scripts[item] = d.Input
		h.renderTrace(h.host.Handle(delivery(t, d), item))
	case "fire":
		var n int
		d.ScanArgs(t, "timer", &n)
		h.timerScript = d.Input
		h.renderTrace(h.host.Fire(n))
	case "complete":
		if h.trace == nil {
			d.Fatalf(t, "complete before handle")
		}
		dl := h.trace.Delivery
		for i, f := range append([]Completion(nil), h.trace.Completions...) {
			err := h.host.Complete(f, dl)
			h.logf("completion %d %s: err %s", i+1, describe(f), h.errKind(err))
		}
	case "pending":
		arg, _ := d.Arg("timer")
		for _, s := range arg.Vals {
			n, err := strconv.Atoi(s)
			if err != nil {
				d.Fatalf(t, "timer %q: %v", s, err)
			}
			h.logf("timer %d pending: %t", n, h.host.PendingTimer(n))
		}
	case "setclock":
		var start, step string
		d.ScanArgs(t, "start", &start)
		d.ScanArgs(t, "step", &step)
		at, err := time.Parse(time.RFC3339, start)
		if err != nil {
			d.Fatalf(t, "start: %v", err)
		}
		h.host.SetClock(NewStepClock(at, duration(t, step)))
		return ""
	case "limits":
		d.MaybeScanArgs(t, "cycles", &maxCycles)
		d.MaybeScanArgs(t, "completions", &maxCompletions)
		return ""
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return h.flush()
}

// delivery is the Delivery a handle command describes, nil without seq.
func delivery(t *testing.T, d *datadriven.TestData) *Delivery {
	if !d.HasArg("seq") {
		return nil
	}
	dl := &Delivery{Feed: "f"}
	d.ScanArgs(t, "seq", &dl.Sequence)
	d.MaybeScanArgs(t, "epoch", &dl.Epoch)
	d.MaybeScanArgs(t, "offset", &dl.Position.Offset)
	d.MaybeScanArgs(t, "key", &dl.Position.Key)
	d.MaybeScanArgs(t, "feed", &dl.Feed)
	d.MaybeScanArgs(t, "attempt", &dl.Attempt)
	return dl
}

func duration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

func (h *harness) logf(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf(format, args...))
}

// flush returns the lines logged since the last command.
func (h *harness) flush() string {
	out := strings.Join(h.log, "\n")
	h.log = h.log[:0]
	h.cycles = 0
	return out
}

// write is the Host's Sink.
func (h *harness) write(processor, sink string, out any) error {
	switch {
	case h.sinkPanic:
		h.sinkPanic = false
		panic(fmt.Sprintf("sink %s panicked", sink))
	case h.sinkFail:
		h.sinkFail = false
		h.logf("  sink %s/%s refused %v", processor, sink, out)
		return errSink
	}
	h.logf("  sink %s/%s wrote %v", processor, sink, out)
	return nil
}

// runScript runs one cycle's script line by line.
func (h *harness) runScript(c *Cycle, what, script string) error {
	h.cycles++
	h.logf("cycle %d: %s", h.cycles, what)
	for line := range strings.Lines(script) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		arg := strings.Join(f[1:], " ")
		switch f[0] {
		case "emit":
			kv := keyValues(h.t, f[1:])
			c.Emit(kv["sink"], kv["value"])
		case "queue":
			for _, ev := range f[1:] {
				c.Queue(ev)
			}
		case "after":
			h.logf("  after %s: timer %d", arg, c.After(duration(h.t, arg)))
		case "now":
			c.Now()
		case "complete":
			kv := keyValues(h.t, f[1:])
			name := kv["name"]
			h.logf("  on-complete %s: %t", name, c.OnComplete(h.completion(kv)))
		case "complete-nil":
			h.logf("  on-complete nil: %t", c.OnComplete(nil))
		case "fail":
			return &scriptError{msg: arg}
		case "panic":
			panic(arg)
		case "panic-err":
			panic(fmt.Errorf("%s: %w", arg, errScripted))
		case "sinkfail":
			h.sinkFail = true
		case "sinkpanic":
			h.sinkPanic = true
		case "context":
			ctx := c.Context()
			if ctx == context.Background() {
				h.logf("  context: background")
			} else {
				h.logf("  context: carries %v", ctx.Value(ctxKey{}))
			}
		case "delivery":
			h.logf("  delivery: %s", renderDelivery(c.Delivery()))
		case "name":
			h.logf("  processor: %s", c.Processor())
		default:
			h.t.Fatalf("unknown script line %q", line)
		}
	}
	return nil
}

func keyValues(t *testing.T, fields []string) map[string]string {
	kv := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("%q is not key=value", f)
		}
		kv[k] = v
	}
	return kv
}

// Completions of every kind OnComplete tells apart. A namedCompletion is
// registered by pointer (one per name); a valueCompletion is a comparable
// value (equal by name); an uncomparable one holds a func, so == cannot
// compare it; a CompletionFunc is a func.
type (
	behaviour struct {
		h           *harness
		fail, panic string
	}
	namedCompletion struct {
		name string
		*behaviour
	}
	valueCompletion struct {
		name string
		*behaviour
	}
	uncomparableCompletion struct {
		name string
		*behaviour
		_ func()
	}
)

func (b *behaviour) complete(name string, d *Delivery) error {
	b.h.logf("  ran %s for %s", name, renderDelivery(d))
	switch {
	case b.panic != "":
		panic(b.panic)
	case b.fail != "":
		return &scriptError{msg: b.fail}
	}
	return nil
}

func (c *namedCompletion) Complete(d *Delivery) error       { return c.complete(c.name, d) }
func (c valueCompletion) Complete(d *Delivery) error        { return c.complete(c.name, d) }
func (c uncomparableCompletion) Complete(d *Delivery) error { return c.complete(c.name, d) }

// completion is the completion a script's complete line registers.
func (h *harness) completion(kv map[string]string) Completion {
	name, kind := kv["name"], kv["kind"]
	b := &behaviour{h: h, fail: kv["fail"], panic: kv["panic"]}
	switch kind {
	case "", "pointer":
		c, ok := h.completions[name].(*namedCompletion)
		if !ok {
			c = &namedCompletion{name: name, behaviour: b}
			h.completions[name] = c
		}
		*c.behaviour = *b
		return c
	case "value":
		// Values of one name share their behaviour so that they stay equal.
		c, ok := h.completions[name].(valueCompletion)
		if !ok {
			c = valueCompletion{name: name, behaviour: b}
			h.completions[name] = c
		}
		*c.behaviour = *b
		return c
	case "uncomparable":
		return uncomparableCompletion{name: name, behaviour: b}
	case "func":
		return CompletionFunc(func(d *Delivery) error { return b.complete(name, d) })
	}
	h.t.Fatalf("unknown completion kind %q", kind)
	return nil
}

func describe(c Completion) string {
	switch c := c.(type) {
	case *namedCompletion:
		return c.name + " (pointer)"
	case valueCompletion:
		return c.name + " (value)"
	case uncomparableCompletion:
		return c.name + " (uncomparable)"
	case CompletionFunc:
		return "(func)"
	}
	return fmt.Sprintf("%T", c)
}

func renderDelivery(d *Delivery) string {
	if d == nil {
		return "none"
	}
	return fmt.Sprintf("feed=%s seq=%d epoch=%d pos=%s attempt=%d", d.Feed, d.Sequence, d.Epoch, d.Position, d.Attempt)
}

// renderTrace logs a Trace, byte-stable.
func (h *harness) renderTrace(tr *Trace) {
	if h.trace != nil && tr != h.trace {
		h.t.Errorf("Host returned a new Trace; a Trace is reused by the next call")
	}
	h.trace = tr
	h.logf("trace: processor=%s delivery=%s timer=%d cycles=%d", tr.Processor, renderDelivery(tr.Delivery), tr.Timer, tr.Cycles)
	for i, o := range tr.Outputs {
		h.logf("  output %d: %s=%v", i+1, o.Sink, o.Value)
	}
	for _, r := range tr.Reads {
		h.logf("  read: %s", r.Format(time.RFC3339))
	}
	for _, c := range tr.Completions {
		h.logf("  completion: %s", describe(c))
	}
	h.logf("  err: %s", h.errKind(tr.Err))
}

// errKind names an error by errors.Is and errors.As.
func (h *harness) errKind(err error) string {
	var (
		pe *PanicError
		se *scriptError
	)
	switch {
	case err == nil:
		return "none"
	case errors.As(err, &pe):
		if len(pe.Stack) == 0 {
			h.t.Errorf("PanicError without a stack: %v", err)
		}
		s := fmt.Sprintf("panic of processor %s: %v", pe.Processor, pe.Value)
		if errors.Is(err, errScripted) {
			s += " (unwraps to errScripted)"
		}
		return s
	case errors.Is(err, ErrUnknownTimer):
		return "ErrUnknownTimer"
	case errors.Is(err, ErrNoTimerHandler):
		return "ErrNoTimerHandler"
	case errors.Is(err, ErrTooManyCycles):
		return "ErrTooManyCycles"
	case errors.Is(err, errSink):
		return "sink error"
	case errors.As(err, &se):
		return "scripted error " + se.msg
	}
	h.t.Errorf("unexpected error %T: %v", err, err)
	return "unexpected"
}

// TestAnInputRunsMaxCyclesPerInputReentrantCyclesAndNoMore runs into the
// cycle limit at its real value (the transcripts lower it).
func TestAnInputRunsMaxCyclesPerInputReentrantCyclesAndNoMore(t *testing.T) {
	forever := ProcessorFunc(func(c *Cycle, ev any) error {
		c.Queue(ev)
		return nil
	})
	tr := NewHost("p", forever, SystemClock()).Handle(nil, "again")
	if !errors.Is(tr.Err, ErrTooManyCycles) || tr.Cycles != 1+MaxCyclesPerInput {
		t.Errorf("a processor queuing forever: %d cycles, err %v; want %d, ErrTooManyCycles", tr.Cycles, tr.Err, 1+MaxCyclesPerInput)
	}
}
