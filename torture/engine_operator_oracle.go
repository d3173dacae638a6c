package torture

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
)

// The oracle of the operator scenario (engine_operator.go): what the
// engine must have done after each step, at the end of the run and after
// a kill, read from its status, its Observer and the groups' own counts.

// view is what a refused action must not change, read at a quiescent
// moment: the queues of f (their generations, what they were given and
// released, what a group of one worker dispatched) and the feed's loss,
// the push feed's drops and its bindings' loss states. Not what a group
// of several workers may still do while one item is held back (items
// after it complete), nor the clocks.
func (o *opRun) view() string {
	var b strings.Builder
	fs, ps := o.f.Status(), o.push.Status()
	fmt.Fprintf(&b, "f: seq %d released %d lossless %v;", fs.Sequence, fs.Released, fs.Lossless)
	for _, s := range fs.Subscribers {
		fmt.Fprintf(&b, " %s gen %d removed %v position %d released %d %s;", s.Queue, s.Generation, s.Removed, s.Position,
			s.Released, s.Loss.State)
		if g := o.groups[slices.Index(opGroupNames, strings.TrimSuffix(s.Queue, "/f"))]; g.workers == 1 {
			fmt.Fprintf(&b, " dispatched %d;", s.Dispatched)
		}
	}
	fmt.Fprintf(&b, " push: seq %d dropped %d lossless %v;", ps.Sequence, ps.Dropped, ps.Lossless)
	for _, s := range ps.Subscribers {
		fmt.Fprintf(&b, " %s %s since %s cleared %s %q;", s.Queue, s.Loss.State, s.Loss.Since.Format(time.RFC3339Nano),
			s.Loss.Cleared.Format(time.RFC3339Nano), s.Loss.Reason)
	}
	return b.String()
}

// checkTaken checks what a release or a seek of g took (or, dry, would
// take) against what the queue held: everything after its dispatched
// prefix through the feed's last sequence; with one worker exactly the
// items it had not completed.
func (o *opRun) checkTaken(what string, g *opGroup, first, last, unprocessed, processed int64) {
	seq, uncompleted, prefix := o.held(g)
	switch {
	case last != seq || first <= g.base || first > prefix+1 || unprocessed+processed != last-first+1:
		o.fail("%s took seqs %d-%d (%d unprocessed, %d processed); want through the feed's last seq %d, from after the queue's start %d and at most its completed prefix %d, each item once",
			what, first, last, unprocessed, processed, seq, g.base, prefix)
	case unprocessed < uncompleted:
		o.fail("%s took %d unprocessed items, but %d of the queue's were not completed", what, unprocessed, uncompleted)
	case processed > last-first+1-uncompleted:
		o.fail("%s took %d processed items of seqs %d-%d, but %d of them were not completed", what, processed, first, last, uncompleted)
	case g.workers == 1 && (processed != 0 || first != prefix+1):
		o.fail("%s took seqs %d-%d, %d processed; one worker: want exactly the items after its completed prefix %d, none processed",
			what, first, last, processed, prefix)
	}
}

// took updates the model after a release or a seek replaced g's queue
// (gen) by replacement, the feed at seq, and checks the status.
func (o *opRun) took(g *opGroup, gen, replacement, seq int64, l opLoss) {
	g.spent = append(g.spent, gen)
	g.base = seq
	if l.unprocessed+l.processed > 0 {
		g.lost = append(g.lost, l)
		o.released += l.unprocessed + l.processed
	}
	st := o.f.Status()
	if nl := live(st, g); nl.Generation != replacement {
		o.fail("%s's live queue is generation %d after the action, want the replacement %d", g.name, nl.Generation, replacement)
	}
	old := byGen(st, gen)
	if !old.Removed || old.Released != l.unprocessed+l.processed {
		o.fail("the replaced queue %s generation %d: removed %v, released %d; want removed, released %d", old.Queue, gen, old.Removed, old.Released,
			l.unprocessed+l.processed)
	}
}

// quiesce waits until the engine has done what the steps so far let it
// do: every item published is in the feed (unless a group is fenced: the
// feed pauses), each group completed every item its gate lets through
// (a fenced group: every one it had begun), and its live queue counts as
// dispatched what it completed. A failure to get there is the engine's:
// the scenario stops.
func (o *opRun) quiesce() bool {
	ctx, cancel := context.WithTimeout(o.ctx, 10*time.Second)
	defer cancel()
	var why string
	err := waitFor(ctx, func() bool {
		why = o.unsettled()
		return why == ""
	})
	if err != nil {
		o.fail("the engine never did what the steps let it do: %s (%v)", why, err)
		return false
	}
	return true
}

