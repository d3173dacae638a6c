package filesource

import (
	"fmt"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// cycle is one duty cycle: open the file if needed, publish the buffered
// lines, read at most one more buffer and publish its lines. progress says
// it did something (no idle wait), done that a once-read is complete.
func (s *Source) cycle() (progress, published, done bool, err error) {
	if s.rd == nil {
		ok, err := s.start()
		if err != nil || !ok {
			return false, false, false, err
		}
		progress = true
	}
	if s.redo { // a rewrite noticed while a backwards seek was pinned
		s.redo = false
		p, err := s.rewritten()
		return p, false, false, err
	}
	if s.holding() {
		p, err := s.peek()
		if err != nil || p {
			return true, false, false, err
		}
		s.setState(engine.StateBehind, "waiting for the lines of the file read before this one to be committed before publishing its lines")
		return progress, false, false, nil
	}
	for reads := 0; ; reads++ {
		n, paused := s.publish()
		if n > 0 {
			progress, published = true, true
		}
		if paused {
			s.setState(engine.StateBehind, "paused: a subscriber's queue is full")
			return progress, published, false, nil
		}
		if s.final {
			s.endOnce()
			return true, published, true, nil
		}
		if reads == 1 {
			return progress, published, false, nil
		}
		got, err := s.rd.fill()
		if err != nil {
			return progress, published, false, fileErr("read", s.path, err)
		}
		if got > 0 {
			// What was just read is published only if the file's first
			// bytes are still those read: else it may be a fragment of a
			// rewrite, at the old content's offsets.
			changed, err := s.prefixChanged()
			if err != nil {
				return progress, published, false, err
			}
			if changed {
				_, err := s.rewritten()
				return true, published, false, err
			}
			progress = true
			if !s.switching {
				s.setState(engine.StateBehind, "")
			}
			continue
		}
		if s.opts.Read.once() {
			s.final = true
			reads = -1 // publish what the end of the file terminates
			continue
		}
		p, err := s.atEOF()
		return progress || p, published, false, err
	}
}

// publishBatch is how many lines the source offers under one acquisition of
// the feed's lock.
const publishBatch = 128

// publish offers the complete buffered lines in order, a batch at a time,
// until the buffer has none or the feed refuses one (paused: that line and
// the rest of the buffer stay unconsumed and are offered again next cycle).
func (s *Source) publish() (n int, paused bool) {
	rd := s.rd
	defer s.report()
	if rd.skip != skipNone && !rd.doSkip(s.final) {
		return 0, false
	}
	for {
		var items []any
		items, poss := rd.lines(s.final, publishBatch, s.items[:0], s.poss[:0])
		s.items, s.poss = items, poss
		if len(items) == 0 {
			return n, false
		}
		s.reportOver() // the lines it skipped came before these
		k := s.f.TryPublishBatch(items, poss)
		clear(items) // keep no line alive past its publish
		n += k
		if k > 0 {
			s.published = true
			rd.pubEnd, rd.overAfter = poss[k-1].Offset, false
			s.lastPub = engine.Commit{Epoch: s.epoch, Position: poss[k-1]}
		}
		if k < len(items) {
			// Un-consume the lines the feed did not take.
			r0, pos0 := rd.batchR, rd.batchPos
			to := pos0
			if k > 0 {
				to = poss[k-1].Offset
			}
			rd.rewind(r0+int(to-pos0), to)
			return n, true
		}
	}
}

// report reports and warns what the reader skipped: oversized lines (a
// loss) and a hole's NUL bytes.
func (s *Source) report() {
	rd := s.rd
	s.reportOver()
	if rd.holes > 0 && rd.skip != skipNUL {
		s.holeBytes.Add(rd.holes)
		s.logf("%s: %d NUL bytes at offsets [%d, %d) of the file truncated or rewritten under the reader are a hole a writer left (it kept its old offset), not data: skipped",
			rd.name, rd.holes, rd.holeFrom, rd.holeFrom+rd.holes)
		rd.holes = 0
	}
}

// reportOver reports each oversized line the reader skipped as a loss
// (LossOversized) of the file it read, with its byte range, and
// warns: before the lines read after it are published, so that every
// processor's stream shows the loss where it happened.
func (s *Source) reportOver() {
	rd := s.rd
	rd.overAfter = rd.overAfter || len(rd.over) > 0
	for _, o := range rd.over {
		if s.reported.Epoch == s.epoch && o.to <= s.reported.Position.Offset {
			continue // read again after a backwards seek: reported once
		}
		s.reported = engine.Commit{Epoch: s.epoch, Position: core.Position{Offset: o.to}}
		s.logf("%s: a line of %d bytes at offsets [%d, %d) is longer than the maximum line length %d: skipped whole, not published (the feed is not lossless)",
			rd.name, o.to-o.from, o.from, o.to, s.maxLine)
		s.f.AddLoss(engine.Loss{Reason: LossOversized, Items: 1, Epoch: s.epoch, From: o.from, To: o.to,
			Detail: fmt.Sprintf("%s (identity %x): a line of %d bytes, longer than the maximum %d", rd.name, s.fileID, o.to-o.from, s.maxLine)})
	}
	rd.over = rd.over[:0]
}

// endOnce ends a once-read: bytes after the last terminator are counted as
// unterminated (not published).
func (s *Source) endOnce() {
	n := int64(s.rd.buffered())
	s.f.SetUnterminated(n)
	detail := "read " + s.path + " to its end"
	if n > 0 {
		detail += fmt.Sprintf("; %d unterminated bytes after the last line were not published", n)
		s.logf("%s: %d unterminated bytes after the last line (offset %d) were not published", s.path, n, s.rd.pos)
	}
	s.setState(engine.StateEndOfStream, detail)
}

// peek reads the first bytes (up to FingerprintMax) of a file whose lines
// are held (holding), publishing none, and checks them as every read
// does: a file written, then copied and truncated (copytruncate) while
// held is noticed (rewritten), and its copy found by those bytes. Without
// it, a hold made such a file's "one look" last as long as the hold: its
// lines were in neither the file nor any copy the source looked for
// (torture seed 1796340000000000039). It reports whether the file
// changed (the reader moved).
func (s *Source) peek() (bool, error) {
	rd := s.rd
	if int64(len(rd.head)) >= FingerprintMax {
		return false, nil
	}
	if _, err := rd.fill(); err != nil {
		return false, fileErr("read", s.path, err)
	}
	changed, err := s.prefixChanged()
	if err != nil || !changed {
		return false, err
	}
	_, err = s.rewritten()
	return true, err
}
