package engine

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// overseer is the engine's goroutine, from Start to Stop, that looks at
// what may last too long: a feed's pause past its PauseWarnAfter, a
// worker's item past its group's StallAfter, a binding DEGRADED past its
// feed's QuietPeriod (it applies the recovery: lossstate.go). It warns of
// each once. It runs only while there is something to look at (a pause not
// yet warned of, a worker on an item of a group that reports stalls, a
// DEGRADED binding); otherwise it waits to be woken (wake) by a pause
// beginning, a worker taking an item or a binding degrading. It reads the TimerClock when it looks, never per item, and
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

// wake has an idle overseer look again: a pause began, or a worker took an
// item. Cheap (one atomic load) when it is not idle.
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
			// pause or takes an item after that look wakes it.
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

// lookOver looks at every feed's pause and every worker's item once,
// warning of those that lasted too long; it reports whether something may
// still last too long, and when to look again at the latest.
func (e *Engine) lookOver() (time.Duration, bool) {
	now := e.cfg.TimerClock.Now()
	wait, watching := time.Duration(math.MaxInt64), false
	for _, f := range e.feeds {
		if d, ok := f.lookOver(now); ok {
			wait, watching = min(wait, d), true
		}
		if d, ok := f.lookOverLosses(now); ok {
			wait, watching = min(wait, d), true
		}
	}
	for _, g := range e.groups {
		if d, ok := g.lookOver(now); ok {
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

// sighting is what the overseer saw a worker on: the item at position pos
// of queue b, since (TimerClock) it first saw it there, and whether it
// warned of it.
type sighting struct {
	b      *binding
	pos    int64
	since  time.Time
	warned bool
}

// stall is an item a worker has not completed within its group's
// StallAfter: the status's reason, while the worker is still on it.
type stall struct {
	b      *binding
	pos    int64
	reason string
}

// lookOver warns, once per item, of a worker of the group that has been on
// one item for StallAfter (seen on it by looks StallAfter apart: it took
// it before the first); it reports whether a worker is on an item, and
// when to look again: a quarter of StallAfter at the latest, so that an
// item is reported at most that late.
func (g *group) lookOver(now time.Time) (time.Duration, bool) {
	if g.stallAfter <= 0 {
		return 0, false
	}
	wait, busy := g.stallAfter/4, false
	for _, w := range g.workers {
		if w.inflight.Load() == 0 {
			w.forget() // idle
			continue
		}
		busy = true
		pos := w.at.Load()
		b := w.atQ.Load()
		if pos == 0 || b == nil || w.at.Load() != pos {
			// On a timer or drops, or moving to the next item: looked
			// at next time.
			w.forget()
			continue
		}
		if w.seen.b != b || w.seen.pos != pos {
			w.forget()
			w.seen = sighting{b: b, pos: pos, since: now}
		}
		if w.seen.warned {
			continue
		}
		if left := g.stallAfter - now.Sub(w.seen.since); left > 0 {
			wait = min(wait, left)
			continue
		}
		w.seen.warned = true
		reason, item := w.describe(b, pos, g.stallAfter)
		s := &stall{b: b, pos: pos, reason: reason}
		w.stuck.Store(s)
		g.eng.warnItem(item, "group %q stalled: %s; the feed commits nothing past that item until it completes", g.name, s.reason)
	}
	return wait, busy
}

// forget drops what the overseer saw the worker on, and the item it found
// it stuck on: the worker is idle or on another item.
func (w *worker) forget() {
	w.seen = sighting{}
	if w.stuck.Load() != nil {
		w.stuck.Store(nil)
	}
}

// describe names the worker and its item at position pos of queue b: the
// feed, the sequence, and the source position (the queue position for an
// item without one); item are the item's attributes (itemAttrs).
func (w *worker) describe(b *binding, pos int64, after time.Duration) (reason string, item []slog.Attr) {
	seq := b.gap.seqs[pos%int64(len(b.gap.seqs))].Load()
	where := fmt.Sprintf("queue position %d", pos)
	var at *core.Position
	f := b.feed
	f.mu.Lock()
	for i := range f.win.Len() {
		if e := f.win.At(i); e.Seq == seq {
			p := e.Pos
			at = &p
			where = "offset " + fmt.Sprint(e.Pos.Offset)
			if e.Pos.Key != "" {
				where = fmt.Sprintf("key %q %s", e.Pos.Key, where)
			}
			break
		}
	}
	f.mu.Unlock()
	return fmt.Sprintf("worker %s has not completed feed %q seq %d (%s) within %s", w.name, f.name, seq, where, after),
		itemAttrs(f.name, b.group.name, seq, at)
}

// stuckOn is the item the overseer found the worker stuck on, while the
// worker is still on it; nil otherwise.
func (w *worker) stuckOn() *stall {
	s := w.stuck.Load()
	if s == nil || w.inflight.Load() == 0 || w.at.Load() != s.pos || w.atQ.Load() != s.b {
		return nil
	}
	return s
}

// stuck is why a worker of the queue's group is stuck on an item of the
// queue, "" when none is.
func (b *binding) stuck() string {
	if len(b.group.workers) < 2 {
		return ""
	}
	var why []string
	for _, w := range b.group.workers {
		if s := w.stuckOn(); s != nil && s.b == b {
			why = append(why, s.reason)
		}
	}
	return strings.Join(why, "; ")
}
