package csvstore

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"iter"

	"github.com/blackbox-audit/blackbox/store"
)

// extent returns the bytes rows are read from (the header and the complete
// lines) and the bytes readers see (a torn last line after them, for a
// Store from Open).
func (s *file) extent() (end, size int64, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, 0, &store.FileError{Op: "csvstore: read", Path: s.path, Err: store.ErrClosed}
	}
	if s.readOnly {
		return s.oend, s.osize, nil
	}
	return s.size, s.size, nil
}

func decodeLine(dec *decoder, line []byte, long bool, mode decodeMode) (store.Entry, *RowError) {
	if long {
		return store.Entry{}, &RowError{Reason: fmt.Sprintf("line longer than %d bytes", maxLine)}
	}
	return dec.decodeAs(line, mode)
}

func rowProblem(path string, re *RowError, line int64) store.Problem {
	return store.Problem{Kind: store.ProblemMalformed, File: path, Processor: re.Processor, Index: re.Index,
		Row: re.Kind, Line: line, Detail: re.Error()}
}

// tornProblem reports the bytes after the last '\n' (size of them, up to
// MaxLine, beginning with tail). They are never decoded as a row; the
// processor, index and kind are read from its first fields when they are
// readable, as a label for the reader, nothing more.
func tornProblem(path string, tail []byte, size, line int64) store.Problem {
	p := store.Problem{Kind: store.ProblemTorn, File: path, Line: line,
		Detail: fmt.Sprintf("last line has no line terminator: %d bytes set aside", min(size, maxLine))}
	r := csv.NewReader(bytes.NewReader(tail[:min(len(tail), 4096)]))
	r.FieldsPerRecord = -1
	fields, _ := r.Read() // a partial record on error: the fields before it
	if len(fields) >= 2 {
		if i, ok := parseInt(fields[1]); ok {
			p.Processor, p.Index = fields[0], i
		}
	}
	if len(fields) >= 3 && store.Kind(fields[2]).Valid() {
		p.Row = store.Kind(fields[2])
	}
	return p
}

func abbrev(b []byte) string {
	if len(b) > 100 {
		return string(b[:97]) + "..."
	}
	return string(b)
}

// lines yields the complete lines readers see after the header, with
// their numbers, then returns the torn problem if any.
func (s *file) lines(yield func(line []byte, n int64) bool) (*store.Problem, error) {
	end, size, err := s.extent()
	if err != nil {
		return nil, err
	}
	lr := newLineReader(io.NewSectionReader(s.r, 0, end), end, 0, 0)
	for {
		line, complete, long, err := lr.next()
		if err == io.EOF {
			return s.torn(end, size, lr.n+1)
		}
		if err != nil {
			return nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: err}
		}
		if lr.n == 1 {
			continue // the header
		}
		if !complete { // the file shrank under us
			return nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: fmt.Errorf("%w: file shorter than when opened", io.ErrUnexpectedEOF)}
		}
		if long {
			line = nil
		}
		if !yield(line, lr.n) {
			return nil, nil
		}
	}
}

// torn returns the torn problem of the bytes from end to size, the
// physical line n, or nil when there are none.
func (s *file) torn(end, size, n int64) (*store.Problem, error) {
	if size <= end {
		return nil, nil
	}
	tail := make([]byte, min(size-end, 4096))
	if _, err := s.r.ReadAt(tail, end); err != nil && err != io.EOF {
		return nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: err}
	}
	p := tornProblem(s.path, tail, size-end, n)
	return &p, nil
}

// fieldPrefix returns the CSV text of a first field v followed by ',', as
// appendRow writes it.
func fieldPrefix(v string) []byte { return append(appendField(nil, v), ',') }

// format is the format of the recording's rows ("": store.Format).
func (s *file) format() string {
	if !s.readOnly {
		s.wmu.Lock()
		defer s.wmu.Unlock()
	}
	return s.meta.Format // a file from Open: set by Open, never changed
}

