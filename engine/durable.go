package engine

import (
	"errors"
	"fmt"
)

// CheckpointUser is a processor that saves its state in batches rather than
// at the completion of every delivery, and so holds its feeds' commits
// until a save covering them is durable: a source never commits an item
// whose effects a crash could lose. The engine finds the processors
// implementing it (New) and hands each its checkpoints; the processor
// package (core) knows nothing of it.
//
// The protocol, for one instance:
//
//   - Start, the first time it starts the engine, calls UseCheckpoint once
//     per feed the instance's group subscribes, before anything is
//     delivered (the hold is in place before the call). cp holds the feed's
//     commits for the group. An instance that does not save in batches (no
//     state file, a save per delivery) calls cp.Release at once; one that
//     saves per delivery keeps cp to report, from the completion whose
//     save keeps failing, cp.Fail(err) before it returns its error: the
//     item does not count (it is not committed) and the group fails. An
//     instance may start a goroutine here: Stop will call CloseCheckpoint.
//   - To save, on a goroutine where no delivery of the instance is half
//     applied: take m := cp.Mark() and the state together, write the state
//     durably, then cp.DurableThrough(m). Mark counts only items whose
//     completions have run (not the one being handled), so every item it
//     counts is in the state taken with it.
//   - A save that fails is tried again; one that keeps failing (a bounded
//     number of tries, or time) is reported with cp.Fail(err), err naming
//     the state: the group fails (Engine.Err returns a *DurableError), so
//     that a launcher stops the run rather than wait for a commit that
//     cannot come, and nothing past the last durable mark is committed.
//   - Stop calls CloseCheckpoint once the groups stopped (or Stop's context
//     ended), before its last commit: the instance saves what it holds,
//     makes it durable, and stops any goroutine of its own. Its error joins
//     Stop's.
//
// When a group has several instances implementing it (workers, or several
// such processors), each gets a part of one hold (HoldParts): a feed
// commits only what every instance made durable, so that the commit, which
// spans every worker's items, never passes an item its worker did not save.
type CheckpointUser interface {
	UseCheckpoint(feed string, cp *Checkpoint)
	CloseCheckpoint() error
}

// checkpointUsers are the instances of g's processors that implement
// CheckpointUser, in host order.
func checkpointUsers(g *group) []CheckpointUser {
	var us []CheckpointUser
	for _, h := range g.hosts {
		if u, ok := h.Processor().(CheckpointUser); ok {
			us = append(us, u)
		}
	}
	return us
}

// holdForUsersLocked holds, for every group with CheckpointUsers, each
// of its feeds: a part of one hold per user. It returns the calls that
// hand the users their parts, to make once e.mu is released (a user may
// Release at once). e.mu held.
func (e *Engine) holdForUsersLocked() []func() {
	var calls []func()
	for _, g := range e.groups {
		us := checkpointUsers(g)
		if len(us) == 0 {
			continue
		}
		for _, b := range *g.bindings.Load() {
			cps, err := e.holdPartsLocked(b.feed.name, g.name, len(us))
			if err != nil {
				panic(err) // the engine's own feed and group: never unknown, n >= 1
			}
			for i, u := range us {
				calls = append(calls, func() { u.UseCheckpoint(b.feed.name, cps[i]) })
			}
		}
	}
	return calls
}

// closeCheckpoints calls CloseCheckpoint of every CheckpointUser, joining
// their errors.
func (e *Engine) closeCheckpoints() error {
	var errs []error
	for _, g := range e.groups {
		for _, u := range checkpointUsers(g) {
			if err := u.CloseCheckpoint(); err != nil {
				errs = append(errs, fmt.Errorf("engine: group %q: closing a checkpoint: %w", g.name, err))
			}
		}
	}
	return errors.Join(errs...)
}
