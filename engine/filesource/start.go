package filesource

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// open opens the path without blocking (a FIFO would block open(2)) and
// identifies the opened file by its open descriptor (never whatever the
// path names by then). Anything but a regular file is closed again: an
// error wrapping ErrNotRegular.
func (s *Source) open() (*os.File, os.FileInfo, uint64, error) {
	file, err := openInput(s.path)
	if err != nil {
		return nil, nil, 0, err
	}
	if s.hookOpened != nil {
		s.hookOpened()
	}
	fi, err := file.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w (%s)", ErrNotRegular, fi.Mode().Type())
	}
	if err != nil {
		file.Close()
		return nil, nil, 0, err
	}
	return file, fi, identity(fi), nil
}

func idEpoch(id uint64) int64 {
	if id == 0 {
		return 1
	}
	return int64(id)
}

// readHead reads the first min(size, FingerprintMax) bytes of file: the
// head of a reader that has not read them yet.
func readHead(file *os.File, size int64, path string) ([]byte, error) {
	head := make([]byte, min(size, FingerprintMax), FingerprintMax)
	n, err := file.ReadAt(head, 0)
	if err == io.EOF {
		err = nil // shorter by now: the prefix check notices
	}
	return head[:n], fileErr("read", path, err)
}

// start opens the input file for the first time and decides where to read
// from. ok is false while a tailing source waits for the file to exist.
func (s *Source) start() (ok bool, err error) {
	// The rotated siblings before the path is opened: each was rotated
	// before the file the path names then. (A once-read never moves on to
	// another file; a path with no file yet is looked at again.)
	//
	// The listing and the open are not one step: a rotation between them
	// lists the file it moved nowhere (it was at the path) and opens the
	// one after it, leaving a file rotated before the one opened unknown,
	// read after it, out of rotation order (torture seed
	// 1796281376933206065: a pointer moved past lines never read). So the
	// path's file is identified before the listing and the open is taken
	// only if it is that file; otherwise the path moved on meanwhile:
	// list again.
	var (
		pre  []sibling
		file *os.File
		fi   os.FileInfo
		id   uint64
	)
	for attempt := 1; ; attempt++ {
		before, serr := os.Stat(s.path)
		pre = nil
		if serr == nil && !s.opts.Read.once() {
			pre = s.rotatedSiblings()
		}
		if s.hookListed != nil {
			s.hookListed()
		}
		file, fi, id, err = s.open()
		if err != nil || serr != nil || s.opts.Read.once() || identity(before) == id || attempt == scanAttempts {
			break
		}
		file.Close() // rotated between the listing and the open: list again
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !s.opts.Read.once() {
			s.setState(engine.StateCaughtUp, "waiting for "+s.path+" to exist")
			return false, nil
		}
		return false, fileErr("open", s.path, err)
	}
	size := fi.Size()
	head, err := readHead(file, size, s.path)
	if err != nil {
		file.Close()
		return false, err
	}
	var off int64
	skip := skipNone
	name := s.path // the file read first
	epoch := idEpoch(id)
	if s.opts.Epoch != 0 {
		epoch = s.opts.Epoch
	}
	switch s.opts.Read {
	case Committed:
		var st started
		st, err = s.startPointer(file, size, id, head)
		if err != nil {
			file.Close()
			return false, err
		}
		if st.file != nil { // the pointer's file, found rotated: finish it first
			file.Close()
			file, id, head, name = st.file, st.id, st.head, st.name
			s.switching = true
			// The siblings before it in rotation order were rotated before
			// it (an earlier run read them); those after it, after it: they
			// are read next, in order, then the path.
			var before []sibling
			for _, sb := range pre {
				if compareNatural(sb.name, st.name) < 0 {
					before = append(before, sb)
				}
			}
			pre = before
			if st.pre != nil {
				pre = st.pre
			}
			s.truncated = st.truncated
		}
		off, epoch = st.off, st.epoch
		if st.hole {
			skip = skipNUL
		}
	case Latest:
		off = size
		if size > 0 {
			var b [1]byte
			if _, err := file.ReadAt(b[:], size-1); err != nil {
				file.Close()
				return false, fileErr("read", s.path, err)
			}
			switch b[0] {
			case '\n':
			case '\r':
				skip = skipLF
			default:
				skip = skipRest
			}
		}
	}
	s.f.SetEpoch(epoch)
	s.epoch = epoch
	s.file, s.fileID = file, id
	s.rd = s.newReader(file, name, off, head)
	s.rd.skip = skip
	s.rememberAll(pre)
	s.remember(id, head)
	s.setState(engine.StateBehind, "")
	return true, nil
}

