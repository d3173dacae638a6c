package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// watch is how the engine tells waiters that a condition on its state
// holds (Engine.Settled, Engine.When, Stop's drain), without polling. The
// engine notes a change (note) at every point that can make such a
// condition true: a group going idle (park), a feed's state, a poll of its
// acknowledgements, a checkpoint made durable or released, a pause lifted,
// a group fenced, unfenced, subscribed or unsubscribed. One goroutine owned
// by the engine (run, from Start to Stop) re-checks the conditions on each
// note, and only while someone waits: with no waiter, a note is one atomic
// load. Its invariant: a waiter's condition is checked after every change
// noted since it was registered, so a condition that holds is seen.
//
// Safe for concurrent use.
type watch struct {
	changed chan struct{} // a change was noted (buffered: notes coalesce)
	waiting atomic.Int64  // len(waits): notes are sent only while someone waits

	mu      sync.Mutex
	waits   map[*waiter]struct{}
	settled *waiter // the pending Settled waiter, shared by its callers
	running bool    // run is running: it checks; otherwise the caller does
	stop    chan struct{}
	done    chan struct{}

	failOnce sync.Once
	failed   chan struct{} // closed when a group fails (Engine.Err)
}

// waiter is one condition someone waits for: ch is closed once cond held.
type waiter struct {
	cond func() bool
	ch   chan struct{}
}

func newWatch() *watch {
	return &watch{changed: make(chan struct{}, 1), waits: map[*waiter]struct{}{}, failed: make(chan struct{})}
}

// note says the engine's state changed in a way that may make a waited
// condition true. Cheap when nobody waits; never blocks.
func (w *watch) note() {
	if w.waiting.Load() == 0 {
		return
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// fail closes the failed channel (once).
func (w *watch) fail() { w.failOnce.Do(func() { close(w.failed) }) }

// add registers a waiter for cond, then has it checked: by run if it runs
// (a note), else at once (before Start, after Stop).
func (w *watch) add(cond func() bool) *waiter {
	wt := &waiter{cond: cond, ch: make(chan struct{})}
	w.mu.Lock()
	w.waits[wt] = struct{}{}
	w.waiting.Store(int64(len(w.waits)))
	w.mu.Unlock()
	w.kick()
	return wt
}

// kick has every waiter checked: by run, or here when it does not run.
func (w *watch) kick() {
	w.mu.Lock()
	running := w.running
	w.mu.Unlock()
	if running {
		w.note()
		return
	}
	w.check()
}

// remove forgets a waiter that nobody waits for any more.
func (w *watch) remove(wt *waiter) {
	w.mu.Lock()
	delete(w.waits, wt)
	if w.settled == wt {
		w.settled = nil
	}
	w.waiting.Store(int64(len(w.waits)))
	w.mu.Unlock()
}

// check closes the channel of every waiter whose condition holds, and
// forgets it.
func (w *watch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.waits {
		if wt.cond() {
			close(wt.ch)
			delete(w.waits, wt)
			if w.settled == wt {
				w.settled = nil
			}
		}
	}
	w.waiting.Store(int64(len(w.waits)))
}

// start runs the checking goroutine (Start).
func (w *watch) start() {
	w.mu.Lock()
	w.running, w.stop, w.done = true, make(chan struct{}), make(chan struct{})
	w.mu.Unlock()
	go w.run(w.stop, w.done)
	w.note()
}

// run re-checks the waiters on each note until Stop.
func (w *watch) run(stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-w.changed:
			w.check()
		case <-stop:
			return
		}
	}
}

// halt stops the checking goroutine and checks once more (Stop): the
// state will not change again, so a waiter whose condition does not hold
// now waits for its own context.
func (w *watch) halt() {
	w.mu.Lock()
	stop, done, running := w.stop, w.done, w.running
	w.running = false
	w.mu.Unlock()
	if running {
		close(stop)
		<-done
	}
	w.check()
}

// Settled returns a channel closed once the engine is settled
// (Status().Settled), seen by a check made after the call: every feed's
// source caught up or at its end, every live queue drained, nothing paused,
// awaiting acknowledgement or stalled. The check is made whenever the
// engine's state changes that way, never by polling. A settled engine can
// become unsettled again (more items are published): a later call returns
// a channel for the next time it is settled, closed at once if it still
// is. A failed run never settles (see Err), nor a killed one (Kill). Safe
// for concurrent use.
func (e *Engine) Settled() <-chan struct{} {
	w := e.watch
	w.mu.Lock()
	wt := w.settled
	w.mu.Unlock()
	if wt != nil {
		return wt.ch
	}
	wt = &waiter{cond: func() bool { return e.Status().Settled }, ch: make(chan struct{})}
	w.mu.Lock()
	if w.settled != nil { // another caller registered one meanwhile
		wt = w.settled
		w.mu.Unlock()
		return wt.ch
	}
	w.settled = wt
	w.waits[wt] = struct{}{}
	w.waiting.Store(int64(len(w.waits)))
	w.mu.Unlock()
	w.kick()
	return wt.ch
}

// When returns a channel closed once cond(Status()) holds, checked as
// Settled's condition is: after each change of the engine's state that can
// make the status settled (a feed's state, a group going idle, a poll of
// acknowledgements ...), never by polling, and once more when Stop ends.
// A condition that never holds keeps its channel open: select on it with
// a context. Safe for concurrent use.
func (e *Engine) When(cond func(Status) bool) <-chan struct{} {
	return e.watch.add(func() bool { return cond(e.Status()) }).ch
}

// RunSettled runs a bounded job: it starts the engine, waits until it is
// settled (WaitSettled), then stops it in order and returns the final
// status. If ctx is done first, the engine is stopped all the same and
// ctx's error returned with the status at that point; a ctx already done
// (or nil) starts nothing and gives Start's error.
func (e *Engine) RunSettled(ctx context.Context) (Status, error) {
	if err := e.Start(ctx); err != nil {
		return Status{}, err
	}
	_, werr := e.WaitSettled(ctx)
	serr := e.Stop(context.WithoutCancel(ctx))
	return e.Status(), errors.Join(werr, serr)
}

// WaitSettled waits until the engine is settled (Settled), ctx is done, a
// group failed (it returns Err: a failed run never settles) or the engine
// was killed (an error wrapping ErrKilled: neither does a killed run); it
// returns the status then. A nil ctx is refused (ErrNilContext).
func (e *Engine) WaitSettled(ctx context.Context) (Status, error) {
	if ctx == nil {
		return e.Status(), fmt.Errorf("%w: Engine.WaitSettled", ErrNilContext)
	}
	if err := e.Err(); err != nil {
		return e.Status(), err
	}
	select {
	case <-e.Settled():
		return e.Status(), nil
	case <-e.watch.failed:
		return e.Status(), e.Err()
	case <-e.killCh:
		return e.Status(), e.killedErr("not settled")
	case <-ctx.Done():
		return e.Status(), ctx.Err()
	}
}

// untilDrained waits, for Stop, until every live group's queues are
// drained or ctx is done; it reports whether they drained.
func (e *Engine) untilDrained(ctx context.Context) bool {
	wt := e.watch.add(e.drained)
	select {
	case <-wt.ch:
		return true
	case <-ctx.Done():
		e.watch.remove(wt)
		return false
	}
}
