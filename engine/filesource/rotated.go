package filesource

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
)

// Rotation order.
//
// A tailing source reads every file rotated away from its path, in rotation
// order, before the file after it: when it finishes a file (the one it
// followed at the path, the pointer's file found rotated at a restart, or
// a rotated file it was reading), it looks at the rotated siblings
// (Options.Rotated) for the files it has not read and that were not
// rotated before the files it read. Those are known by identity (device
// and inode) and by the fingerprint of their first bytes (an inode reused
// by a new file is not taken for the old one), never by name or file time:
// a file renamed again (logrotate's numbered PATH.1, PATH.2, …) is still
// known. Only the order among the files it has not read comes from their
// names, in natural order (runs of digits compared as numbers: PATH-9
// before PATH-10; dates in date order), newest last; or newest first when
// they all lie before the file just finished (a scheme that renumbers its
// rotated files, PATH.1 being the newest).

// sibling is a regular file at one of the path's rotated names.
type sibling struct {
	name string
	id   uint64
}

// seenFile is what the source keeps of a file it knows: the fingerprint of
// its first n bytes.
type seenFile struct {
	n  int64
	fp uint64
}

// scanAttempts bounds how often rotatedSiblings lists the siblings until
// two lists agree (a rotation renaming files while they are listed).
const scanAttempts = 8

// rotatedSiblings lists the regular files at the path's rotated names, in
// natural order of their names: listed again until two lists agree, so
// that a file renamed while the names are listed is not missed.
func (s *Source) rotatedSiblings() []sibling {
	last := s.scanSiblings()
	for range scanAttempts {
		next := s.scanSiblings()
		if slices.Equal(next, last) {
			break
		}
		last = next
	}
	return last
}

// scanSiblings lists once the regular files at the path's rotated names
// (the pointer file and its temporary excluded), in natural order of their
// names.
func (s *Source) scanSiblings() []sibling {
	if len(s.rotated) == 0 {
		return nil
	}
	seen := map[string]bool{s.path: true, s.opts.Pointer: true, s.opts.Pointer + ".tmp": true}
	var out []sibling
	for _, pat := range s.rotated {
		names, _ := filepath.Glob(strings.ReplaceAll(pat, "{path}", globQuote(s.path)))
		for _, name := range names {
			if seen[name] {
				continue
			}
			seen[name] = true
			fi, err := os.Stat(name)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if id := identity(fi); id != 0 {
				out = append(out, sibling{name, id})
			}
		}
	}
	slices.SortFunc(out, func(a, b sibling) int { return compareNatural(a.name, b.name) })
	return out
}

// remember records the file of identity id, whose first bytes are head, as
// known.
func (s *Source) remember(id uint64, head []byte) {
	if id != 0 {
		s.know(id, seenFile{n: int64(len(head)), fp: fingerprintOf(head)})
	}
}

// know records the file of identity id as known, with sf.
func (s *Source) know(id uint64, sf seenFile) {
	if s.known == nil {
		s.known = map[uint64]seenFile{}
	}
	s.known[id] = sf
}

// rememberAll records the siblings as known, each with the fingerprint of
// its first bytes now.
func (s *Source) rememberAll(sibs []sibling) {
	for _, sb := range sibs {
		if _, ok := s.known[sb.id]; ok {
			continue
		}
		if head, id, err := headOf(sb.name); err == nil && id == sb.id {
			s.remember(id, head)
		}
	}
}

// headOf reads the first bytes (up to FingerprintMax) of the file at name,
// with its identity.
func headOf(name string) ([]byte, uint64, error) {
	file, err := openInput(name)
	if err != nil {
		return nil, 0, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, 0, err
	}
	head, err := readHead(file, fi.Size(), name)
	return head, identity(fi), err
}

// isKnown reports whether sb is a file the source knows: its identity, and
// its first bytes as they were (an inode reused by another file is not).
// One whose first bytes cannot be read is taken for known by its identity.
func (s *Source) isKnown(sb sibling) bool {
	k, ok := s.known[sb.id]
	if !ok {
		return false
	}
	if k.n == 0 {
		return true
	}
	head, id, err := headOf(sb.name)
	if err != nil {
		return true
	}
	return id == sb.id && int64(len(head)) >= k.n && fingerprintOf(head[:k.n]) == k.fp
}