func (s *Source) newReader(file *os.File, name string, off int64, head []byte) *lineReader {
	rd := newLineReader(file, off, s.bufSize)
	rd.name = name
	rd.max = s.maxLine
	rd.head, rd.checked = head, len(head)
	return rd
}

// started is where startPointer says to start: at off under epoch; in file
// (identity id, first bytes head) when not nil: the pointer's file found
// among the rotated siblings, to be read to its end before the path; hole:
// the file was truncated or rewritten in place, a leading run of NUL bytes
// is a hole.
type started struct {
	off, epoch int64
	file       *os.File
	name       string // file's name
	id         uint64
	head       []byte
	hole       bool
	// pre, when not nil: the rotated siblings rotated before file (known,
	// never read after it); nil: those before it in rotation order.
	pre []sibling
	// truncated: the identity of the path's file, truncated after file
	// was copied from it (copytruncate while stopped): read from 0 after
	// it, a leading run of NUL bytes being a hole.
	truncated uint64
}

// startPointer reads the pointer file and checks the input against it: it
// returns where to resume. When the path names another file than the
// pointer's, the pointer's file is looked for among the rotated siblings
// (Options.Rotated) and finished first; when it cannot be found, its bytes
// after the pointer were never read: a loss, said and counted.
//
// What the pointer file holds from the start to the run's first commit
// (record before effect: a restart must find whatever this start found
// until the recording holds it):
//
//   - no pointer yet (none, empty, or a header it cannot use) and a pointer
//     of layout 0 (an offset only): the header of the file at the path, at
//     0 (at the offset, for layout 0) under a new epoch, written at once;
//     it held no position a restart could lose, and the file is then
//     found by identity if it is rotated before the first commit;
//   - the pointer's file, at the path (the same identity, or the same
//     first bytes under another: kept), renamed to a rotated name (found
//     by identity and fingerprint) or copied there (copytruncate, found by
//     fingerprint): the pointer's offset and epoch go on in it, and its
//     header (the identity, the fingerprint grown from the bytes there
//     now) is written at once: nothing is passed over;
//   - the pointer's file replaced, truncated or rewritten with no copy of
//     it found: the rest of it is counted lost (unread) and the file at the
//     path is read from 0 under a new epoch. The header keeps the old
//     file, offset and epoch until the first commit, which comes only once
//     an item read after the loss is processed (and its rows, after the
//     LOST row, recorded): a run killed, or whose recording cannot be
//     written, before it leaves the pointer as it found it, and the next
//     run finds the same loss, counts it and records it. Only the pending
//     header (pointerFile.pending: the new file's identity, fingerprint and
//     epoch, at 0) is written at once, so that the next run, finding that
//     file again (the same identity and first bytes), reads it under the
//     same epoch: a line the run applied to durable state, keyed by epoch
//     and offset (core.Delivery.AlreadyApplied), is not applied again.
func (s *Source) startPointer(file *os.File, size int64, id uint64, head []byte) (started, error) {
	p, trust, pending := Pointer{}, trustNothing, Pointer{}
	if !s.ptrCreated { // a file this run created is empty: nothing to warn about
		var err error
		var slots [GroupSlots]GroupProgress
		if p, trust, pending, slots, err = loadPointer(s.opts.Pointer, s.logf); err != nil {
			return started{}, err
		}
		s.pending, s.resume = pending, pending
		s.mu.Lock()
		s.ptr.groups = slots
		s.mu.Unlock()
		// Each group's own progress past the pointer: the feed does not
		// hand the group those lines again, if they are read under the
		// pointer's epoch (its file found, at the path or rotated).
		for _, g := range ahead(groupsOf(slots), p) {
			s.f.SkipCompleted(g.Group, g.Epoch, core.Position{Offset: g.Offset})
		}
	}
	st := started{epoch: newEpoch()}
	switch trust {
	case trustOffsetOnly:
		st.off = p.Offset
		if size < st.off {
			s.logf("input %s (%d bytes) is shorter than the pointer's offset %d: reading from 0", s.path, size, st.off)
			st.off = 0
		}
	case trustAll:
		other := p.Identity != 0 && id != 0 && p.Identity != id
		if other {
			if st, ok := s.findRotated(p, true); ok {
				return st, s.writeStart(header(st.head, st.id, p.Offset, p.Epoch), p.Offset, p.Epoch)
			}
		}
		keep, why := s.verdict(head, size, id, p, p.Offset)
		if keep && p.FingerprintLen == 0 && !other {
			// Never read a byte of: a copy made while stopped is told by
			// when it was made, not by its first bytes.
			return s.startStopped(p, file, size, id, head)
		}
		if keep {
			st.off, st.epoch = p.Offset, p.Epoch
			break
		}
		// Not the pointer's file, nor its rotated sibling by identity: a
		// copy (copytruncate) of it, found by its fingerprint?
		if st, ok := s.findRotated(p, false); ok {
			np := header(st.head, st.id, p.Offset, p.Epoch)
			where, gone := s.copiedFileGone(p, other)
			if !gone {
				return st, s.writeStart(np, p.Offset, p.Epoch)
			}
			s.lose(Pointer{Identity: p.Identity, Epoch: newEpoch()}, "the file the pointer "+s.opts.Pointer+" describes, after it was copied to "+st.name+" (copytruncate),", where)
			s.leavePointer(p, np)
			return st, nil
		}
		s.replaced.Add(1)
		if pendingFor(pending, id, head) {
			st.epoch = pending.Epoch // an earlier start read this file from 0 under it, and committed nothing
			s.resume = Pointer{}
		}
		s.logf("input %s was %s: reading it from 0 under a new epoch", s.path, why)
		if other {
			s.unread(p, fmt.Sprintf("it is not at %s nor at its rotated siblings (%s)", s.path, strings.Join(s.rotated, ", ")))
		} else {
			s.unread(p, fmt.Sprintf("%s was %s (or deleted, its inode reused), and no rotated sibling (%s) is a copy of it", s.path, why, strings.Join(s.rotated, ", ")))
		}
		st.hole = !other // the same file, truncated or rewritten in place
		return st, s.startAfterLoss(p, header(head, id, 0, st.epoch))
	}
	return st, s.writeStart(header(head, id, st.off, st.epoch), st.off, st.epoch)
}

