package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/blackbox-audit/blackbox/engine"
)

// The states of Readiness and FeedReadiness.
const (
	StateStarting    = "starting"
	StateRunning     = "running"
	StateDraining    = "draining"
	StateLatched     = "latched"
	StateKilled      = "killed"
	StateUnreachable = "unreachable"
)

// readyz answers 200 when the run is ready, 503 otherwise, with the
// Readiness (the run's state and each feed's).
func (w *Window) readyz(rw http.ResponseWriter, r *http.Request) {
	rd := w.Readiness(r.Context())
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(rw, code, rd)
}

// Readiness is the run's readiness now: not ready while it starts (the
// loop has not beaten yet, a feed's source is initialising), drains
// (Drain), is killed, a binding of a feed is LATCHED, or a feed's source
// cannot reach its brokers (Config.Probes). The run's State is the first of
// killed, draining, starting, then the first feed's that is not ready.
func (w *Window) Readiness(ctx context.Context) Readiness {
	st := w.cfg.Engine.Status()
	w.mu.Lock()
	beaten, draining := !w.beat.IsZero(), w.draining
	w.mu.Unlock()
	rd := Readiness{Ready: true, State: StateRunning, Feeds: []FeedReadiness{}}
	for _, f := range st.Feeds {
		fr := w.feedReadiness(ctx, f)
		rd.Feeds = append(rd.Feeds, fr)
		if !fr.Ready && rd.Ready {
			rd.Ready, rd.State, rd.Reason = false, fr.State, fmt.Sprintf("feed %q: %s", f.Feed, fr.Reason)
		}
	}
	switch {
	case st.Killed != "":
		rd.Ready, rd.State, rd.Reason = false, StateKilled, "killed: "+st.Killed
	case draining:
		rd.Ready, rd.State, rd.Reason = false, StateDraining, "stopping: draining what was read"
	case !beaten:
		rd.Ready, rd.State, rd.Reason = false, StateStarting, "the run loop has not begun"
	}
	return rd
}

// feedReadiness is one feed's readiness.
func (w *Window) feedReadiness(ctx context.Context, f engine.FeedStatus) FeedReadiness {
	fr := FeedReadiness{Feed: f.Feed, Ready: true, State: StateRunning}
	if f.State == engine.StateInitialising {
		fr.Ready, fr.State, fr.Reason = false, StateStarting, "the source is initialising"
		if f.Detail != nil && *f.Detail != "" {
			fr.Reason += ": " + *f.Detail
		}
		return fr
	}
	for _, s := range f.Subscribers {
		if !s.Removed && s.Loss.State == engine.LossLatched {
			fr.Ready, fr.State = false, StateLatched
			fr.Reason = fmt.Sprintf("queue %s is LATCHED: %s", s.Queue, s.Loss.Reason)
			return fr
		}
	}
	if probe := w.cfg.Probes[f.Feed]; probe != nil {
		pctx, cancel := context.WithTimeout(ctx, w.cfg.ProbeTimeout)
		err := probe(pctx)
		cancel()
		switch {
		case errors.Is(err, ErrStarting):
			fr.Ready, fr.State, fr.Reason = false, StateStarting, err.Error()
		case err != nil:
			fr.Ready, fr.State, fr.Reason = false, StateUnreachable, "no broker answers: "+err.Error()
		}
	}
	return fr
}
