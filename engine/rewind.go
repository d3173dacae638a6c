package engine

import (
	"fmt"
	"maps"
	"slices"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/internal/window"
)

// Rewinder is an optional interface of a Committer whose source can read
// its items again from an earlier position, for Engine.Seek's backwards
// seek (a re-delivery to one group).
//
// Rewind is called once per backwards seek and key moved back (below), on
// the goroutine that polls the feed's acknowledgements (Intake.PollAcks,
// before it tells the committer anything), after the seek returned. The
// source then:
//   - lowers its durable commit to r.To (or keeps it where it is when it
//     is lower), keeping each group of r.Others at least at the progress
//     it had (the commit it had, or its own progress if it kept one:
//     GroupCommitter), and r.Group's progress at r.To, in one durable
//     write, before it returns: a restart after it hands r.Group again
//     every item after r.To and the other groups nothing they completed;
//   - reads again from the item after r.To, its next items published
//     (TryPublish) being those, in order;
//   - returns the position of the last item of r.To's key it had
//     published (through): the feed hands the items re-read up to it to
//     r.Group only (every other group has them already), the ones after
//     it to every group.
//
// r.To is of the epoch its key's items are read in now. When the feed's
// items after the seek's target are of several keys (a Kafka topic's
// partitions), the engine asks one Rewind per key, each r.To that key's
// last item at or before the target (the target's key first, then the
// others in key order), all before the feed takes anything: each is its
// own durable write (a crash between two
// leaves the keys not yet moved back where they were: nothing is lost,
// part of the move back is). After a Rewind the feed tells the committer
// (Acknowledged) only the items published after it, and a group's progress
// told (GroupCommitter) may be below what it was told before: a source
// keeps the highest of the epoch for the groups of r.Others. An error
// fails the source as a failed Commit does, and the feed takes nothing
// more; the Rewinds already applied are not asked again.
type Rewinder interface {
	Rewind(r Rewind) (through core.Position, err error)
}

// RewindChecker is an optional interface of a Rewinder that knows, before
// a backwards seek is made, that it could not apply it (a group whose
// progress it cannot keep, a target in a file or partition it no longer
// reads): Engine.Seek calls CheckRewind with the Rewind it would ask, dry
// run or not, after its own checks and before it changes anything, with
// the engine's and the feed's locks held, on the operator's goroutine
// (concurrently with the source's Run: it must be safe for that, and must
// not call into the engine); once per key moved back. An error refuses the seek
// (ErrSeekUnsupported, wrapping it), changing nothing; nil promises that
// Rewind will apply it unless the source fails (its error then fails the
// source, as a failed Commit does).
type RewindChecker interface {
	CheckRewind(r Rewind) error
}

// Rewind is what a backwards seek asks a Rewinder: a plain value.
type Rewind struct {
	// Group is the group moved back; To the item of one key through which
	// it is done after the seek (its sequence, epoch and position): it is
	// handed every item of that key after it again.
	Group string
	To    Commit
	// Others are the feed's other groups (every group that had a queue of
	// it in this run): their progress stays where it is.
	Others []string
}

// rewindHistory bounds the positions of acknowledged items a feed with a
// Rewinder keeps, for a backwards seek's target: a target acknowledged
// longer ago is refused (ErrSeekUnsupported).
const rewindHistory = 4096

// rewindReq is a backwards seek not yet applied by the source (f.mu):
// one Rewind per key of the items after the target, rs[0] the target's
// own; done of them applied, throughs what each returned.
type rewindReq struct {
	rs       []Rewind
	done     int
	throughs []core.Position
	through  int64 // the feed's last sequence at the seek
	failed   error // the source's Rewind failed (the status says so)
}

// locate returns the epoch and position of item seq, as the window or the
// history of acknowledged items knows it (f.mu held).
func (f *Feed) locate(seq int64) (Commit, bool) {
	for i := 0; i < f.win.Len(); i++ {
		if en := f.win.At(i); en.Seq == seq {
			return Commit{Seq: seq, Epoch: en.Epoch, Position: en.Pos}, true
		}
	}
	for _, c := range f.history {
		if c.Seq == seq {
			return c, true
		}
	}
	return Commit{}, false
}