// startStopped starts at the pointer's file p, still at the path (open
// as file: size bytes, identity id, first bytes head) and read of no byte
// (an empty fingerprint), looking first for a copy of it made while the
// source was stopped (copytruncate: findStoppedCopy). Found, the copy is
// read from p.Offset to its end under p's epoch (its header written at
// once, as for a copy found by fingerprint), then every other such copy,
// in rotation order, then the path's file from 0 under a new epoch, a
// leading run of NUL bytes being a hole. A sibling that may or may not be
// a copy is never read: p's file's bytes from p.Offset are counted unread
// (a loss, naming the siblings), and the pointer file is left as it is
// until the first commit (as after any loss at the start): a run that
// commits nothing leaves the next run the same pointer, written at the
// same time, and it counts the same loss.
func (s *Source) startStopped(p Pointer, file *os.File, size int64, id uint64, head []byte) (started, error) {
	fi, err := os.Stat(s.opts.Pointer)
	if err != nil {
		return started{}, fileErr("stat pointer", s.opts.Pointer, err)
	}
	sc := s.findStoppedCopy(p, file, size, id, head, fi.ModTime())
	st := started{off: p.Offset, epoch: p.Epoch}
	np := header(head, id, p.Offset, p.Epoch)
	if sc.file != nil {
		s.logf("input %s is the pointer's file, never read, but does not go on from the bytes of %s, made after the pointer was last written (%s): %s is a copy of it made before it was truncated (copytruncate while stopped): reading %s from offset %d to its end, then %s",
			s.path, sc.sb.name, fi.ModTime().Format(time.RFC3339Nano), sc.sb.name, sc.sb.name, p.Offset, s.path)
		st.file, st.name, st.id, st.head, st.truncated = sc.file, sc.sb.name, sc.sb.id, sc.head, id
		st.pre = []sibling{} // every sibling but the copies was there before
		for _, sb := range sc.sibs {
			if sb.id != sc.sb.id && !slices.Contains(sc.later, sb) {
				st.pre = append(st.pre, sb)
			}
		}
		np = header(sc.head, sc.sb.id, p.Offset, p.Epoch)
	}
	if len(sc.unsure) == 0 {
		return st, s.writeStart(np, p.Offset, p.Epoch)
	}
	s.unread(p, fmt.Sprintf("it was still at %s, but %s (made when the pointer %s was last written, %s, or unreadable) may be a copy of it made before it was truncated (copytruncate while stopped), or a file rotated before it: not read",
		s.path, strings.Join(sc.unsure, ", "), s.opts.Pointer, fi.ModTime().Format(time.RFC3339Nano)))
	s.leavePointer(p, np)
	return st, nil
}

