package filesource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/blackbox-audit/blackbox/engine"
)

// verdict decides whether a file (size bytes, identity id, first bytes
// head) is still the file p describes, read up to at: keep, or the reason
// it is not (truncated, replaced). Never a file time.
func (s *Source) verdict(head []byte, size int64, id uint64, p Pointer, at int64) (keep bool, why string) {
	if size < at {
		return false, fmt.Sprintf("truncated (%d bytes, shorter than the %d already read)", size, at)
	}
	sameID := p.Identity == 0 || id == 0 || p.Identity == id
	if p.FingerprintLen > 0 {
		if int64(len(head)) < p.FingerprintLen {
			return false, fmt.Sprintf("truncated (%d bytes, shorter than its %d fingerprinted bytes)", size, p.FingerprintLen)
		}
		if fingerprintOf(head[:p.FingerprintLen]) != p.Fingerprint {
			return false, fmt.Sprintf("replaced (its first %d bytes differ)", p.FingerprintLen)
		}
	} else if !sameID {
		return false, "replaced (another file, and no fingerprint to match)"
	}
	if !sameID {
		s.logf("input %s is another file (identity %x, was %x) with the same first %d bytes: keeping the pointer and its epoch", s.path, id, p.Identity, p.FingerprintLen)
	}
	return true, ""
}

// prefixChanged reports whether the open file's first bytes are no longer
// those the reader read (its head): the file was truncated or rewritten in
// place.
func (s *Source) prefixChanged() (bool, error) {
	h := s.rd.head
	if len(h) == 0 {
		return false, nil
	}
	if s.scratch == nil {
		s.scratch = make([]byte, FingerprintMax)
	}
	b := s.scratch[:len(h)]
	n, err := s.file.ReadAt(b, 0)
	if n < len(h) {
		if err != nil && err != io.EOF {
			return false, fileErr("read", s.path, err)
		}
		return true, nil
	}
	if !bytes.Equal(b, h) {
		return true, nil
	}
	s.rd.checked = len(h)
	return false, nil
}

// rewritten handles an open file whose first bytes changed under the
// reader, or that is shorter than what was read (truncated, or rewritten
// in place with or without a truncation): the bytes read and not yet
// published may be the new content's, at the old content's offsets, so
// they are discarded. The bytes after the last published line, to the old
// end, are then only in a copy, if any (copytruncate): a tailing source
// looks for it among the rotated siblings (findCopy) and reads it from
// there to its end under the same epoch, then the files rotated after it,
// then the path (readCopy). With no copy, those bytes are a loss (unread,
// counted and warned: whether there were any cannot be known), and the
// file is read again from 0 under a new epoch (switchTo).
func (s *Source) rewritten() (bool, error) {
	if !s.leaving() {
		s.redo = true // nothing read after the change is published meanwhile
		return false, nil
	}
	name := s.path
	if s.switching {
		name = "the rotated " + s.path
	}
	s.logf("input %s was truncated or rewritten in place while being read (its first %d bytes changed, or it is shorter than the %d bytes read): %d bytes read after the last published line are discarded",
		name, len(s.rd.head), s.rd.readOff(), s.rd.buffered())
	published := s.rd.pos // the end of the last line published from it
	s.rd.drop()
	sibs := s.rotatedSiblings()
	if !s.opts.Read.once() { // a once-read never moves on to another file
		if cp, ok := s.findCopy(sibs, published); ok {
			return true, s.readCopy(cp, published)
		}
	}
	s.unreadTail(published, "input "+name, fmt.Sprintf("it was truncated or rewritten in place while being read, and no rotated sibling (%s) is a copy of it holding those bytes", strings.Join(s.rotated, ", ")))
	// The siblings there now hold nothing read from it: never read as
	// rotated after it.
	s.rememberAll(sibs)
	fi, err := s.file.Stat()
	if err != nil {
		return false, fileErr("stat", s.path, err)
	}
	wasSwitching := s.switching
	if err := s.switchTo(s.file, fi, s.fileID, "", true); err != nil {
		return false, err
	}
	s.switching = wasSwitching // a rotated file is still finished before the path
	return true, nil
}

