package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"
)

// MaxCyclesPerInput bounds the reentrant cycles of one input (Cycle.Queue),
// and MaxCompletionsPerDelivery the completion callbacks of one delivery, so
// that a processor that queues or registers itself forever fails instead of
// spinning.
const (
	MaxCyclesPerInput         = 65536
	MaxCompletionsPerDelivery = 65536
)

// maxCycles and maxCompletions are the limits a Host applies:
// MaxCyclesPerInput and MaxCompletionsPerDelivery. The package's tests lower
// them to reach the limits cheaply.
var (
	maxCycles      = MaxCyclesPerInput
	maxCompletions = MaxCompletionsPerDelivery
)

// ErrUnknownTimer: a timer fired that the processor never set (or that
// already fired). Trace.Err wraps it (errors.Is).
var ErrUnknownTimer = errors.New("core: unknown timer")

// ErrTooManyCycles: an input queued more than MaxCyclesPerInput reentrant
// cycles, or registered more than MaxCompletionsPerDelivery completions.
// Trace.Err wraps it (errors.Is).
var ErrTooManyCycles = errors.New("core: too many reentrant cycles")

// ErrNoTimerHandler is returned when a timer fires for a processor that set
// it with Cycle.After but does not implement TimerHandler.
var ErrNoTimerHandler = errors.New("core: processor does not implement TimerHandler")

// PanicError is a panic of a processor, a completion callback or a sink,
// turned into the failure of that item. Unwrap gives the panic value when it
// is an error.
type PanicError struct {
	Processor string
	Value     any
	Stack     []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("core: processor %q panicked: %v", e.Processor, e.Value)
}

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Output is one output a processor emitted with Cycle.Emit.
type Output struct {
	Sink  string
	Value any
}

// Trace is what one input (or one timer) did in one processor: the outputs it
// emitted, the clock readings of its cycles, the completions it registered and
// its error. A Trace returned by Host is reused by the next call: read it
// (or copy what you keep) before calling the Host again. It is not safe for
// concurrent use.
type Trace struct {
	Processor   string
	Delivery    *Delivery
	Timer       int // the timer's number for a timer cycle, 0 for an input
	Cycles      int // cycles run: 1 + reentrant cycles
	Outputs     []Output
	Reads       []time.Time
	Completions []Completion
	Err         error
}

// Cycle is one event cycle of one processor. It is valid only inside the
// OnEvent or OnTimer call it was passed to, and is not safe for concurrent
// use.
type Cycle struct {
	h *Host
}

// Processor is the name of the processor this cycle runs.
func (c *Cycle) Processor() string { return c.h.name }

// Delivery is the delivery of the item being handled, for every cycle of it
// (reentrant cycles included); nil when the item has no source position and
// in timer cycles.
func (c *Cycle) Delivery() *Delivery { return c.h.trace.Delivery }

// Context is the context of the processor's group. Engine.Stop cancels it
// once the drain is over (the queues drained, DrainTimeout passed or
// Stop's ctx done), so a processor waiting on it lets Stop return; an item
// whose processor then fails is not dispatched, and the next run delivers
// it again. A Host built with NewHost returns the context given with
// WithContext, by default context.Background() (never cancelled). The
// engine's carries a mark: an engine.Feed.Publish given it (or a context
// derived from it, which a completion captures) never waits for room, as
// Offer, which is the publish for code that holds no such context.
func (c *Cycle) Context() context.Context { return c.h.ctx }

// Now reads the engine clock. Every reading is part of the input's record and
// is played back in replay, so a processor must read time only through Now.
func (c *Cycle) Now() time.Time {
	t := c.h.clock.Now()
	c.h.trace.Reads = append(c.h.trace.Reads, t)
	return t
}

// Emit emits an output to the named sink: delivered live to the Host's Sink
// as Write(processor, sink, out), recorded as an OUTPUT row, captured and
// compared in replay. Outputs are numbered from 1 per input across all its
// cycles. A Sink error fails the cycle: the output stays in the Trace, and
// the outputs emitted after it are not written to the Sink.
func (c *Cycle) Emit(sink string, out any) {
	h := c.h
	h.trace.Outputs = append(h.trace.Outputs, Output{Sink: sink, Value: out})
	if h.sink != nil && h.cycleErr == nil {
		if err := h.sink.Write(h.name, sink, out); err != nil {
			h.cycleErr = fmt.Errorf("core: sink %q: %w", sink, err)
		}
	}
}