// unsettled says what the engine has not done yet of what the steps let
// it do ("" when nothing).
func (o *opRun) unsettled() string {
	st := o.f.Status()
	fenced := slices.ContainsFunc(o.groups, func(g *opGroup) bool { return g.fenced })
	if !fenced && st.Sequence != int64(o.published) {
		return fmt.Sprintf("the feed took %d of %d items", st.Sequence, o.published)
	}
	for _, g := range o.groups {
		a, k := g.gate()
		allow, stuck := min(int64(a), st.Sequence), int64(k)
		// The item held back holds the items after it (one worker: all of
		// them; several: some) while it is being handled or its live
		// queue still holds it; not once a release or seek took it
		// before a worker began it.
		holds := stuck > 0 && stuck <= allow && (g.entered[stuck].Load() > 0 || stuck > g.base)
		for v := int64(1); v <= allow; v++ {
			// An item begun and let through completes; a group not fenced
			// takes every item let through that the held one does not hold.
			begun := g.entered[v].Load() > 0
			owed := !g.fenced && !g.releasedAt(v) && (!holds || v < stuck)
			if v != stuck && (begun || owed) && g.completed[v].Load() == 0 {
				return fmt.Sprintf("%s has not completed item %d (gate at %d, %d held back)", g.name, v, allow, stuck)
			}
		}
		q, seq := live(st, g), st.Sequence
		uncompleted, prefix := g.queue(seq)
		switch {
		case g.workers == 1 && q.Dispatched != prefix-g.base:
			return fmt.Sprintf("%s's queue dispatched %d, want its completed %d", g.name, q.Dispatched, prefix-g.base)
		case uncompleted == 0 && q.Dispatched != seq-g.base:
			return fmt.Sprintf("%s's queue dispatched %d, want all of its %d", g.name, q.Dispatched, seq-g.base)
		}
	}
	return ""
}

// checkModel checks, after each step, what the model knows of the status:
// the feed's released count and loss, that it takes nothing while a group
// is fenced (it pauses), the push bindings' loss states; and
// that the commit is never past an item neither completed nor lost.
func (o *opRun) checkModel(push bool) bool {
	c := o.log.Committed()
	fs, ps := o.f.Status(), o.push.Status()
	ok := true
	if fs.Released != o.released || fs.Lossless != (o.released == 0) {
		o.fail("feed f: released %d, lossless %v; want %d released, lossless %v", fs.Released, fs.Lossless, o.released, o.released == 0)
		ok = false
	}
	if o.paused >= 0 && fs.Sequence != o.paused {
		o.fail("feed f took items while a group was fenced: sequence %d, %d when the fence began", fs.Sequence, o.paused)
		ok = false
	}
	anyLatched := false
	for _, g := range o.groups {
		anyLatched = anyLatched || g.latched
		if p := g.prefix(o.n); c > p {
			o.fail("committed through %d, past item %d that %s neither completed nor lost", c, p+1, g.name)
			ok = false
		}
		for _, q := range ps.Subscribers {
			if push && q.Queue == g.name+"/push" && (q.Loss.State == engine.LossLatched) != g.latched {
				o.fail("%s's push binding is %s, want latched %v (a fenced group's push item lost since its last clear)", g.name, q.Loss.State, g.latched)
				ok = false
			}
		}
	}
	if push && ps.Lossless == anyLatched {
		o.fail("feed push lossless %v with a binding latched %v", ps.Lossless, anyLatched)
		ok = false
	}
	return ok
}

