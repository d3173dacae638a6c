package recorder

import (
	"context"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
)

// WaitConfig says when Run.Wait returns. A WaitConfig is only read.
type WaitConfig struct {
	// Follow keeps the run going once it is settled (a tailed file, a
	// consumer group): Wait then returns only for ctx, Stop, the source or
	// a failure. Without Follow it returns once the run is settled.
	Follow bool
	// Stop, once closed, ends the wait: a reason of the caller's to stop
	// the run (an output it could not write). Nil: none.
	Stop <-chan struct{}
	// Progress, when set, is called with the run's status every
	// ProgressEvery (default 100ms) while Wait waits, on Wait's goroutine.
	Progress      func(engine.Status)
	ProgressEvery time.Duration
}

// Wait waits for the end of the run: ctx done, wc.Stop closed, the feed's
// source ended with an error, a group failed (Engine.Err: the recorder
// could not write, a state could not be saved), the engine was killed
// (Engine.Kill, RunConfig.KillSwitch: Status().Killed), or, without
// wc.Follow, the run settled (Engine.Settled). It returns the source's error, nil
// otherwise: a source that ended with an error is reported even when the
// run settled or failed at the same time. A bounded source that ended
// cleanly ends nothing: its queue drains, then the run settles. Wait does
// not stop the run (Stop does). One Wait at a time: the source's end is
// reported to one of them.
func (r *Run) Wait(ctx context.Context, wc WaitConfig) error {
	var progress <-chan time.Time
	if wc.Progress != nil {
		every := wc.ProgressEvery
		if every <= 0 {
			every = 100 * time.Millisecond
		}
		t := time.NewTicker(every)
		defer t.Stop()
		progress = t.C
	}
	var settled <-chan struct{}
	if !wc.Follow {
		settled = r.eng.Settled()
	}
	failed := r.eng.When(func(st engine.Status) bool { return r.eng.Err() != nil || st.Killed != "" })
	done := r.srcDone
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wc.Stop:
			return nil
		case err := <-done:
			if err != nil {
				return err
			}
			done = nil // a bounded source ended: wait for its queue to drain
		case <-settled:
			return r.sourceErr(done)
		case <-failed:
			return r.sourceErr(done)
		case <-progress:
			wc.Progress(r.eng.Status())
		}
	}
}

// sourceErr is the error the source ended with, if it ended (done is
// r.srcDone while the source's end was not seen, else nil).
func (r *Run) sourceErr(done <-chan error) error {
	select {
	case err := <-done:
		return err
	default:
		return nil
	}
}

// watchSource wraps src so that how its Run ended is sent on done (a
// buffered channel): src's DefaultPolicy, if it has one, is kept. A nil
// src is left nil.
func watchSource(src engine.Source, done chan<- error) engine.Source {
	if src == nil {
		return nil
	}
	w := watchedSource{src: src, done: done}
	if p, ok := src.(engine.PolicySource); ok {
		return watchedPolicySource{w, p}
	}
	return w
}

// watchedSource runs a source and reports how its Run ended.
type watchedSource struct {
	src  engine.Source
	done chan<- error
}

func (s watchedSource) Run(ctx context.Context, in *engine.Intake) error {
	err := s.src.Run(ctx, in)
	s.done <- err
	return err
}

// watchedPolicySource is a watchedSource of a source with a default
// overload policy.
type watchedPolicySource struct {
	watchedSource
	p engine.PolicySource
}

func (s watchedPolicySource) DefaultPolicy() engine.Policy { return s.p.DefaultPolicy() }