// Queue queues a reentrant event: one more cycle of this processor after the
// current one, under the same delivery.
func (c *Cycle) Queue(ev any) {
	c.h.queue = append(c.h.queue, ev)
}

// After sets a timer that fires d after now, in a cycle of its own (the
// processor must implement TimerHandler). It returns the timer's number:
// 1, 2, 3 ... per processor. Setting a timer reads the clock without
// recording it.
func (c *Cycle) After(d time.Duration) int {
	h := c.h
	h.nextTimer++
	n := h.nextTimer
	h.timers[n] = struct{}{}
	if h.schedule != nil {
		h.schedule(n, h.timerClock.Now().Add(d))
	}
	return n
}

// OnComplete registers f to run once the current positioned delivery is
// complete (see Completion). Callbacks run in registration order; the same
// completion (SameCompletion) registered again during one delivery, by this
// processor or another of its group, runs once. Outside a positioned
// delivery (no Delivery, a timer cycle) it keeps nothing and returns false:
// the caller does its work itself.
func (c *Cycle) OnComplete(f Completion) bool {
	h := c.h
	if h.trace.Delivery == nil || h.trace.Timer != 0 || f == nil {
		return false
	}
	for _, g := range h.trace.Completions {
		if SameCompletion(g, f) {
			return true
		}
	}
	if len(h.trace.Completions) >= maxCompletions {
		h.cycleErr = fmt.Errorf("%w: more than %d completions", ErrTooManyCycles, maxCompletions)
		return false
	}
	h.trace.Completions = append(h.trace.Completions, f)
	return true
}

// SameCompletion is the one de-duplication rule of completions (the Host's
// for one processor, the group's across its processors): a and b are the
// same when they have the same dynamic type and are equal by ==. A value
// that == cannot compare (a func, a map, a slice, or a struct or array
// holding one, directly or in an interface field) is never the same as
// another, and comparing it never panics.
func SameCompletion(a, b Completion) bool {
	return reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.ValueOf(a).Comparable() && a == b
}

// Host runs one processor deterministically: it hands it cycles for inputs
// and timers, drains its reentrant events, numbers its timers and collects a
// Trace. The engine's groups run one Host per processor; the replayer drives
// one directly with a playback clock. A Host is not safe for concurrent use.
type Host struct {
	name       string
	proc       Processor
	ctx        context.Context
	clock      Clock // cycle readings (recorded)
	timerClock Clock // timer due times (not recorded); clock unless WithTimers gives one
	sink       Sink
	schedule   func(timer int, due time.Time)

	nextTimer int
	timers    map[int]struct{}
	queue     []any
	trace     Trace
	cycle     Cycle
	cycleErr  error // fails the current input: a sink's error, too many completions
}

// HostOption configures a Host.
type HostOption func(*Host)

// WithSink delivers emitted outputs to s live.
func WithSink(s Sink) HostOption { return func(h *Host) { h.sink = s } }

// WithTimers schedules timers: schedule is called with each timer's number
// and due time, read from clock.
func WithTimers(clock Clock, schedule func(timer int, due time.Time)) HostOption {
	return func(h *Host) { h.timerClock, h.schedule = clock, schedule }
}

// WithContext sets the context cycles return from Cycle.Context. A nil ctx
// is ignored: the Host keeps context.Background().
func WithContext(ctx context.Context) HostOption {
	return func(h *Host) {
		if ctx != nil {
			h.ctx = ctx
		}
	}
}

// NewHost returns a Host running p under the given name, reading cycle time
// from clock.
func NewHost(name string, p Processor, clock Clock, opts ...HostOption) *Host {
	h := &Host{name: name, proc: p, clock: clock, timers: map[int]struct{}{}, ctx: context.Background()}
	h.cycle.h = h
	for _, o := range opts {
		o(h)
	}
	if h.timerClock == nil {
		h.timerClock = clock
	}
	return h
}

// Name is the processor's name.
func (h *Host) Name() string { return h.name }