// atEOF is the end of the open file while tailing: check that its first
// bytes did not change under the reader, that the path still names it and
// that it did not shrink; if it was rewritten, read it again; if it was
// replaced, finish it (read it to its end) and reopen. A path with no file
// is not a change.
func (s *Source) atEOF() (progress bool, err error) {
	if s.hookEOF != nil {
		s.hookEOF()
	}
	if changed, err := s.prefixChanged(); err != nil || changed {
		if err != nil {
			return false, err
		}
		return s.rewritten()
	}
	if s.switching {
		return s.reopen()
	}
	st, err := os.Stat(s.path)
	if err != nil {
		s.setState(engine.StateCaughtUp, "")
		return false, nil
	}
	fst, err := s.file.Stat()
	if err != nil {
		return false, fileErr("stat", s.path, err)
	}
	if fst.Size() < s.rd.readOff() {
		return s.rewritten() // truncated, with the same first bytes
	}
	if id := identity(st); id == s.fileID || (id == s.refused && s.openErr != "") {
		s.setState(engine.StateCaughtUp, s.openErr)
		return false, nil
	}
	why := "the input file " + s.path + " was replaced while being read"
	s.logf("%s: reading it to its end, then reopening", why)
	s.switching = true
	s.setState(engine.StateBehind, why)
	return true, nil
}

// holding reports whether a Committed source holds the lines of the file
// it moved to (switchTo) until the pointer describes that file: until
// every line it published from the files before is committed, and the
// pointer's header moved to the file (committer.advance). Meanwhile it
// reads and publishes nothing (the file stays open: a file replaced
// meanwhile is still read), and the duty cycles poll acknowledgements. So
// only the pointer's file ever has lines processed and not committed: a
// restart reads again only lines of the pointer's file, under its epoch,
// and a state that skips by epoch and offset (core.Delivery.AlreadyApplied)
// does not apply them twice. (Without the hold, lines of several files
// were processed past the pointer, and a restart read the files after the
// pointer's under new epochs: a state saved with a later file's epoch took
// the earlier files' lines for new ones, and applied them again.)
func (s *Source) holding() bool {
	if !s.hold {
		return false
	}
	c := &s.com
	switch {
	case c.head != nil:
		return true
	case len(c.moves) == 0:
	case len(c.moves) > 1 || !c.moves[0].tail || c.committed < c.moves[0].oldEnd:
		return true
	}
	s.hold = false
	return false
}

// reopen moves on once the old file was read to its end: to the next file
// rotated after it (nextRotated), if any, else to the file now at the
// path. Anything but a regular file at the path is refused with a warning
// (the old file is read on; the path is tried again at the next end of
// file).
func (s *Source) reopen() (bool, error) {
	if !s.leaving() {
		return false, nil // the old file is read on until the seek is applied
	}
	file, fi, id, err := s.open()
	if next, nfi, sb, ok := s.nextRotated(id); ok {
		if file != nil {
			file.Close()
		}
		if err := s.switchTo(next, nfi, sb.id, sb.name, false); err != nil {
			next.Close()
			return false, err
		}
		return true, nil
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			s.switching = false // no file at the path: read the old one on
			return false, nil
		}
		if msg := fmt.Sprintf("cannot reopen %s: %v", s.path, err); msg != s.openErr {
			s.openErr = msg
			s.logf("%s: the old file is read on; the path is tried again once it names another file", msg)
		}
		s.refused = 0
		if st, err := os.Stat(s.path); err == nil {
			s.refused = identity(st)
		}
		s.switching = false
		s.setState(engine.StateCaughtUp, s.openErr)
		return false, nil
	}
	s.openErr = ""
	if err := s.switchTo(file, fi, id, "", false); err != nil {
		file.Close()
		return false, err
	}
	return true, nil
}

