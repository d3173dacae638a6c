package engine

import (
	"context"
	"errors"
	"fmt"
)

// The kill switch: an operator's stop that takes nothing more.
//
// Kill is Stop without the drain. It stops every feed's intake at once (no
// publish is accepted from then on: a source re-reads what it could not
// publish, since nothing past what was dispatched is committed), has every
// group take no item more from its queues (the items queued and not taken
// are never processed in this run, never committed), fires no timer, and
// then ends the run in the background: the items in flight (taken by a
// group and not yet dispatched: handed to a worker, being dispatched, or
// handled and waiting for their batch's Flush) finish, bounded by
// Config.DrainTimeout, or, with Config.KillAbandon, are abandoned at once
// (Cycle.Context cancelled, no completion of theirs runs, none counts as
// dispatched); the feeds commit their contiguous dispatched prefix; the
// streams are closed (Observer.Stopped: the recorder writes END, its detail
// saying killed and why); every CheckpointUser saves what it holds; the
// feeds commit again. Stop after Kill waits for that end (bounded by its
// ctx) and returns its error.

// ErrKilled: the engine was killed (Engine.Kill, or Config.KillSwitch): a
// Feed.Publish or Feed.Offer made after the kill is refused with an error
// wrapping it (nothing numbered, journalled or queued), and WaitSettled
// returns one (a killed run never settles). Callers match it with
// errors.Is; Status().Killed gives the reason.
var ErrKilled = errors.New("engine: killed")

// ErrNotStarted: Kill before Start. Callers match it with errors.Is.
var ErrNotStarted = errors.New("engine: not started")

// noReason is the reason of a kill given none.
const noReason = "no reason given"

// Kill kills the running engine, for reason (recorded; "" becomes "no
// reason given"): when it returns, no feed accepts a publish (one under
// way as Kill runs, holding the feed's lock, completes) and no group takes
// another item (one a group is taking as Kill runs is in flight); the
// items in flight finish or are abandoned (Config.KillAbandon) and the
// engine then ends by itself, as described above, committing only the
// contiguous prefix of what was dispatched. It never waits for a group nor
// for a feed's lock: it may be called from any goroutine, a processor's
// cycle, an observer hook or a Journal included. Stop after Kill waits for
// the end (no drain) and returns its error.
//
// The Observer's Killed hook is called with the reason before Kill
// returns, on the caller's goroutine. Kill is idempotent: a second Kill
// returns nil and keeps the first reason. Kill before Start returns an
// error wrapping ErrNotStarted, and Kill once Stop began an error wrapping
// ErrStopped; neither does anything (a Stop under way goes on draining).
func (e *Engine) Kill(reason string) error { return e.KillRecorded(reason, nil) }

// KillRecorded is Kill with record (if not nil) called first, under the
// engine's lock, once the kill is certain to take effect (started, not
// stopped, not killed already), so that the record of the kill (an
// operator's CONTROL row) is written before it takes effect and never for
// a kill not done: a kill ends the run, which closes its recording. An
// error of record refuses the kill (wrapping ErrNotRecorded), nothing
// done; a kill already done returns nil without calling it.
func (e *Engine) KillRecorded(reason string, record func() error) error {
	if reason == "" {
		reason = noReason
	}
	e.mu.Lock()
	switch {
	case !e.started:
		e.mu.Unlock()
		return fmt.Errorf("%w: Kill before Start", ErrNotStarted)
	case e.killed.Load():
		e.mu.Unlock()
		return nil
	case e.stopped:
		e.mu.Unlock()
		return fmt.Errorf("%w: Kill after Stop", ErrStopped)
	}
	if record != nil {
		if err := record(); err != nil {
			e.mu.Unlock()
			return fmt.Errorf("%w: the kill is not done: %w", ErrNotRecorded, err)
		}
	}
	e.stopped = true // Stop does not stop again: it waits for the kill's end
	e.killReason.Store(&reason)
	e.abandon.Store(e.cfg.KillAbandon)
	e.killDone = make(chan struct{})
	e.killed.Store(true) // after abandon: a group that sees killed sees the mode
	e.mu.Unlock()
	close(e.killCh)

	// Intake stops at once: every publish that takes a feed's lock from
	// now on is refused (one under way, holding it, completes). Not under
	// the lock: a Journal, which runs under it, may kill the engine.
	for _, f := range e.feeds {
		f.killed.Store(true)
		close(f.closedCh) // a BLOCK publish waiting for room is refused
	}
	e.cancel() // the sources' context
	if e.cfg.KillAbandon {
		// The processors in flight see their Cycle.Context cancelled.
		for _, g := range e.groups {
			g.cancel()
		}
	}
	for _, g := range e.groups {
		g.notify() // a parked group sees the kill
	}
	e.warnf("killed: %s", reason)
	if e.cfg.Observer.Killed != nil {
		e.cfg.Observer.Killed(reason)
	}
	e.watch.note()
	go e.endKill()
	return nil
}

