package engine

import (
	"errors"
	"fmt"

	"github.com/blackbox-audit/blackbox/core"
)

// A processor implementing core.CheckpointUser gets its checkpoints from
// Start (holdForUsersLocked) and saves the rest when Stop calls its
// CloseCheckpoint (closeCheckpoints); core documents the protocol.

// checkpointUsers are the instances of g's processors that implement
// core.CheckpointUser, in host order.
func checkpointUsers(g *group) []core.CheckpointUser {
	var us []core.CheckpointUser
	for _, h := range g.hosts {
		if u, ok := h.Processor().(core.CheckpointUser); ok {
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