// switchTo moves the reader to file (the file now at the path, or the open
// file itself after an in-place rewrite) once the old reader's lines were
// published, through the same identity check as a restart: the old
// fingerprint (the old reader's head: the bytes it read) against the new
// file's first bytes. A kept file is read on from the old position under
// the same epoch; otherwise from 0 under a new epoch, and, when it is the
// same file (truncated or rewritten in place), a leading run of NUL bytes
// is skipped as a hole.
//
// With a pointer, the pointer keeps describing the old file until every
// line published from it is committed (a crash before re-reads them from
// the old file, found by identity among the rotated siblings); only then
// does it move to the new file.
//
// rotated, when not "", is the name of a file rotated after the old one
// (nextRotated): another file by identity, read from 0 under a new epoch
// with no verdict, and the path is read after it.
//
// lost: the old file's bytes after its last published line were just
// counted lost (rewritten): read from 0, the file is a move after a loss
// (committer.moveTo), which the pointer takes only with the commit of a
// line of its own, so never before the loss is recorded.
func (s *Source) switchTo(file *os.File, fi os.FileInfo, id uint64, rotated string, lost bool) error {
	old, oldID := s.rd, s.fileID
	size := fi.Size()
	name := s.path
	if rotated != "" {
		name = rotated
	}
	head, err := readHead(file, size, name)
	if err != nil {
		return err
	}
	p := header(old.head, s.fileID, old.pos, s.epoch)
	keep, why := false, ""
	if rotated == "" {
		keep, why = s.verdict(head, size, id, p, old.pos)
	}
	var off int64
	epoch := idEpoch(id)
	if keep {
		off, epoch = old.pos, s.epoch
	} else {
		s.replaced.Add(1)
		if s.opts.Read == Committed {
			epoch = newEpoch()
			if pendingFor(s.resume, id, head) {
				// A run before read it from 0 under the pending header's
				// epoch (a move after a loss), and its pointer never moved
				// to it: the same epoch, so that a state keyed by epoch
				// and offset does not apply its lines again.
				epoch = s.resume.Epoch
			}
		}
		s.resume = Pointer{} // only the first file moved to comes right after the pointer's
		msg := fmt.Sprintf("input %s was %s: reading it from 0 under a new epoch", s.path, why)
		if rotated != "" {
			msg = fmt.Sprintf("%s was rotated after the file read before it: reading it from 0 under a new epoch, then %s", rotated, s.path)
		}
		if n := old.buffered(); n > 0 {
			msg += fmt.Sprintf("; %d unterminated bytes at the end of the old file were not published", n)
		}
		s.logf("%s", msg)
	}
	// An oversized line counted lost after the old file's last published
	// line has no item after it in that file: the pointer moves on only
	// with an acknowledgement of the new file's own, which every stream
	// has after the loss's LOST row (a move after a loss, see move.tail).
	tail := old.overAfter && !lost
	if s.opts.Read == Committed {
		if err := s.com.moveTo(header(head, id, off, epoch), old.pubEnd, keep, (lost || tail) && !keep, tail); err != nil {
			return err
		}
	} else if n := old.buffered(); n > 0 && keep {
		s.logf("%d unterminated bytes at the end of the old %s were not published", n, s.path)
	}
	if epoch != s.epoch {
		s.f.SetEpoch(epoch)
		s.epoch = epoch
	}
	if !keep {
		// A move after a loss is not held: the pointer moves to the file
		// only with the commit of a line of its own (the pending header
		// holds its epoch meanwhile). After an oversized last line, it is
		// held until the lines published before are committed (move.tail).
		s.hold = s.hold || (s.opts.Read == Committed && s.published && !lost)
		s.published = false
	}
	s.mu.Lock()
	if file != s.file {
		s.file.Close()
	}
	s.file, s.fileID = file, id
	s.rd = s.newReader(file, name, off, head)
	if !keep && (id == p.Identity || id == s.truncated) {
		s.rd.skip = skipNUL
		s.rd.holeFrom = 0
	}
	if id == s.truncated {
		s.truncated = 0
	}
	s.mu.Unlock()
	s.remember(id, head)
	if oldID != id {
		// The file left is known by the bytes read of it, not only those
		// it had when it was opened: one known empty, removed, and its
		// inode reused by a file rotated later, was taken for it and
		// passed over (torture seed 1796284617677858357).
		s.remember(oldID, old.head)
	}
	if rotated != "" {
		s.switching = true // the path after it
		s.setState(engine.StateBehind, "reading the rotated "+rotated)
		return nil
	}
	s.switching, s.truncated = false, 0
	s.setState(engine.StateBehind, "reopened "+s.path)
	return nil
}