// Processor is the hosted processor.
func (h *Host) Processor() Processor { return h.proc }

// SetClock replaces the clock cycles read (the replayer installs each input's
// recorded readings).
func (h *Host) SetClock(c Clock) { h.clock = c }

// PendingTimer reports whether timer n was set and has not fired.
func (h *Host) PendingTimer(n int) bool { _, ok := h.timers[n]; return ok }

// reset makes the trace a fresh one for the next cycle. It stores a
// pointer only where one changes (a field not already set, a slice not
// already empty): it runs for every item, and each store of a pointer
// costs a write barrier while the garbage collector marks (at millions of
// items a second, most of Handle's own time).
func (h *Host) reset(d *Delivery, timer int) *Trace {
	t := &h.trace
	if t.Processor != h.name {
		t.Processor = h.name
	}
	if t.Delivery != d {
		t.Delivery = d
	}
	t.Timer = timer
	t.Cycles = 0
	if len(t.Outputs) > 0 {
		t.Outputs = t.Outputs[:0]
	}
	if len(t.Reads) > 0 {
		t.Reads = t.Reads[:0]
	}
	if len(t.Completions) > 0 {
		clear(t.Completions)
		t.Completions = t.Completions[:0]
	}
	if t.Err != nil {
		t.Err = nil
	}
	if len(h.queue) > 0 {
		h.queue = h.queue[:0]
	}
	if h.cycleErr != nil {
		h.cycleErr = nil
	}
	return t
}

// Handle runs ev through the processor under delivery d (nil for an item
// without a position): its cycle, then every reentrant cycle it queued, in
// order. A panic is recovered into a *PanicError. The returned Trace is
// valid until the next call.
func (h *Host) Handle(d *Delivery, ev any) *Trace {
	t := h.reset(d, 0)
	t.Err = h.call(ev, 0)
	h.drain(t)
	return t
}

// Fire runs the processor's timer n in a cycle of its own (and the reentrant
// cycles it queues). A timer that was never set, or already fired, gives an
// error wrapping ErrUnknownTimer; a processor that is not a TimerHandler, one
// wrapping ErrNoTimerHandler (the timer is no longer pending).
func (h *Host) Fire(n int) *Trace {
	t := h.reset(nil, n)
	if _, ok := h.timers[n]; !ok {
		t.Err = fmt.Errorf("%w: processor %q has no timer %d", ErrUnknownTimer, h.name, n)
		return t
	}
	delete(h.timers, n)
	th, ok := h.proc.(TimerHandler)
	if !ok {
		t.Err = fmt.Errorf("%w: processor %q set timer %d", ErrNoTimerHandler, h.name, n)
		return t
	}
	t.Err = h.call(th, n)
	h.drain(t)
	return t
}

func (h *Host) drain(t *Trace) {
	for i := 0; t.Err == nil && i < len(h.queue); i++ {
		if t.Cycles > maxCycles { // t.Cycles counts the first cycle
			t.Err = fmt.Errorf("%w: processor %q queued more than %d", ErrTooManyCycles, h.name, maxCycles)
			break
		}
		ev := h.queue[i]
		h.queue[i] = nil
		t.Err = h.call(ev, 0)
	}
	clear(h.queue) // the events a failure left unrun
	h.queue = h.queue[:0]
}

// call runs one cycle: OnEvent(ev), or, for timer > 0, ev's OnTimer(timer).
// A panic is recovered into a *PanicError; a sink error fails the cycle.
func (h *Host) call(ev any, timer int) (err error) {
	h.trace.Cycles++
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Processor: h.name, Value: v, Stack: debug.Stack()}
		}
		if err == nil {
			err = h.cycleErr
		}
	}()
	if timer > 0 {
		return ev.(TimerHandler).OnTimer(&h.cycle, timer)
	}
	return h.proc.OnEvent(&h.cycle, ev)
}

// Complete runs completion f of delivery d, registered by this Host's
// processor (a Trace's Completions), recovering a panic into a
// *PanicError. The engine runs a delivery's completions this way once the
// item is handled; the replayer runs them at the same point.
func (h *Host) Complete(f Completion, d *Delivery) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Processor: h.name, Value: v, Stack: debug.Stack()}
		}
	}()
	return f.Complete(d)
}
