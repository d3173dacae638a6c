package filesource

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// runState is what a backwards seek's check reads of the run (Source.mu):
// ok, the source reads the file its pointer describes (a reader open, no
// move to a later file pending, no header waiting after a loss, nothing
// held), of epoch; read, the offset of the end of the last line it
// published of that epoch (a move back lowers it to its target; -1: none).
type runState struct {
	ok    bool
	epoch int64
	read  int64
}

var (
	_ engine.Rewinder      = (*committer)(nil)
	_ engine.RewindChecker = (*committer)(nil)
)

// noteReading notes, after each poll, whether the run reads the pointer's
// file (runState). It goes from true to false only in leaving, under the
// same lock as the pin's check; the run's goroutine only.
func (s *Source) noteReading() {
	if s.opts.Read != Committed {
		return
	}
	c := &s.com
	ok := s.rd != nil && !s.hold && len(c.moves) == 0 && c.head == nil && !c.waiting && c.epoch == s.epoch
	s.mu.Lock()
	read := int64(-1)
	if s.lastPub.Epoch == s.epoch {
		read = s.lastPub.Position.Offset
	}
	s.reading = runState{ok: ok && s.ptr.hdr.Epoch == s.epoch, epoch: s.epoch, read: read}
	s.mu.Unlock()
}

// pinned reports whether a backwards seek CheckRewind accepted may still
// wait for the next poll to apply it: the run does not leave the file it
// reads meanwhile (Rewind reads it again).
func (s *Source) pinned() bool { return s.checks.Load() != s.seen }

// leaving is asked before the run leaves the file it reads (a rotation,
// a rewrite under the reader): false while pinned (the caller leaves it
// later); true, and the file is no longer one a backwards seek can read
// again, until the pointer describes the file the run reads next.
func (s *Source) leaving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pinned() {
		return false
	}
	s.reading.ok = false
	return true
}

// CheckRewind refuses, before a backwards seek changes anything, what
// Rewind could not apply (engine.RewindChecker): an error wrapping
// ErrRewind. It runs on the operator's goroutine, concurrently with Run,
// and reads only what Source.mu guards; once it accepts, the run leaves
// not the file it reads until its next poll, which applies the seek.
func (c *committer) CheckRewind(r engine.Rewind) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkRewind(r); err != nil {
		return err
	}
	s.checks.Add(1)
	return nil
}

// checkRewind is the check of r (mu held): the pointer describes the file
// the source reads, of r's epoch, with its groups region; the target is
// not past the last line published (a move back lowers that to its
// target); every group of the feed has a name the region holds, and they
// fit in its slots with the groups whose progress it holds.
func (s *Source) checkRewind(r engine.Rewind) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w to offset %d of epoch %d (pointer %s): %s", ErrRewind, r.To.Position.Offset, r.To.Epoch,
			s.opts.Pointer, fmt.Sprintf(format, args...))
	}
	h := s.ptr.hdr
	switch {
	case !s.reading.ok:
		return refuse("the source does not read the file its pointer describes now (not started, a rotation or a rewrite not yet committed, or a loss at the start): only lines of the pointer's file are read again")
	case r.To.Epoch != s.reading.epoch || r.To.Epoch != h.Epoch:
		return refuse("the source reads epoch %d, its pointer describes epoch %d: the target's file was rotated, truncated or rewritten since", s.reading.epoch, h.Epoch)
	case r.To.Position.Key != "" || r.To.Position.Offset < 0:
		return refuse("not a position of a file (key %q)", r.To.Position.Key)
	case r.To.Position.Offset > s.reading.read:
		// As Rewind refuses it: a target an earlier move back has not read
		// again yet (a seq of the reading before it) is ahead of where the
		// file is read now.
		return refuse("the file is read through offset %d now (an earlier move back's lines not read again yet): the target is ahead of it; seek again once it is read, or to a target at or before it",
			s.reading.read)
	case !s.ptr.region:
		return refuse("the pointer file has no group progress region: the other groups' progress could not be kept")
	}
	names := append([]string{r.Group}, r.Others...)
	for _, g := range s.ptr.groups {
		if g.Group != "" && g.Epoch == h.Epoch && g.Offset > h.Offset && !slices.Contains(names, g.Group) {
			names = append(names, g.Group) // a group of an earlier run whose progress the file keeps
		}
	}
	for _, n := range names {
		if len(n) > GroupNameMax {
			return refuse("group %q has a name longer than %d bytes: the pointer file cannot keep its progress", n, GroupNameMax)
		}
	}
	if len(names) > GroupSlots {
		return refuse("the pointer file keeps %d groups' progress at most, and %d groups (%s) may need it", GroupSlots, len(names), strings.Join(names, ", "))
	}
	return nil
}