// rememberAcks keeps the positions of acknowledged items for a backwards
// seek's target, the last rewindHistory of them in a ring (f.mu held).
func (f *Feed) rememberAcks(acks []window.Ack) {
	for _, a := range acks {
		c := Commit{Seq: a.Seq, Epoch: a.Epoch, Position: a.Pos}
		if len(f.history) < rewindHistory {
			f.history = append(f.history, c)
			continue
		}
		f.history[f.hnext] = c
		f.hnext = (f.hnext + 1) % rewindHistory
	}
}

// keyTargets returns, for each key of the items after seq the feed knows
// of other than key, its last item at or before seq, in key order, and
// the epoch of each key's last item; missing names a key of which the
// feed knows no item at or before seq (f.mu held).
func (f *Feed) keyTargets(seq int64, key string) (targets []Commit, latest map[string]int64, missing string) {
	last := map[string]Commit{}  // per key, the last item at or before seq
	after := map[string]Commit{} // per key, the last item after seq
	note := func(c Commit) {
		m := last
		if c.Seq > seq {
			m = after
		}
		if x, ok := m[c.Position.Key]; !ok || c.Seq > x.Seq {
			m[c.Position.Key] = c
		}
	}
	for _, c := range f.history {
		note(c)
	}
	for i := 0; i < f.win.Len(); i++ {
		en := f.win.At(i)
		note(Commit{Seq: en.Seq, Epoch: en.Epoch, Position: en.Pos})
	}
	latest = map[string]int64{}
	for k, c := range after {
		latest[k] = c.Epoch
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if k == key {
			continue
		}
		c, ok := last[k]
		if !ok {
			return nil, nil, k
		}
		targets = append(targets, c)
	}
	return targets, latest, ""
}

// seekBackLocked is a backwards seek of queue b of g to target, planned
// in p (e.mu and f.mu held): the checks that refuse it change nothing.
func (e *Engine) seekBackLocked(f *Feed, g *group, b *binding, p SeekPlan, target int64, opts SeekOptions) (SeekPlan, error) {
	refuse := func(format string, args ...any) (SeekPlan, error) {
		return SeekPlan{}, fmt.Errorf("%w: a backwards seek of group %q on feed %q to seq %d: %s", ErrSeekUnsupported,
			g.name, f.name, target, fmt.Sprintf(format, args...))
	}
	if _, ok := f.committer.(Rewinder); !ok {
		return refuse("its source cannot read again (not an engine.Rewinder)")
	}
	var others []string
	for _, x := range f.all {
		if x.group != g && !slices.Contains(others, x.group.name) {
			others = append(others, x.group.name)
		}
	}
	if len(others) > 0 {
		if _, ok := f.committer.(GroupCommitter); !ok || !f.honourCompleted {
			return refuse("the feed has other groups and does not keep their own progress (a GroupCommitter and FeedConfig.SkipCompleted): a restart would hand them again what they completed")
		}
	}
	if p.Unprocessed > 0 {
		return refuse("queue %s holds %d items the group has not completed (seqs %d-%d): their seqs would have no row in its streams; let it process them, or release them first (a recorded loss)",
			b.name, p.Unprocessed, p.FirstSeq, p.LastSeq)
	}
	for _, x := range f.all {
		if x.group == g && x != b && f.win.WaitsFor(x) {
			return refuse("its removed queue %s generation %d still holds items (release it first)", x.name, x.gen)
		}
	}
	if f.rewind != nil {
		return refuse("the move back of group %q is not applied by the source yet", f.rewind.rs[0].Group)
	}
	to, ok := f.locate(target)
	if target < 1 || !ok {
		return refuse("the feed does not know that item's position (it keeps the last %d acknowledged, and the window's)", rewindHistory)
	}
	more, latest, missing := f.keyTargets(target, to.Position.Key)
	if missing != "" {
		return refuse("the feed's items after it are of key %q too, and the feed knows no item of that key at or before it (it keeps the last %d acknowledged, and the window's): where that key stood is not known",
			missing, rewindHistory)
	}
	rs := []Rewind{{Group: g.name, To: to, Others: others}}
	for _, c := range more {
		rs = append(rs, Rewind{Group: g.name, To: c, Others: others})
	}
	for _, r := range rs {
		// Each key's target is of the epoch its items are read in now (a
		// key with no item after the target: the feed's).
		now, ok := latest[r.To.Position.Key]
		if !ok {
			now = f.epoch
		}
		if r.To.Epoch != now {
			return refuse("key %q's item at or before it is of epoch %d, the source now reads epoch %d (an earlier file may be gone)",
				r.To.Position.Key, r.To.Epoch, now)
		}
	}
	if c, ok := f.committer.(RewindChecker); ok {
		for _, r := range rs {
			if err := c.CheckRewind(r); err != nil {
				return SeekPlan{}, fmt.Errorf("%w: a backwards seek of group %q on feed %q to seq %d: the source refuses it: %w", ErrSeekUnsupported,
					g.name, f.name, target, err)
			}
		}
	}
	p.After, p.Redelivery, p.Loss = target, true, false
	p.Redelivered = f.seq - target
	p.FirstSeq, p.LastSeq = target+1, f.seq
	if opts.DryRun {
		return p, nil
	}
	if err := e.acted(f, b, p, opts); err != nil {
		return SeekPlan{}, err
	}
	// The queue holds nothing unprocessed: its processed items held in the
	// window wait for it no more (they have their rows), and it is
	// replaced, spending its generation.
	b.seal(true)
	f.win.Forget(b, 0, nil)
	var m marks
	b.takeMarks(b.q.Tail(), &m, true)
	g.queueReleased(m)
	p.Replacement = e.replaceLocked(f, b)
	f.rewind = &rewindReq{rs: rs, through: f.seq}
	f.rewinding.Store(true)
	return p, nil
}

