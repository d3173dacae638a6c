package filesource

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// committer commits acknowledged offsets of the current epoch into the
// pointer file. It is used by one goroutine at a time: the source's (Run,
// which polls), then the engine's stop after Run returned.
type committer struct {
	s         *Source
	epoch     int64
	acked     int64 // the highest acknowledged offset of epoch
	committed int64 // the offset in the pointer file

	// moves are the files read after the one the pointer describes, in
	// order, each with the end of the lines published from the file before
	// it (in that file's positions). The pointer moves to a file only once
	// every line of the files before it is acknowledged: acked reaches the
	// oldEnd (not for a move after a loss), or an acknowledgement of the
	// file's own epoch arrives (acknowledgements come in publish order).
	// head, when not nil, is the header of epoch's file, not yet written.
	moves []move
	head  *Pointer

	// waiting: head follows a loss counted at the start, and the pointer
	// file still describes the file lost from: only Commit writes head (or
	// the header of a file after it), which the engine calls only with the
	// acknowledgement of an item read after the loss, so once the loss's
	// LOST row, written before that item's rows, is recorded.
	waiting bool

	// groups is each group's own progress the engine told
	// (engine.GroupCommitter): the last line of its completed prefix,
	// written with the pointer's offset while of its epoch and past it.
	groups map[string]GroupProgress
}

// A move is a file read after the one before it: hdr its header, oldEnd
// the end of the lines published from the file before it. lost: the bytes
// of the file before it after those lines were counted lost (it was
// truncated or rewritten under the reader, no copy found): the pointer
// moves to it only with an acknowledgement of its own epoch, or of a file
// after it, never at oldEnd, so never before the loss is recorded.
//
// tail: lost, because the file before it ended with an oversized line
// counted lost (no line of that file comes after the loss); that file is
// still read on a restart, so the source holds the file's lines (holding)
// only until every line published before is committed, at oldEnd.
type move struct {
	hdr    Pointer
	oldEnd int64
	lost   bool
	tail   bool
}

// reset moves to a new epoch: acknowledgements of the old one are never
// committed, and what was acknowledged before is forgotten.
func (c *committer) reset(epoch, off int64) {
	c.epoch, c.acked, c.committed = epoch, off, off
	c.moves, c.head, c.waiting = nil, nil, false
}

// moveTo records np, the header of the file read from now on (oldEnd: the
// end of the lines published from the file before it). The pointer moves
// to it at once if every line before is acknowledged, else at the commit
// that completes them. keep: the same position space goes on in the new
// file (only the identity and the fingerprint change). lost: the rest of
// the file before it was counted lost (see move): np is written as the
// pointer file's pending header at once (pointerFile.pending), so that a
// restart reads the file under np's epoch, and the pointer moves to it
// only with the acknowledgement of an item of its own.
func (c *committer) moveTo(np Pointer, oldEnd int64, keep, lost, tail bool) error {
	if keep {
		switch {
		case len(c.moves) > 0:
			np.Offset = c.moves[len(c.moves)-1].hdr.Offset
			c.moves[len(c.moves)-1].hdr = np
			return nil
		case c.head != nil:
			c.head = &np
			return nil
		}
		np.Offset = c.committed
		return c.s.writePointer(np)
	}
	c.moves = append(c.moves, move{np, oldEnd, lost, tail})
	if lost {
		c.s.pending = np
		if err := c.s.writePending(np); err != nil {
			return err
		}
	}
	if c.advance() && !c.waiting {
		return c.writeHead()
	}
	return nil
}

// advance moves epoch on past every file whose lines are all acknowledged
// (up to a move after a loss); it reports whether the pointer's header
// must be rewritten.
func (c *committer) advance() bool {
	for len(c.moves) > 0 && !c.moves[0].lost && c.acked >= c.moves[0].oldEnd {
		m := c.moves[0]
		c.moves = c.moves[1:]
		c.passed(m)
		c.epoch, c.acked = m.hdr.Epoch, m.hdr.Offset
		c.head = &m.hdr
	}
	return c.head != nil
}

// passed forgets the pending header when it is m's: the pointer moves to
// m's file, or past it.
func (c *committer) passed(m move) {
	if c.s.pending.Epoch == m.hdr.Epoch {
		c.s.pending = Pointer{}
	}
}

// writeHead writes epoch's file's header at the acknowledged offset.
func (c *committer) writeHead() error {
	h := *c.head
	h.Offset = c.acked
	if c.s.pending.Epoch == h.Epoch {
		c.s.pending = Pointer{} // the file read after a loss at the start
	}
	if err := c.s.writePointer(h); err != nil {
		return err
	}
	c.head, c.committed, c.waiting = nil, h.Offset, false
	return nil
}

// Acknowledged records an acknowledged position of the current epoch, or
// of a later file's (the files before it are then complete).
func (c *committer) Acknowledged(_, epoch int64, pos core.Position) {
	if epoch == c.epoch {
		c.acked = max(c.acked, pos.Offset)
		return
	}
	for k, m := range c.moves {
		if m.hdr.Epoch == epoch {
			for _, p := range c.moves[:k+1] {
				c.passed(p)
			}
			c.moves = c.moves[k+1:]
			c.epoch, c.acked = epoch, pos.Offset
			c.head = &m.hdr
			return
		}
	}
}