// checkLosses checks what the run told of the losses once it stopped:
// each release's or seek's unprocessed items in Drops with its reason,
// within its range, once in each of the group's streams; no Drop nor loss
// state change for an attempt the engine refused; the commits past an
// item not completed only past a lost one; the late completions of lost
// items refused (stale tokens); each latch and clear told once. clean
// says the run stopped cleanly (the push items' drops are told too).
func (o *opRun) checkLosses(clean bool) {
	o.obs.mu.Lock()
	defer o.obs.mu.Unlock()
	for _, e := range o.obs.early {
		if !e.g.releasedAt(e.v) {
			o.fail("a commit through %d passed item %d, which %s had neither completed nor lost", e.c, e.v, e.g.name)
			break
		}
	}
	st := o.eng.Status()
	for gi, g := range o.groups {
		streams := map[string]bool{}
		type key struct {
			reason      string
			first, last int64
		}
		seen := map[key]map[string]int{}
		pushDrops := int64(0)
		for _, d := range o.obs.drops {
			if d.d.Group != g.name {
				continue
			}
			streams[d.stream] = true
			if d.d.Feed == "push" {
				pushDrops += d.d.Count
				continue
			}
			if d.d.Count != d.d.LastSeq-d.d.FirstSeq+1 || d.d.Offset != d.d.LastSeq {
				// A run of consecutive seqs; an item's offset in the log is its seq.
				o.fail("%s was told a Drop of %d items, seqs %d-%d at offset %d: want a run of consecutive seqs at its last one's offset",
					g.name, d.d.Count, d.d.FirstSeq, d.d.LastSeq, d.d.Offset)
			}
			k := key{d.d.Reason, d.d.FirstSeq, d.d.LastSeq}
			if seen[k] == nil {
				seen[k] = map[string]int{}
			}
			seen[k][d.stream]++
			if slices.Contains(g.refusedRs, strings.TrimPrefix(strings.TrimPrefix(d.d.Reason, engine.ReleasedReason), engine.SkippedReason)) {
				o.fail("%s was told a Drop for an action the engine refused: %+v", g.name, d.d)
			}
		}
		for _, l := range g.lost {
			var count int64
			dropped := map[int64]bool{}
			for k, by := range seen {
				if k.reason != l.reason {
					continue
				}
				delete(seen, k)
				if k.first < l.first || k.last > l.last {
					o.fail("%s's Drop of seqs %d-%d (%q) lies outside what step %d took, %d-%d", g.name, k.first, k.last, k.reason, l.step, l.first, l.last)
				}
				for s, n := range by {
					if n != 1 {
						o.fail("%s's stream %s was told the Drop of seqs %d-%d %d times", g.name, s, k.first, k.last, n)
					}
				}
				if len(by) != g.workers {
					o.fail("the Drop of seqs %d-%d was told to %d of %s's %d streams", k.first, k.last, len(by), g.name, g.workers)
				}
				count += k.last - k.first + 1
				for v := k.first; v <= k.last; v++ {
					if dropped[v] {
						o.fail("%s was told seq %d twice in the Drops of step %d", g.name, v, l.step)
					}
					dropped[v] = true
				}
			}
			if count != l.unprocessed {
				o.fail("%s's Drops with step %d's reason %q count %d items, want the %d unprocessed it took (seqs %d-%d)",
					g.name, l.step, l.reason, count, l.unprocessed, l.first, l.last)
			}
			// The others of its range it took as processed: their
			// completions ran (before it: a later one is refused).
			for v := l.first; v <= l.last; v++ {
				if !dropped[v] && g.completed[v].Load() == 0 {
					o.fail("step %d took %s's seq %d as processed (no Drop), but its completion never ran", l.step, g.name, v)
					break
				}
			}
		}
		for k := range seen {
			o.fail("%s was told a Drop of f seqs %d-%d (%q) that no release or seek took", g.name, k.first, k.last, k.reason)
		}
		if clean {
			var dropped int64
			for _, q := range o.push.Status().Subscribers {
				if q.Queue == g.name+"/push" {
					dropped = q.Dropped
				}
			}
			if pushDrops != dropped*int64(g.workers) || dropped != o.pushed-g.offered {
				o.fail("%s's push binding dropped %d items (told %d times over %d streams); want the %d offered while it was fenced",
					g.name, dropped, pushDrops, g.workers, o.pushed-g.offered)
			}
		}
		// A lost item's late completion is refused: what completed of
		// the lost items is what the actions took as processed, and the
		// stale tokens.
		var done, processed int64
		for _, l := range g.lost {
			processed += l.processed
			for v := l.first; v <= l.last; v++ {
				c := g.completed[v].Load()
				if b := g.back; b != nil && v > b.to && v <= b.through {
					c = b.completed[v] // before the re-delivery
				}
				if c > 0 {
					done++
				}
			}
		}
		if stale := st.Groups[gi].StaleTokens; done != processed+stale {
			o.fail("%s completed %d of the items it lost: want %d taken as processed + %d refused late (stale)", g.name, done, processed, stale)
		}
		// The loss state changes: each latch and each clear once.
		var latches int
		var clears []string
		for _, c := range o.obs.changes {
			switch {
			case c.Group != g.name:
			case c.Feed != "push":
				o.fail("%s's binding to %s changed loss state: %+v (a positioned feed loses nothing)", g.name, c.Feed, c)
			case c.From == engine.LossUp && c.To == engine.LossLatched:
				latches++
			case c.From == engine.LossLatched && c.To == engine.LossUp:
				clears = append(clears, c.Reason)
			default:
				o.fail("%s's push binding changed %s -> %s (%q): want only latches and clears", g.name, c.From, c.To, c.Reason)
			}
		}
		if latches != g.latches || !slices.Equal(clears, g.clears) {
			o.fail("%s's push binding was told %d latches and clears %q; want %d and %q", g.name, latches, clears, g.latches, g.clears)
		}
	}
}