// applyRewind has the source apply the backwards seek pending, if any
// (pollMu held, f.mu not): the items it reads again up to what it had
// published are handed to the sought group only, and the acknowledgements
// of the items published before the seek are no longer told to the
// committer (the commit is the source's, lowered).
func (f *Feed) applyRewind() error {
	if !f.rewinding.Load() {
		return nil // no lock taken at each poll
	}
	f.mu.Lock()
	req := f.rewind
	f.mu.Unlock()
	if req == nil {
		return nil
	}
	for req.done < len(req.rs) {
		r := req.rs[req.done]
		through, err := f.committer.(Rewinder).Rewind(r)
		if err != nil {
			f.mu.Lock()
			req.failed = err
			f.mu.Unlock()
			f.eng.watch.note()
			return fmt.Errorf("engine: feed %q rewind of group %q to seq %d (key %q): %w", f.name, r.Group, r.To.Seq, r.To.Position.Key, err)
		}
		req.throughs = append(req.throughs, through)
		req.done++
	}
	group, others := req.rs[0].Group, req.rs[0].Others
	f.mu.Lock()
	// The sought group is handed everything it said it completed in an
	// earlier run, again; the others nothing read again up to each key's
	// through.
	f.completed = slices.DeleteFunc(f.completed, func(c completedPrefix) bool { return c.group == group })
	for k, r := range req.rs {
		to, through := r.To, req.throughs[k]
		for _, h := range others {
			i := slices.IndexFunc(f.completed, func(c completedPrefix) bool {
				return c.group == h && c.epoch == to.Epoch && c.key == through.Key
			})
			if i < 0 {
				f.completed = append(f.completed, completedPrefix{group: h, epoch: to.Epoch, key: through.Key, offset: through.Offset})
			} else {
				f.completed[i].offset = max(f.completed[i].offset, through.Offset)
			}
		}
	}
	// The group's progress is read on from the first item read again (an
	// entry made now if no poll read it yet: a scan from the window's start
	// would find the items before the seek done for it).
	i := slices.IndexFunc(f.progress, func(p *groupProgress) bool { return p.g.name == group })
	if i < 0 {
		f.progress = append(f.progress, &groupProgress{g: f.eng.gByN[group], last: map[string]Commit{}})
		i = len(f.progress) - 1
	}
	p := f.progress[i]
	p.scanned, p.untold = req.through, p.untold[:0]
	clear(p.last)
	for _, r := range req.rs {
		p.last[r.To.Position.Key] = r.To
	}
	f.rewoundAt = max(f.rewoundAt, req.through)
	f.rewind = nil
	f.rewinding.Store(false)
	f.mu.Unlock()
	f.signalReady()
	f.eng.watch.note() // the feed may be settled now
	return nil
}