// Rewind applies a backwards seek (engine.Rewinder), on the goroutine
// that polls (Run's, or the engine's stop after Run returned): in one
// pointer file write (a temporary file, synced and renamed: a kill leaves
// the old file or the new one), the header's offset comes down to the
// target's (or stays, when lower), each other group keeps at least the
// progress it had (its slot, or the old offset), and r.Group's is the
// target; then the reader reads again from the line after the target, in
// the same file. It returns the position of the last line published. An
// error (the check's, or the write's) wraps ErrRewind or is a *FileError.
func (c *committer) Rewind(r engine.Rewind) (core.Position, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkRewind(r); err != nil {
		return core.Position{}, err
	}
	to := r.To.Position.Offset
	if s.lastPub.Epoch != r.To.Epoch || to > s.lastPub.Position.Offset {
		return core.Position{}, fmt.Errorf("%w to offset %d of epoch %d: the last line published is at %d of epoch %d", ErrRewind,
			to, r.To.Epoch, s.lastPub.Position.Offset, s.lastPub.Epoch)
	}
	h := s.ptr.hdr
	old := max(h.Offset, c.committed, c.acked)
	progress := map[string]int64{}
	for _, g := range s.ptr.groups {
		if g.Group != "" && g.Epoch == h.Epoch && g.Offset > h.Offset {
			progress[g.Group] = g.Offset
		}
	}
	for _, o := range r.Others {
		p := max(progress[o], old)
		if g, ok := c.groups[o]; ok && g.Epoch == h.Epoch {
			p = max(p, g.Offset)
		}
		progress[o] = p
	}
	progress[r.Group] = to
	nh := h
	nh.Offset = min(old, to)
	var groups []GroupProgress
	for name, off := range progress {
		if off > nh.Offset {
			groups = append(groups, GroupProgress{Group: name, Epoch: h.Epoch, Offset: off})
		}
	}
	slices.SortFunc(groups, func(a, b GroupProgress) int { return strings.Compare(a.Group, b.Group) })
	if len(groups) > GroupSlots { // the check counted every group
		return core.Position{}, fmt.Errorf("%w: %d groups' progress, %d slots", ErrRewind, len(groups), GroupSlots)
	}
	if err := s.ptr.storeGroups(nh, s.pending, groups); err != nil {
		return core.Position{}, err
	}
	c.acked, c.committed = nh.Offset, nh.Offset
	if c.groups == nil {
		c.groups = map[string]GroupProgress{}
	}
	for name, off := range progress {
		c.groups[name] = GroupProgress{Group: name, Epoch: h.Epoch, Offset: off}
	}
	if rd := s.rd; rd != nil {
		nrd := s.newReader(s.file, rd.name, to, rd.head)
		nrd.checked = rd.checked
		s.rd, s.redo = nrd, false
	}
	s.logf("%s: read again from offset %d (a backwards seek of group %q), the last line published being at %d; the pointer %s is at %d, was %d",
		s.path, to, r.Group, s.lastPub.Position.Offset, s.opts.Pointer, nh.Offset, old)
	through := s.lastPub.Position
	// The file is read through the target now: a later move back to a
	// line after it, not read again yet, is refused (checkRewind).
	s.lastPub.Position.Offset = to
	s.reading.read = to
	return through, nil
}