// leavePointer starts a run after a loss counted at the start with the
// pointer file left as it is (holding p) until the first commit, which
// writes np: a run killed before leaves the next run the same pointer, and
// it counts the same loss.
func (s *Source) leavePointer(p, np Pointer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ptr.hdr = p // what the pointer file holds, left as it is
	s.com.reset(np.Epoch, np.Offset)
	s.com.head, s.com.waiting = &np, true
}

// copiedFileGone reports whether the pointer's file p, of which a copy
// was found (copytruncate), is gone, and says where it was looked for. A
// copytruncate leaves the file truncated in place, taking lines after the
// copy: the restart reads them after the copy only if that file is still
// at the path or at a rotated name. It is gone when the file at the path
// is another (other: another identity) and no rotated sibling has its
// identity, or when the file at the path has its identity but was made
// (its birth time, where the file system keeps one) after the pointer file
// was last written, which the file the pointer names cannot have been: the
// file was deleted and its inode reused. The bytes written to it after the
// copy were never read, and whether there were any cannot be known.
func (s *Source) copiedFileGone(p Pointer, other bool) (string, bool) {
	if other {
		for _, sb := range s.rotatedSiblings() {
			if sb.id == p.Identity {
				return "", false
			}
		}
		return fmt.Sprintf("it is not at %s nor at its rotated siblings (%s): deleted, the lines written to it after the copy are gone", s.path, strings.Join(s.rotated, ", ")), true
	}
	born, ok := bornAt(s.path)
	fi, err := os.Stat(s.opts.Pointer)
	if !ok || err != nil || !born.After(fi.ModTime()) {
		return "", false
	}
	return fmt.Sprintf("the file at %s has its identity but was made (%s) after the pointer was last written (%s): deleted and its inode reused, the lines written to it after the copy are gone",
		s.path, born.Format(time.RFC3339Nano), fi.ModTime().Format(time.RFC3339Nano)), true
}

// pendingFor reports whether pending (a pointer file's pending header) is
// the header of the file of identity id whose first bytes are head, at 0:
// the same identity, and head starts with the bytes it fingerprinted.
func pendingFor(pending Pointer, id uint64, head []byte) bool {
	return pending.Epoch != 0 && pending.Identity == id && pending.Offset == 0 &&
		int64(len(head)) >= pending.FingerprintLen && fingerprintOf(head[:pending.FingerprintLen]) == pending.Fingerprint
}

// writeStart writes the pointer a run starts with, np (at off under
// epoch), and maps it.
func (s *Source) writeStart(np Pointer, off, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ptr.store(np, s.pending); err != nil { // a pending header is a file after np's
		return err
	}
	s.com.reset(epoch, off)
	return nil
}

// startAfterLoss starts a run after a loss counted at the start: the
// pointer file keeps old, the header it holds, with np, the header of the
// file read from 0, as its pending header; np is the committer's header to
// write at the first commit (see startPointer).
func (s *Source) startAfterLoss(old, np Pointer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ptr.store(old, np); err != nil {
		return err
	}
	s.pending = np
	s.com.reset(np.Epoch, np.Offset)
	s.com.head, s.com.waiting = &np, true
	return nil
}