// GroupAcknowledged keeps the last line of a group's completed prefix
// (engine.GroupCommitter), written by the next Commit: the highest told of
// its epoch (after a backwards seek the engine may tell a group less than
// before; the sought group's was lowered by Rewind itself).
func (c *committer) GroupAcknowledged(group string, cm engine.Commit) {
	if c.groups == nil {
		c.groups = map[string]GroupProgress{}
	}
	if g, ok := c.groups[group]; ok && g.Epoch == cm.Epoch && g.Offset >= cm.Position.Offset {
		return
	}
	c.groups[group] = GroupProgress{Group: group, Epoch: cm.Epoch, Offset: cm.Position.Offset}
}

var _ engine.GroupCommitter = (*committer)(nil)

// Commit writes the acknowledged offset, forward only; once the pointer's
// file is complete, the header of the file after it. Then, with it, each
// group's own progress that is of the pointer's epoch and past its offset
// and that the file does not hold yet (a header write carries what the
// file held of its epoch).
func (c *committer) Commit() error {
	stored, err := c.s.commitGroups(c.groups)
	if err != nil {
		return err
	}
	wrote, err := c.commitFeed()
	if err == nil && stored && !wrote {
		err = c.s.flushPointer()
	}
	return err
}

// commitFeed is Commit's write of the feed's position; wrote says it
// wrote the pointer file (flushed, or replaced whole).
func (c *committer) commitFeed() (wrote bool, err error) {
	if c.advance() {
		return true, c.writeHead()
	}
	if c.acked <= c.committed {
		return false, nil
	}
	if err := c.s.commit(c.acked); err != nil {
		return true, err
	}
	c.committed = c.acked
	return true, nil
}

// commitGroups stores into the pointer file the groups' progress that
// counts with its header (of its epoch, past its offset) and that the file
// does not hold yet, for the feed's commit that follows to flush with its
// own (stored: something was stored and not flushed; a file not mapped is
// flushed at once). Stored before the feed's offset or after, each value
// is what its group completed: a kill between them skips nothing. A group
// whose name is longer than GroupNameMax, or past the GroupSlots the file
// holds, keeps none (warned once each).
func (s *Source) commitGroups(groups map[string]GroupProgress) (stored bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []GroupProgress
	for name, g := range groups {
		if g.Epoch != s.ptr.hdr.Epoch || g.Offset <= s.ptr.hdr.Offset || s.ptr.holds(g) {
			continue
		}
		if len(name) > GroupNameMax {
			s.warnGroup(name, fmt.Sprintf("its name is longer than %d bytes", GroupNameMax))
			continue
		}
		due = append(due, g)
	}
	if len(due) == 0 {
		return false, nil
	}
	slices.SortFunc(due, func(a, b GroupProgress) int { return strings.Compare(a.Group, b.Group) })
	full, stored, err := s.ptr.setGroups(due)
	for _, name := range full {
		s.warnGroup(name, fmt.Sprintf("the pointer file holds %d groups' progress at most", GroupSlots))
	}
	return stored, err
}

// flushPointer flushes what was stored into the mapped pointer file.
func (s *Source) flushPointer() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ptr.flush()
}

// warnGroup warns, once per group and run, that the pointer file keeps
// no progress of the group's own, and why (s.mu held).
func (s *Source) warnGroup(group, why string) {
	if s.unkept[group] {
		return
	}
	if s.unkept == nil {
		s.unkept = map[string]bool{}
	}
	s.unkept[group] = true
	s.logf("pointer %s keeps no progress of group %q (%s): a restart delivers it again every line after the pointer's offset", s.opts.Pointer, group, why)
}

// writePointer writes a whole header, keeping the pending header of a
// file the pointer has not moved to yet.
func (s *Source) writePointer(h Pointer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ptr.store(h, s.pending)
}

// writePending writes np as the pointer file's pending header, keeping
// its header.
func (s *Source) writePending(np Pointer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ptr.store(s.ptr.hdr, np)
}

// commit writes off into the pointer: one flushed store, or, while the
// fingerprint covers less than FingerprintMax bytes and the reader read
// more of the file the pointer describes, a whole new header with the
// fingerprint grown from the bytes the reader read (its head, never what
// the file holds now), after checking that the file's first bytes are
// still those: a file rewritten in place keeps its old fingerprint, and the
// rewrite is noticed at the next check of the source, or at a restart.
func (s *Source) commit(off int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.ptr.hdr
	if h.FingerprintLen < FingerprintMax && s.rd != nil && s.file != nil && len(s.com.moves) == 0 &&
		s.com.head == nil && h.Identity == s.fileID &&
		h.Epoch == s.epoch && int64(len(s.rd.head)) > h.FingerprintLen {
		changed, err := s.prefixChanged()
		if err != nil {
			return err
		}
		if !changed {
			h2 := header(s.rd.head, h.Identity, off, h.Epoch)
			return s.ptr.store(h2, s.pending)
		}
	}
	return s.ptr.setOffset(off)
}
