package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/recorder"
)

// How often, and how far apart, an output write is tried before the output
// counts as not written.
const (
	outAttempts = 3
	outBackoff  = 10 * time.Millisecond
)

// outSink is the live sink of a run: it counts the outputs and, with
// --out, appends each to the file as one JSON line with one write call (the
// file is opened O_APPEND, so a line is never interleaved or half-lost to a
// crash of the process). A write that fails is tried again (outAttempts in
// all); when every try failed, the output is not written, and from then on
// the sink is failed: it writes nothing more (a later line would hide the
// gap), every later output fails too, failure returns the first error and
// failed is closed, so that the run stops and is not lossless. It is safe
// for concurrent use: the workers of a run emit at once, and their lines
// are appended one at a time (wmu), each whole, never one between the
// parts of another.
type outSink struct {
	f       *os.File  // nil: no --out, outputs are only counted
	w       io.Writer // f, or what a test wraps it in
	written atomic.Int64
	lost    atomic.Int64
	failed  chan struct{}

	wmu  sync.Mutex // held by append: one line at a time
	size int64      // f's size: where the next line starts (wmu)

	mu  sync.Mutex
	err error
}

// newCountSink returns a sink that only counts outputs.
func newCountSink() *outSink { return &outSink{failed: make(chan struct{})} }

// newOutSink returns a sink appending to f (opened O_APPEND); wrap, when
// not nil, wraps the writer (tests inject failing writes).
func newOutSink(f *os.File, wrap func(io.Writer) io.Writer) (*outSink, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, &fileError{f.Name(), unwrapPathError(err)}
	}
	s := &outSink{f: f, w: f, size: fi.Size(), failed: make(chan struct{})}
	if wrap != nil {
		s.w = wrap(f)
	}
	return s, nil
}

// failure returns the error that failed the sink, nil while it has not.
func (s *outSink) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Write implements core.Sink. It is called on the group's goroutine or,
// with several workers, on theirs at once. A line holds the output's
// value alone, as docs/CLI.md documents --out; the sink name is in the
// recording's OUTPUT row.
func (s *outSink) Write(_, _ string, out any) error {
	if s.f == nil {
		s.written.Add(1)
		return nil
	}
	b, err := recorder.JSON.Encode(out)
	if err == nil {
		err = s.append(append(b, '\n'))
	} else {
		s.fail(err)
	}
	if err != nil {
		s.lost.Add(1)
		return err
	}
	s.written.Add(1)
	return nil
}

// fail fails the sink with err, unless it failed already.
func (s *outSink) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.failed)
	}
}

// append writes line at the end of the file, trying outAttempts times,
// with no other line written meanwhile; a failed sink writes nothing and
// returns its error. A line written in part by the tries is cut off again
// when they all fail, and the sink fails before another line is written.
func (s *outSink) append(line []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.failure(); err != nil {
		return err
	}
	rest := line
	var err error
	for attempt := range outAttempts {
		if attempt > 0 {
			time.Sleep(outBackoff)
		}
		var n int
		n, err = s.w.Write(rest)
		rest = rest[n:]
		if err == nil && len(rest) == 0 {
			s.size += int64(len(line))
			return nil
		}
		if err == nil {
			err = io.ErrShortWrite
		}
	}
	if len(rest) < len(line) {
		s.f.Truncate(s.size)
	}
	err = fmt.Errorf("writing an output (%d tries): %w", outAttempts, unwrapPathError(err))
	s.fail(err)
	return err
}

// guarded wraps a processor for a run: each event and timer cycle first
// sleeps delay (--delay: to watch a run, to test), and fails with the
// sink's error once fail returns one, so that nothing after a lost output
// completes (an app's completion saves its state). It keeps the
// processor's Snapshotter and TimerHandler, and hands the engine's
// checkpoints on to a processor that is an core.CheckpointUser (one
// that is not releases them).
func guarded(p core.Processor, delay time.Duration, fail func() error) core.Processor {
	base := guard{p: p, d: delay, fail: fail}
	s, isSnap := p.(core.Snapshotter)
	t, isTimer := p.(core.TimerHandler)
	switch {
	case isSnap && isTimer:
		return struct {
			guard
			core.Snapshotter
			guardTimer
		}{base, s, guardTimer{base, t}}
	case isSnap:
		return struct {
			guard
			core.Snapshotter
		}{base, s}
	case isTimer:
		return struct {
			guard
			guardTimer
		}{base, guardTimer{base, t}}
	}
	return base
}

type guard struct {
	p    core.Processor
	d    time.Duration
	fail func() error
}

// around runs one cycle: the delay, the cycle, then the sink's verdict.
func (g guard) around(cycle func() error) error {
	if g.d > 0 {
		time.Sleep(g.d)
	}
	if err := cycle(); err != nil {
		return err
	}
	return g.fail()
}

func (g guard) OnEvent(c *core.Cycle, ev any) error {
	return g.around(func() error { return g.p.OnEvent(c, ev) })
}

// UseCheckpoint hands cp on to the processor, if it saves in batches
// (core.CheckpointUser); else the hold ends at once.
func (g guard) UseCheckpoint(feed string, cp core.Checkpoint) {
	if u, ok := g.p.(core.CheckpointUser); ok {
		u.UseCheckpoint(feed, cp)
		return
	}
	cp.Release()
}

// CloseCheckpoint is the processor's, if it saves in batches.
func (g guard) CloseCheckpoint() error {
	if u, ok := g.p.(core.CheckpointUser); ok {
		return u.CloseCheckpoint()
	}
	return nil
}

type guardTimer struct {
	g guard
	t core.TimerHandler
}

func (t guardTimer) OnTimer(c *core.Cycle, n int) error {
	return t.g.around(func() error { return t.t.OnTimer(c, n) })
}