// nextRotated finds the next file to read before the path once the open
// file is finished: the first, in rotation order, of the rotated siblings
// the source does not know (neither read nor rotated before what it read),
// other than the file at the path (identity pathID, 0 for none). It
// returns it open. A sibling that cannot be opened, or that is gone when
// it is opened and was not renamed, is a file never read: reported (a
// loss) and then known.
func (s *Source) nextRotated(pathID uint64) (*os.File, os.FileInfo, sibling, bool) {
	var lost map[uint64]string // siblings gone when opened: their last name
	for range scanAttempts {
		sibs := s.rotatedSiblings()
		present := make(map[uint64]bool, len(sibs))
		for _, sb := range sibs {
			present[sb.id] = true
		}
		for id := range s.known {
			if !present[id] && id != s.fileID && id != pathID {
				delete(s.known, id) // gone: its identity may be reused
			}
		}
		for id, name := range lost {
			if !present[id] {
				s.lostRotated(sibling{name, id}, "it was deleted before it could be read")
			}
		}
		lost = nil
		sb, ok := s.firstUnknown(sibs, pathID)
		if !ok {
			return nil, nil, sibling{}, false
		}
		if s.hookRotate != nil {
			s.hookRotate(sb.name)
		}
		file, err := openInput(sb.name)
		var fi os.FileInfo
		if err == nil {
			if fi, err = file.Stat(); err == nil && !fi.Mode().IsRegular() {
				err = fmt.Errorf("%w (%s)", ErrNotRegular, fi.Mode().Type())
			}
			if err != nil {
				file.Close()
			}
		}
		switch {
		case errors.Is(err, os.ErrNotExist):
			lost = map[uint64]string{sb.id: sb.name} // renamed again, or deleted: list again
			continue
		case err != nil:
			s.lostRotated(sb, fmt.Sprintf("it could not be opened: %v", err))
			continue
		case identity(fi) != sb.id:
			file.Close() // another file took the name meanwhile: list again
			continue
		}
		return file, fi, sb, true
	}
	for id, name := range lost {
		s.lostRotated(sibling{name, id}, "it was gone when it was to be read")
	}
	return nil, nil, sibling{}, false
}

// firstUnknown is the first of sibs, in rotation order, that the source
// does not know, other than the open file and the file at the path: the
// first in name order, or the last when every such sibling lies before
// the open file (its numbers count down to the newest).
func (s *Source) firstUnknown(sibs []sibling, pathID uint64) (sibling, bool) {
	anchor := -1
	var unknown []int
	for i, sb := range sibs {
		switch {
		case sb.id == s.fileID:
			anchor = i
		case sb.id == pathID:
		case !s.isKnown(sb):
			unknown = append(unknown, i)
		}
	}
	if len(unknown) == 0 {
		return sibling{}, false
	}
	if last := unknown[len(unknown)-1]; anchor >= 0 && last < anchor {
		return sibs[last], true
	}
	return sibs[unknown[0]], true
}

// lostRotated reports a file rotated after the one read before it that
// cannot be read: its bytes were never read (a loss, counted). It is then
// known, so it is reported once.
func (s *Source) lostRotated(sb sibling, why string) {
	s.unread(Pointer{Identity: sb.id}, fmt.Sprintf("it is a file rotated after the one read before it (%s) and %s", sb.name, why))
	s.know(sb.id, seenFile{})
}

