package engine

import (
	"log/slog"
	"slices"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/internal/window"
)

// GroupCommitter is an optional interface of a Committer whose source
// keeps, with the feed's commit, each group's own progress: the feed still
// commits at its slowest group (what a restart reads from), and a group
// ahead of it has its own completed prefix kept too, so that a restart
// does not hand it again what it completed (Intake.SkipCompleted).
//
// Before each Commit (Intake.PollAcks), the engine tells it, for every
// group subscribed to the feed and every key whose last item in the
// group's completed prefix moved since it was last told, that item: its
// sequence, epoch and position. The group's completed prefix is the
// longest run of the feed's items, in publish order, each published while
// the group had a queue of the feed and none waiting for a queue of the
// group (each was processed there, and made durable by its processing
// checkpoint, or not offered to it: dropped, released by an operator,
// completed in an earlier run), the items the feed acknowledged
// included. The items are told in publish order per group, so a later one
// of a key replaces an earlier one. The committer writes a group's
// progress together with the feed's commit (never with a commit that
// failed), never ahead of what it was told: a source that loses part of a
// write must lose it whole or keep what it held (a restart then
// re-delivers, never skips). Called on the goroutine that polls, as the
// Committer's other methods.
type GroupCommitter interface {
	GroupAcknowledged(group string, c Commit)
}

// completedReason is said in the log line of items not handed again to a
// group that completed them: in an earlier run (a restart), or before a
// backwards seek of another group made the source read them again.
const completedReason = "completed already (in an earlier run, or before a seek back of another group read them again; Intake.SkipCompleted)"

// completedPrefix is what a source said a group completed in an earlier
// run (Intake.SkipCompleted): the items of the position space (epoch,
// key) at or before offset.
type completedPrefix struct {
	group  string
	epoch  int64
	key    string
	offset int64
}

// skipCompleted is Intake.SkipCompleted.
func (f *Feed) skipCompleted(group string, epoch int64, pos core.Position) {
	if !f.honourCompleted {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.ContainsFunc(f.all, func(b *binding) bool { return b.group.name == group }) {
		return // no queue of the group: nothing to skip for it
	}
	for i, c := range f.completed {
		if c.group == group && c.epoch == epoch && c.key == pos.Key {
			f.completed[i].offset = max(c.offset, pos.Offset)
			return
		}
	}
	f.completed = append(f.completed, completedPrefix{group: group, epoch: epoch, key: pos.Key, offset: pos.Offset})
}

// completedBy reports whether b's group completed the item at (epoch,
// pos) in an earlier run (lock held). A prefix the feed's items went
// past is forgotten: positions of a space only grow.
func (f *Feed) completedBy(b *binding, epoch int64, pos core.Position) bool {
	for i := 0; i < len(f.completed); i++ {
		c := &f.completed[i]
		if c.group != b.group.name || c.epoch != epoch || c.key != pos.Key {
			continue
		}
		if pos.Offset <= c.offset {
			return true
		}
		f.completed = append(f.completed[:i], f.completed[i+1:]...)
		return false
	}
	return false
}

// notHanded counts an item b's group completed already (in an earlier run,
// or before another group's seek back) and is not handed again (lock held): the first of the queue is logged.
func (f *Feed) notHanded(b *binding, seq int64, pos core.Position) {
	if b.completed.Add(1) == 1 {
		f.notef(slog.LevelInfo, "queue %s: items its group %s are not handed to it again, from seq %d at %s; counted in its status (alreadyCompleted)",
			b.name, completedReason, seq, pos)
	}
}

// groupProgress is what the feed told a GroupCommitter of one group: the
// sequence through which its completed prefix was read (scanned), and,
// per key, the last item of the prefix, those not told yet named in
// untold.
type groupProgress struct {
	g       *group
	scanned int64
	last    map[string]Commit
	untold  []string
}

// groupAcks appends, for every group of the feed's live queues, the last
// item per key of its completed prefix that moved since it was last
// appended (lock held). The prefix is read on from where the last call
// stopped: an entry that waits for none of the group's queues never waits
// for one again (queues' acknowledgement points only grow, and Forget
// only clears), so the scan costs the entries new to it.
func (f *Feed) groupAcks(out []groupAck) []groupAck {
	for _, b := range f.targets {
		g := b.group
		var p *groupProgress
		for _, x := range f.progress {
			if x.g == g {
				p = x
				break
			}
		}
		if p == nil {
			p = &groupProgress{g: g, last: map[string]Commit{}}
			f.progress = append(f.progress, p)
		}
		if p.scanned == f.seq {
			continue // two queues of one group, or nothing new
		}
		var run *window.Entry[*binding] // the last entry of the current run of one key
		keep := func() {
			if run == nil {
				return
			}
			if !slices.Contains(p.untold, run.Pos.Key) {
				p.untold = append(p.untold, run.Pos.Key)
			}
			p.last[run.Pos.Key] = Commit{Seq: run.Seq, Epoch: run.Epoch, Position: run.Pos}
			p.scanned = run.Seq
		}
		i := f.firstAfter(p.scanned)
		for ; i < f.win.Len(); i++ {
			en := f.win.At(i)
			if waitsForGroup(en.Targets, en.After, g) {
				break
			}
			if run != nil && run.Pos.Key != en.Pos.Key {
				keep()
			}
			run = en
		}
		keep()
		if i == f.win.Len() {
			// Everything the feed published is done for the group (the
			// entries popped before were scanned before they left).
			p.scanned = f.seq
		}
		for _, k := range p.untold {
			out = append(out, groupAck{group: g.name, c: p.last[k]})
		}
		p.untold = p.untold[:0]
	}
	return out
}

// severalGroups reports whether queues of more than one group took part in
// the feed in this run (lock held). With one group, its completed prefix
// never passes the feed's commit (every entry waits for its queues and
// nobody else's), so telling it would let a restart skip nothing the
// commit does not: the feed tells a GroupCommitter nothing then, and the
// source keeps what it held.
func (f *Feed) severalGroups() bool {
	for _, b := range f.all {
		if b.group != f.all[0].group {
			return true
		}
	}
	return false
}

// groupAck is one GroupAcknowledged call.
type groupAck struct {
	group string
	c     Commit
}

// firstAfter is the index of the window's first entry of a sequence past
// seq (lock held): entries are in sequence order.
func (f *Feed) firstAfter(seq int64) int {
	lo, hi := 0, f.win.Len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f.win.At(m).Seq <= seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// waitsForGroup reports whether an entry published for targets (at the
// queue positions after) is not done for g: it waits for a queue of g (one
// it was offered to that has not processed it), or g had no queue of the
// feed when it was published (g never had the item: a restart with g
// subscribed from the start would hand it the item, so it is no part of
// g's progress). An entry not offered to g's queue (dropped there,
// released, completed in an earlier run) is done.
func waitsForGroup(targets []*binding, after []int64, g *group) bool {
	had := false
	for j, x := range targets {
		if x.group != g {
			continue
		}
		had = true
		if after[j] != 0 && x.AckPoint() < after[j] {
			return true
		}
	}
	return !had
}