// findRotated looks for the file p describes among the rotated siblings of
// the path (Options.Rotated): a regular file at least p.Offset bytes long
// with p's fingerprint and, byIdentity, p's identity (the file renamed);
// otherwise any identity (a copy: copytruncate). It returns it open, to be
// read from p.Offset under p.Epoch.
func (s *Source) findRotated(p Pointer, byIdentity bool) (started, bool) {
	if !byIdentity && p.FingerprintLen == 0 {
		return started{}, false // nothing to recognise a copy by
	}
	for _, pat := range s.rotated {
		names, _ := filepath.Glob(strings.ReplaceAll(pat, "{path}", globQuote(s.path)))
		for _, name := range names {
			if fi, err := os.Stat(name); err != nil || (byIdentity && identity(fi) != p.Identity) {
				continue
			}
			file, err := openInput(name)
			if err != nil {
				continue
			}
			fi, err := file.Stat()
			id := uint64(0)
			if err == nil {
				id = identity(fi)
			}
			if err != nil || !fi.Mode().IsRegular() || (byIdentity && id != p.Identity) {
				file.Close()
				continue
			}
			head, err := readHead(file, fi.Size(), name)
			keep := false
			if err == nil {
				q := p
				q.Identity = id // by identity, or a copy: the fingerprint decides
				var why string
				if keep, why = s.verdict(head, fi.Size(), id, q, p.Offset); !keep && byIdentity {
					s.logf("%s has the identity of the pointer's file but was %s: not taken for it", name, why)
				}
			}
			if !keep {
				file.Close()
				continue
			}
			how := "rotated to"
			if !byIdentity {
				how = "copied to"
			}
			s.logf("input %s is not the pointer's file, which was %s %s: reading %s from offset %d to its end, then %s", s.path, how, name, name, p.Offset, s.path)
			return started{off: p.Offset, epoch: p.Epoch, file: file, name: name, id: id, head: head}, true
		}
	}
	return started{}, false
}

// unread says that the rest of the file p describes, from p.Offset to its
// end, was never read and cannot be: a loss (LossUnread, with the
// file's identity, epoch and offset: FeedStatus.Losses["unread"]), warned
// and kept in the feed's detail for the rest of the run. (Whether that file
// had any byte after p.Offset is unknown once it is gone: counted all the
// same, a verdict is only as good as its worst case.)
func (s *Source) unread(p Pointer, where string) {
	s.lose(p, "the file the pointer "+s.opts.Pointer+" describes", where)
}

// unreadTail says that the bytes of the open file (named file) after the
// last line published from it (at offset published, under the current
// epoch), to its old end, were never read and are gone (it was truncated
// or rewritten in place under the reader, and no copy holds them): a loss,
// as unread says.
func (s *Source) unreadTail(published int64, file, where string) {
	s.lose(Pointer{Identity: s.fileID, Epoch: s.epoch, Offset: published}, file, where)
}

// lose reports the bytes of a file (file says which; p its identity and
// epoch) from p.Offset to its end as never read: see unread.
func (s *Source) lose(p Pointer, file, where string) {
	msg := fmt.Sprintf("%s (identity %x, epoch %d) was read to offset %d; %s: its bytes from offset %d to its end were never read",
		file, p.Identity, p.Epoch, p.Offset, where, p.Offset)
	s.logf("%s", msg)
	s.f.AddLoss(engine.Loss{Reason: LossUnread, Epoch: p.Epoch, From: p.Offset,
		Detail: fmt.Sprintf("%s: %s (identity %x) was read to offset %d; %s", s.path, file, p.Identity, p.Offset, where)})
	if s.note != "" {
		s.note += "; "
	}
	s.note += "unread: " + msg
}

// globQuote quotes the glob metacharacters of a path.
func globQuote(p string) string {
	var b strings.Builder
	for _, c := range p {
		switch c {
		case '*', '?', '[':
			b.WriteByte('[')
			b.WriteRune(c)
			b.WriteByte(']')
		case '\\':
			if filepath.Separator != '\\' {
				b.WriteString(`\\`)
				continue
			}
			b.WriteRune(c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// header is a pointer for the file (identity id, first bytes head as read)
// at off under epoch.
func header(head []byte, id uint64, off, epoch int64) Pointer {
	return Pointer{Offset: off, Epoch: epoch, Identity: id, Layout: Layout, FingerprintLen: int64(len(head)), Fingerprint: fingerprintOf(head)}
}
