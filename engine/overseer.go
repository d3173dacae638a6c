package engine

import (
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

// overseer is the engine's goroutine, from Start to Stop, that looks at
// what may last too long: a feed's pause past its PauseWarnAfter. It warns
// of each once. It runs only while there is something to look at (a pause
// not yet warned of); otherwise it waits to be woken (wake) by a pause
// beginning. It reads the TimerClock when it looks, never per item, and
// changes nothing of the delivery. Safe for concurrent use.
type overseer struct {
	kick chan struct{} // buffered: a wake while idle
	idle atomic.Bool   // waiting for a kick: nothing to look at
	stop chan struct{} // set by start, closed by halt
	done chan struct{}
}

// overseePoll bounds how long the overseer waits before it reads the
// TimerClock again while something may last: a TimerClock that is not the
// wall clock may be moved by others.
const overseePoll = time.Second

func newOverseer() *overseer { return &overseer{kick: make(chan struct{}, 1)} }

// start runs the overseer (Engine.Start, once).
func (ov *overseer) start(e *Engine) {
	ov.stop, ov.done = make(chan struct{}), make(chan struct{})
	go ov.run(e, ov.stop, ov.done)
}

// halt stops the overseer and waits for it (Engine.Stop).
func (ov *overseer) halt() {
	if ov.stop != nil {
		close(ov.stop)
		<-ov.done
	}
}

// wake has an idle overseer look again: a pause began. Cheap (one atomic
// load) when it is not idle.
func (ov *overseer) wake() {
	if ov.idle.Load() {
		select {
		case ov.kick <- struct{}{}:
		default:
		}
	}
}

func (ov *overseer) run(e *Engine, stop, done chan struct{}) {
	defer close(done)
	for {
		wait, watching := e.lookOver()
		if !watching {
			// Idle is set before looking once more: whoever begins a
			// pause after that look wakes it.
			ov.idle.Store(true)
			if _, watching = e.lookOver(); !watching {
				select {
				case <-ov.kick:
				case <-stop:
					return
				}
			}
			ov.idle.Store(false)
			continue
		}
		t := time.NewTimer(min(wait, overseePoll))
		select {
		case <-ov.kick:
		case <-t.C:
		case <-stop:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// lookOver looks at every feed's pause once, warning of those that lasted
// too long; it reports whether something may
// still last too long, and when to look again at the latest.
func (e *Engine) lookOver() (time.Duration, bool) {
	now := e.cfg.TimerClock.Now()
	wait, watching := time.Duration(math.MaxInt64), false
	for _, f := range e.feeds {
		if d, ok := f.lookOver(now); ok {
			wait, watching = min(wait, d), true
		}
	}
	return wait, watching
}

// lookOver warns, once, of a pause of the feed that lasts past its
// PauseWarnAfter; it reports whether the current pause is still to be
// warned of, and in how long.
func (f *Feed) lookOver(now time.Time) (time.Duration, bool) {
	if f.warnAfter <= 0 {
		return 0, false
	}
	f.mu.Lock()
	if !f.paused || f.pauseWarned || f.pausedAt.IsZero() {
		f.mu.Unlock()
		return 0, false
	}
	if left := f.warnAfter - now.Sub(f.pausedAt); left > 0 {
		f.mu.Unlock()
		return left, true
	}
	f.pauseWarned = true
	f.notef(slog.LevelWarn, "feed %q has been paused for %s (the source is refused every item): %s",
		f.name, f.warnAfter, f.pauseCause)
	f.unlock()
	return 0, false
}