// endKill ends a killed run (Kill's goroutine): the sources return; the
// items in flight finish (bounded by DrainTimeout) unless abandoned; the
// feeds commit; the groups close their streams; the CheckpointUsers save;
// the feeds commit again.
func (e *Engine) endKill() {
	defer close(e.killDone)
	e.srcWG.Wait()
	if !e.abandon.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DrainTimeout)
		if !e.untilQuiet(ctx) {
			e.warnf("kill: items in flight did not finish within the drain timeout (%s); they stay uncommitted", e.cfg.DrainTimeout)
		}
		cancel()
	}
	var errs []error
	errs = append(errs, e.commitAll()...)
	for _, g := range e.groups {
		close(g.stop)
	}
	for _, g := range e.groups {
		g.cancel()
	}
	for _, g := range e.groups {
		<-g.done
	}
	e.killErr = e.closeRun(errs)
}

// untilQuiet waits until every live group has finished the items it had
// in flight at the kill (group.quiet), or ctx is done; it reports whether
// they did.
func (e *Engine) untilQuiet(ctx context.Context) bool {
	wt := e.watch.add(func() bool {
		for _, g := range e.groups {
			if !g.quiet.Load() && !g.dead.Load() {
				return false
			}
		}
		return true
	})
	select {
	case <-wt.ch:
		return true
	case <-ctx.Done():
		e.watch.remove(wt)
		return false
	}
}

// awaitKill is Stop after a kill: it waits for the kill's end, or ctx.
func (e *Engine) awaitKill(ctx context.Context) error {
	select {
	case <-e.killDone:
		return e.killErr
	case <-ctx.Done():
	}
	var errs []error
	for _, g := range e.groups {
		select {
		case <-g.done:
		default:
			errs = append(errs, fmt.Errorf("%w: group %q did not stop after the kill (a processor is blocked): %v", ErrStopped, g.name, ctx.Err()))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%w: the kill's end did not finish: %v", ErrStopped, ctx.Err()))
	}
	return errors.Join(errs...)
}

// killedErr is the error of a publish or a wait refused by the kill.
func (e *Engine) killedErr(what string) error {
	return fmt.Errorf("%w (%s): %s", ErrKilled, *e.killReason.Load(), what)
}

// halted reports whether the group must take no item more: the engine was
// killed, or its KillSwitch says to kill it now (then it is: Kill). Called
// by the group before it takes each item.
func (g *group) halted() bool {
	e := g.eng
	if e.killed.Load() {
		return true
	}
	if e.cfg.KillSwitch == nil {
		return false
	}
	reason, kill := e.cfg.KillSwitch()
	if !kill {
		return false
	}
	// Refused once Stop began: its drain goes on.
	return e.Kill(reason) == nil
}

// abandoned reports whether a kill abandons the items in flight
// (Config.KillAbandon): none of them completes, none counts as dispatched.
func (g *group) abandoned() bool { return g.eng.abandon.Load() }

// stopKilled is the end of a killed group's goroutine: it finishes the
// items it had in flight (the workers' tasks; a group of one worker has
// finished its item and flushed its batch when its step returned), says
// so (quiet), then waits for endKill to close it and ends its streams.
func (g *group) stopKilled() {
	if len(g.workers) > 1 {
		g.settleShared() // every task handed out done (or abandoned), or Stop
	}
	g.quiet.Store(true)
	g.eng.watch.note()
	<-g.stop
	if !g.dead.Load() {
		g.finish()
	}
}

// killedStatus is what a kill changes in the engine's status: why it was
// killed (Status.Killed), and never settled, even with no feed.
func (e *Engine) killedStatus(s *Status) {
	if r := e.killReason.Load(); r != nil && e.killed.Load() {
		s.Killed, s.Settled = *r, false
	}
}

// killedStatus is what a kill changes in a feed's status (Feed.Status,
// lock held; positioned: the feed has a committer): a killed feed is never
// settled, and one no source re-reads (no committer) whose queues held
// items the kill left lost them.
func (f *Feed) killedStatus(fs *FeedStatus, positioned bool) {
	if !f.eng.killed.Load() {
		return
	}
	fs.Settled = false
	if !positioned && !fs.Drained {
		fs.Lossless = false
	}
}