// compareNatural orders names naturally: runs of digits compare as numbers
// (leading zeros ignored, then the shorter run first), the rest byte by
// byte; names that compare equal so compare as strings.
func compareNatural(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			ei, ej := i, j
			for ei < len(a) && isDigit(a[ei]) {
				ei++
			}
			for ej < len(b) && isDigit(b[ej]) {
				ej++
			}
			na, nb := strings.TrimLeft(a[i:ei], "0"), strings.TrimLeft(b[j:ej], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			i, j = ei, ej
			continue
		}
		if ca != cb {
			return int(ca) - int(cb)
		}
		i++
		j++
	}
	if c := (len(a) - i) - (len(b) - j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// fileCopy is a copy of the open file found at a rotated name, open.
type fileCopy struct {
	file *os.File
	sb   sibling
	head []byte // its first bytes
}

// findCopy looks among sibs (the rotated siblings, in natural order of
// their names) for a copy of the open file as the source read it, made
// before it was truncated (copytruncate): the first, in that order, of the
// siblings the source does not know (a copy is a file made since it last
// looked) whose first bytes are those the reader read and last found in
// the file (its head, as far as checked), holding at least the bytes up to
// the last line published from it (published). It returns it open. With
// nothing checked (the file was empty when last looked at) nothing tells a
// copy.
func (s *Source) findCopy(sibs []sibling, published int64) (fileCopy, bool) {
	n := s.rd.checked
	if n == 0 {
		return fileCopy{}, false
	}
	want := s.rd.head[:n]
	for _, sb := range sibs {
		if sb.id == s.fileID || s.isKnown(sb) {
			continue
		}
		file, err := openInput(sb.name)
		if err != nil {
			continue
		}
		fi, err := file.Stat()
		if err != nil || !fi.Mode().IsRegular() || identity(fi) != sb.id || fi.Size() < published {
			file.Close()
			continue
		}
		head, err := readHead(file, fi.Size(), sb.name)
		if err != nil || len(head) < n || !bytes.Equal(head[:n], want) {
			file.Close()
			continue
		}
		return fileCopy{file: file, sb: sb, head: head}, true
	}
	return fileCopy{}, false
}

// readCopy moves the reader to cp, a copy of the open file (findCopy),
// at the end of the last line published from the open file (published),
// under the same epoch: the copy goes on in the same position space (only
// the identity and the fingerprint change, as at a restart that finds the
// pointer's file by its copy). With a pointer, the pointer describes the
// copy from now on, at the same offset. The files rotated after it and
// then the path are read after it; the file truncated, wherever it is read
// next (at the path, or at a rotated name if it was renamed meanwhile),
// is read from 0, a leading run of NUL bytes being a hole.
func (s *Source) readCopy(cp fileCopy, published int64) error {
	s.logf("%s is a copy of the file truncated or rewritten under the reader (identity %x, epoch %d), made before: reading it from offset %d to its end under that epoch, then %s",
		cp.sb.name, s.fileID, s.epoch, published, s.path)
	if s.opts.Read == Committed {
		if err := s.com.moveTo(header(cp.head, cp.sb.id, published, s.epoch), published, true, false, false); err != nil {
			cp.file.Close()
			return err
		}
	}
	// The truncated file holds new content, unknown: renamed meanwhile
	// (rotated after the copy), it is read from 0 after the copy.
	s.truncated = s.fileID
	delete(s.known, s.fileID)
	s.mu.Lock()
	s.file.Close()
	s.file, s.fileID = cp.file, cp.sb.id
	s.rd = s.newReader(cp.file, cp.sb.name, published, cp.head)
	s.mu.Unlock()
	s.remember(cp.sb.id, cp.head)
	s.switching = true // the path after it
	s.setState(engine.StateBehind, "reading "+cp.sb.name+", a copy of the truncated "+s.path)
	return nil
}

// stoppedCopy is what findStoppedCopy found: the copy to read first (file
// nil when none), the other copies (read after it, in rotation order),
// and the siblings that may or may not be copies (unsure: their bytes
// cannot be told read or not).
type stoppedCopy struct {
	sibs   []sibling // every rotated sibling listed
	file   *os.File
	sb     sibling
	head   []byte
	later  []sibling
	unsure []string
}

// findStoppedCopy looks, at a restart, for a copy (copytruncate) of the
// pointer's file p, at the path and read of no byte (an empty fingerprint:
// its first bytes recognise no copy), made while the source was stopped.
// The file is open as pathFile (size bytes, first bytes head, identity
// id); ptrWritten is when the pointer file was last written (before this
// run wrote it). A rotated sibling is such a copy when it was made after
// ptrWritten (madeAt: its birth time; a file rotated before the pointer's
// file, or read by the run that last wrote the pointer, existed before
// then), holds bytes past p.Offset, and the path's file does not go on
// from its bytes (a plain backup copy, the file not truncated: the path's
// file is as long, and starts with the copy's first bytes, as many as a
// restart compares). One made at the very time the pointer was last
// written (file times are coarse: a few milliseconds) is unsure: it may be
// a file the last run knew, or a copy; it is never read, and its bytes
// are counted unread by the caller. A sibling born before the path's file
// is older than the pointer's file: never a copy of it.
func (s *Source) findStoppedCopy(p Pointer, pathFile *os.File, size int64, id uint64, head []byte, ptrWritten time.Time) stoppedCopy {
	var out stoppedCopy
	pathMade, perr := madeAt(pathFile.Name())
	out.sibs = s.rotatedSiblings()
	for _, sb := range out.sibs {
		if sb.id == id {
			continue // a link to the path's file: not a copy
		}
		made, err := madeAt(sb.name)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			out.unsure = append(out.unsure, sb.name)
			continue
		}
		if made.Before(ptrWritten) || (perr == nil && made.Before(pathMade)) {
			continue // there before the pointer was last written, or before the pointer's file
		}
		file, err := openInput(sb.name)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				out.unsure = append(out.unsure, sb.name)
			}
			continue
		}
		fi, err := file.Stat()
		var h []byte
		if err == nil {
			h, err = readHead(file, fi.Size(), sb.name)
		}
		switch {
		case err != nil || !fi.Mode().IsRegular() || identity(fi) != sb.id:
			file.Close()
			out.unsure = append(out.unsure, sb.name)
			continue
		case fi.Size() <= p.Offset, size >= fi.Size() && bytes.HasPrefix(head, h):
			file.Close() // nothing past the pointer, or the path's file goes on from it
			continue
		}
		switch {
		case !made.After(ptrWritten):
			file.Close()
			out.unsure = append(out.unsure, sb.name)
		case out.file == nil:
			out.file, out.sb, out.head = file, sb, h
		default:
			file.Close()
			out.later = append(out.later, sb)
		}
	}
	return out
}
