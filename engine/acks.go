package engine

import (
	"fmt"

	"github.com/blackbox-audit/blackbox/core"
)

// Committer is how a re-readable source commits what has been processed: it
// is told, in publish order, each acknowledged item's (seq, epoch, position),
// then Commit once per poll. It is called on the goroutine that polls
// (Intake.PollAcks): the source's own, or the engine's stop goroutine once the
// source has stopped; never concurrently.
type Committer interface {
	Acknowledged(seq, epoch int64, pos core.Position)
	Commit() error
}

// CommitReporter is an optional interface of a Committer whose Commit may
// make less durable than it was told: a Kafka source fences the
// acknowledgements of a partition it no longer owns and commits nothing
// for them. After each successful Commit the engine asks it, for every key
// whose items it told since that key's last reported commit, what is
// durable, and calls Observer.Committed for the key only once the durable
// offset reaches the last item told: a COMMIT row never claims a position
// the source did not commit. A key not durable yet is asked again after
// the next Commit while the committer says its commits may still cover it
// (live), and forgotten once they never will (fenced). A Committer without
// it makes durable everything it is told (the file source). Called on the
// goroutine that polls, as the Committer's other methods.
type CommitReporter interface {
	// Durable reports, for c (the last item of its key told to the
	// committer: its sequence, epoch and position), the offset of that
	// key in c's position space (its epoch) that the source's commits
	// made durable, and live false once no later commit will cover c
	// (its key was revoked, lost, or assigned again since it was
	// published, or its position space is gone: its acknowledgement is
	// fenced).
	Durable(c Commit) (offset int64, live bool)
}

// pollAcks is Intake.PollAcks. A backwards seek pending is applied
// between two rounds of telling: the first tells the committer (and
// commits) what was acknowledged before it, so that the source keeps
// every other group at the progress it made up to the seek, not at its
// last commit; the second what the source's move back leaves to tell.
func (f *Feed) pollAcks() (int, error) {
	f.pollMu.Lock()
	defer f.pollMu.Unlock()
	told := 0
	if f.rewinding.Load() {
		n, err := f.tell()
		if err != nil {
			return n, err
		}
		if err := f.applyRewind(); err != nil {
			return n, err
		}
		told = n
	}
	n, err := f.tell()
	return told + n, err
}

// tell tells the committer what was acknowledged since the last poll and
// commits it (pollMu held).
func (f *Feed) tell() (int, error) {
	f.mu.Lock()
	c := f.committer
	gc, _ := c.(GroupCommitter)
	if gc != nil && f.severalGroups() {
		f.gacks = f.groupAcks(f.gacks[:0]) // before the due entries leave the window
	}
	acks := f.win.PopDue(f.acks[:0])
	if _, ok := c.(Rewinder); ok {
		f.rememberAcks(acks)
	}
	if c != nil && len(acks) > 0 {
		if f.uncommitted == 0 {
			f.uncommittedAt = acks[0].At
		}
		f.uncommitted += len(acks)
	}
	pending := f.uncommitted
	f.mu.Unlock()
	f.acks = acks
	if c == nil || pending == 0 && len(f.gacks) == 0 {
		return 0, nil
	}
	hook := f.eng.cfg.Observer.Committed
	for _, a := range acks {
		if a.Seq <= f.rewoundAt {
			continue // published before a backwards seek: the source's commit is below it
		}
		c.Acknowledged(a.Seq, a.Epoch, a.Pos)
		if hook != nil {
			f.noteCommit(Commit{Seq: a.Seq, Epoch: a.Epoch, Position: a.Pos})
		}
	}
	if gc != nil {
		for _, a := range f.gacks {
			gc.GroupAcknowledged(a.group, a.c)
		}
	}
	if len(acks) > 0 {
		f.lastAcked = acks[len(acks)-1].Seq
	}
	if err := c.Commit(); err != nil {
		return len(acks), fmt.Errorf("engine: feed %q commit: %w", f.name, err)
	}
	if hook != nil {
		f.reportCommits(c, hook)
	}
	f.mu.Lock()
	f.acknowledged.Store(f.lastAcked)
	f.uncommitted = 0
	f.mu.Unlock()
	f.eng.watch.note()
	return len(acks), nil
}

// reportCommits calls hook for each key told to the committer whose
// position the last Commit made durable (pollMu held): every such key for
// a plain Committer; for a CommitReporter, those whose durable offset
// reaches the last item told, those not yet durable being kept for the
// next Commit while live, forgotten once fenced.
func (f *Feed) reportCommits(c Committer, hook func(string, Commit)) {
	rep, _ := c.(CommitReporter)
	kept := f.committing[:0]
	for _, cm := range f.committing {
		if rep != nil {
			if off, live := rep.Durable(cm); off < cm.Position.Offset {
				if live {
					kept = append(kept, cm) // not durable yet
				}
				continue // else fenced: never committed
			}
		}
		hook(f.name, cm)
	}
	clear(f.committing[len(kept):])
	f.committing = kept
}

// noteCommit keeps cm as the last item of its key told to the committer
// (pollMu held).
func (f *Feed) noteCommit(cm Commit) {
	for i := range f.committing {
		if f.committing[i].Position.Key == cm.Position.Key {
			f.committing[i] = cm
			return
		}
	}
	f.committing = append(f.committing, cm)
}
