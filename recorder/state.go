package recorder

import (
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

// lossState keeps a STATE row for the next write: a binding's loss state
// changed (engine.Observer.LossState). Like a COMMIT row it belongs to no
// processor and costs no write of its own: the next Append the recorder
// makes anyway takes it (withCommits keeps the COMMIT and STATE rows in the
// order the engine reported them), and Close writes what is left. Called
// on any goroutine (a publisher, a status reader, the engine's overseer,
// its Stop, an operator's clear), never concurrently for one feed.
func (r *Recorder) lossState(_ string, c engine.LossStateChange) {
	if checkName("feed", c.Feed) != nil {
		return // a feed whose name the format cannot hold has no rows either
	}
	row := store.State{Feed: c.Feed, Group: c.Group, From: string(c.From), To: string(c.To), Reason: c.Reason,
		At: c.At, Observed: c.Observed}.Entry(0)
	if store.Validate(row) != nil {
		return // an instant outside years 0-9999: a clock no run has
	}
	r.commits.mu.Lock()
	r.commits.pending = append(r.commits.pending, row)
	r.commits.mu.Unlock()
}
