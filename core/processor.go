package core

// Processor is user code: it handles the items of the feeds its group
// subscribes to, one cycle at a time, on its group's goroutine. A processor
// is never called concurrently with itself.
type Processor interface {
	OnEvent(c *Cycle, ev any) error
}

// ProcessorFunc adapts a function to Processor.
type ProcessorFunc func(c *Cycle, ev any) error

// OnEvent calls f(c, ev).
func (f ProcessorFunc) OnEvent(c *Cycle, ev any) error { return f(c, ev) }

// Snapshotter is implemented by processors whose state can be captured and
// restored, so that a recording can start from a restored state (START row)
// and a replay can restore it.
type Snapshotter interface {
	Snapshot() ([]byte, error)
	Restore(snapshot []byte) error
}

// TimerHandler is implemented by processors that set timers with Cycle.After.
// OnTimer is called with the timer's number, in a cycle of its own.
type TimerHandler interface {
	OnTimer(c *Cycle, timer int) error
}

// Sink receives a processor's outputs live: Cycle.Emit(sink, out) calls
// Write(processor, sink, out) with the emitting processor's name and the
// sink name Emit was given, so outputs can be routed by sink. It is called
// on the emitting processor's group goroutine, in emit order; an error fails
// the cycle. Processors of different groups emit concurrently: a Sink shared
// by several groups must be safe for concurrent use.
type Sink interface {
	Write(processor, sink string, out any) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(processor, sink string, out any) error

// Write calls f(processor, sink, out).
func (f SinkFunc) Write(processor, sink string, out any) error { return f(processor, sink, out) }