// Scan yields every line after the header in storage order, with its
// physical line number: a line that is not a row with its malformed
// *store.Problem and, as the Entry's Processor, the stream whose Stream
// yields it (streamOf); the torn last line last, with its torn Problem
// (store.Backend). A row's Payload and Reads are the decoder's in mode
// store.ScanBorrow, valid until the iteration goes on; in modes
// store.ScanCheck and store.ScanStreams the rows the reader needs only
// checked are decoded in part (names and numbers).
func (s *file) Scan(mode store.ScanMode) iter.Seq2[*store.Row, error] {
	return func(yield func(*store.Row, error) bool) {
		end, size, err := s.extent()
		if err != nil {
			yield(nil, err)
			return
		}
		lr := newLineReader(io.NewSectionReader(s.r, 0, size), size, 0, 0)
		if err := readHeader(lr, s.path); err != nil {
			yield(nil, err)
			return
		}
		dec := getDecoder(s.format())
		defer putDecoder(dec)
		var row store.Row
		first, last := true, lr.off
		for {
			line, complete, long, err := lr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				yield(nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: err})
				return
			}
			if !complete {
				p := tornProblem(s.path, line, int64(len(line)), lr.n)
				row = store.Row{Line: lr.n, Entry: store.Entry{Processor: p.Processor}, Problem: &p}
				if !yield(&row, nil) {
					return
				}
				break
			}
			last = lr.off
			e, re := decodeLine(dec, line, long, decodeModeOf(mode, first, line))
			if re != nil {
				p := rowProblem(s.path, re, lr.n)
				row = store.Row{Line: lr.n, Entry: store.Entry{Processor: streamOf(line, long, re)}, Problem: &p}
			} else {
				if first && e.Kind == store.KindMeta {
					if m, err := store.DecodeMeta(e); err == nil {
						dec.fast.format = m.Format
					}
				}
				row = store.Row{Line: lr.n, Entry: e}
			}
			first = false
			if !yield(&row, nil) {
				return
			}
		}
		if last != end {
			// The file changed under the reader.
			yield(nil, &store.FileError{Op: "csvstore: read", Path: s.path, Err: fmt.Errorf("%w: file shorter than when opened", io.ErrUnexpectedEOF)})
		}
	}
}

// decodeModeOf is how Scan in mode decodes a line: the first whole
// (DecodeMeta reads its detail), a line the reader only checks (a row of
// no stream begins with ',') in part.
func decodeModeOf(mode store.ScanMode, first bool, line []byte) decodeMode {
	switch {
	case first:
		return full
	case mode&store.ScanCheck != 0:
		return check
	case mode&store.ScanStreams != 0 && len(line) > 0 && line[0] == ',':
		return check
	case mode&store.ScanBorrow != 0:
		return borrow
	}
	return full
}

// Stream yields the lines of one processor in storage order, as Scan
// yields them, whole (store.StreamSeeker): a line that does not begin with
// the processor's field is not decoded.
func (s *file) Stream(processor string) iter.Seq2[*store.Row, error] {
	prefix := fieldPrefix(processor)
	return func(yield func(*store.Row, error) bool) {
		dec := getDecoder(s.format())
		defer putDecoder(dec)
		var row store.Row
		stopped := false
		torn, err := s.lines(func(line []byte, n int64) bool {
			mine := bytes.HasPrefix(line, prefix)
			if !mine && (len(line) == 0 || line[0] != '"') {
				return true // another processor's row: not decoded
			}
			e, re := decodeLine(dec, line, line == nil, full)
			switch {
			case re != nil && (mine || re.Processor == processor):
				p := rowProblem(s.path, re, n)
				row = store.Row{Line: n, Entry: store.Entry{Processor: processor}, Problem: &p}
			case re == nil && e.Processor == processor:
				row = store.Row{Line: n, Entry: e}
			default:
				return true
			}
			stopped = !yield(&row, nil)
			return !stopped
		})
		switch {
		case stopped:
		case err != nil:
			yield(nil, err)
		case torn != nil:
			row = store.Row{Line: torn.Line, Entry: store.Entry{Processor: torn.Processor}, Problem: torn}
			yield(&row, nil)
		}
	}
}

// streamOf returns the processor whose Stream yields the malformed line
// (re its error; long: longer than MaxLine), as Stream decides it: the first
// field when the line begins with it as Stream's prefix test sees it, else
// the processor the decoder could read; "" for none.
func streamOf(line []byte, long bool, re *RowError) string {
	if long {
		return re.Processor
	}
	if name, ok := firstField(line); ok && name != "" && bytes.HasPrefix(line, fieldPrefix(name)) {
		return name
	}
	return re.Processor
}

