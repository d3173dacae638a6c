package testkit

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Output is one output a Sink received.
type Output struct {
	Processor string
	Sink      string
	Value     any
}

// Sink is a core.Sink that keeps every output it is given, in the order
// given, under its processor and sink names. It accepts every sink unless
// Only names the sinks it takes (a write to another fails, as a live sink
// that does not know it would). Safe for concurrent use.
type Sink struct {
	// Only, if not empty, lists the sink names the processor may emit to.
	// Set it before the run.
	Only []string

	mu  sync.Mutex
	got []Output
}

// ErrUnknownSink is wrapped by a Sink's Write of an output to a sink Only
// does not name.
var ErrUnknownSink = errors.New("testkit: output to an unknown sink")

// Write keeps out under processor and sink.
func (s *Sink) Write(processor, sink string, out any) error {
	if len(s.Only) > 0 && !slices.Contains(s.Only, sink) {
		return fmt.Errorf("%w %q (want one of %q)", ErrUnknownSink, sink, s.Only)
	}
	s.mu.Lock()
	s.got = append(s.got, Output{Processor: processor, Sink: sink, Value: out})
	s.mu.Unlock()
	return nil
}

// Outputs are the values emitted to sink, by any processor, in order.
func (s *Sink) Outputs(sink string) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []any
	for _, o := range s.got {
		if o.Sink == sink {
			out = append(out, o.Value)
		}
	}
	return out
}

// All are every output received, in order.
func (s *Sink) All() []Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}