// firstField returns the text of the first CSV field of line, if it is
// followed by a ','.
func firstField(line []byte) (string, bool) {
	if len(line) == 0 || line[0] != '"' {
		i := bytes.IndexByte(line, ',')
		if i < 0 {
			return "", false
		}
		return string(line[:i]), true
	}
	var b []byte
	for i := 1; i < len(line); i++ {
		if line[i] != '"' {
			b = append(b, line[i])
			continue
		}
		switch {
		case i+1 < len(line) && line[i+1] == '"':
			b = append(b, '"')
			i++
		case i+1 < len(line) && line[i+1] == ',':
			return string(b), true
		default:
			return "", false
		}
	}
	return "", false
}

// cursor is the position of the journal lookups of one feed.
type cursor struct {
	end  int64 // extent the reader was built for
	lr   *lineReader
	last int64 // seq of the last row found
	dec  *decoder
}

// Journal returns the JOURNAL row of (feed, seq), or an error wrapping
// store.ErrMissingJournal. Each feed has a forward cursor: lookups in
// increasing seq read the file once in all; a lookup of a smaller seq
// starts again from the top; a seq not found after the cursor is looked for
// before it, so journal rows written out of order are found too.
func (s *file) Journal(feed string, seq int64) (store.Entry, error) {
	end, _, err := s.extent()
	if err != nil {
		return store.Entry{}, err
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.cursors == nil {
		s.cursors = make(map[string]*cursor)
	}
	c := s.cursors[feed]
	if c == nil {
		c = &cursor{dec: getDecoder(s.format())}
		s.cursors[feed] = c
	}
	if c.lr == nil || seq <= c.last || c.end != end {
		start := int64(len(headerLine))
		if c.lr != nil && seq > c.last {
			start = c.lr.off // the extent grew: go on from here
		}
		s.seek(c, start, end)
	}
	hdr := int64(len(headerLine))
	from := c.lr.off
	e, found, err := s.find(c, feed, seq)
	if err == nil && !found {
		if from > hdr {
			// Not after the cursor: look before it.
			s.seek(c, hdr, from)
			e, found, err = s.find(c, feed, seq)
		}
		if err == nil && found {
			s.seek(c, c.lr.off, end)
		} else {
			s.seek(c, from, end)
		}
	}
	if err != nil {
		c.lr = nil
		return store.Entry{}, err
	}
	if !found {
		return store.Entry{}, &store.FileError{Op: "csvstore: journal", Path: s.path, Err: fmt.Errorf("%w: feed %q seq %d", store.ErrMissingJournal, feed, seq)}
	}
	c.last = seq
	return e, nil
}

func (s *file) seek(c *cursor, off, end int64) {
	c.lr = newLineReader(io.NewSectionReader(s.r, off, end-off), end-off, off, 0)
	c.end = end
}

// find reads lines from the cursor until the JOURNAL row of (feed, seq).
func (s *file) find(c *cursor, feed string, seq int64) (store.Entry, bool, error) {
	for {
		line, complete, long, err := c.lr.next()
		if err == io.EOF || (err == nil && !complete) {
			return store.Entry{}, false, nil
		}
		if err != nil {
			return store.Entry{}, false, &store.FileError{Op: "csvstore: read", Path: s.path, Err: err}
		}
		if long || !maybeJournal(line) {
			continue
		}
		e, re := c.dec.decodeAs(line, check) // the payload only for the row found
		if re == nil && e.Kind == store.KindJournal && e.Processor == "" && e.Source == feed && e.Seq == seq {
			e, re = c.dec.decode(line)
			return e, re == nil, nil
		}
	}
}

// maybeJournal is a cheap test that a line may be a JOURNAL row: no
// processor, then an index, then the kind.
func maybeJournal(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	if line[0] == '"' {
		return true
	}
	if line[0] != ',' {
		return false
	}
	_, rest, ok := bytes.Cut(line[1:], []byte(","))
	if !ok {
		return false
	}
	return bytes.HasPrefix(rest, []byte("JOURNAL,")) || bytes.HasPrefix(rest, []byte(`"`))
}
