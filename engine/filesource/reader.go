package filesource

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// defaultBufSize is the size of one read: large buffered reads keep the
// system calls per line negligible.
const defaultBufSize = 256 << 10

type skipMode uint8

const (
	skipNone skipMode = iota
	skipRest          // discard up to and including the next terminator (a line begun before the start)
	skipLF            // discard one leading '\n' (the start sat between '\r' and '\n')
)

// lineReader splits the bytes of src, from an offset, into lines ended by
// "\n", "\r\n" or "\r". It reads with large ReadAt calls into one buffer and
// remembers where the next '\n' and '\r' are, so that each byte is searched
// once. Not safe for concurrent use.
type lineReader struct {
	src  io.ReaderAt
	buf  []byte
	r, w int   // unconsumed bytes: buf[r:w]
	pos  int64 // file offset of buf[r]: the offset after the last consumed line
	skip skipMode

	// Where the next '\n' and '\r' are, so that each byte is searched once.
	nl, cr search
}

// search remembers one byte's search in the buffer: at is the index of its
// next occurrence at or after r when at >= r; otherwise there is none in
// buf[r:to].
type search struct{ at, to int }

// fresh is a search that has looked nowhere yet.
var fresh = search{at: -1}

// find returns the index of the next c at or after r, or -1.
func (l *lineReader) find(c byte, s *search) int {
	if s.at >= l.r {
		return s.at
	}
	from := max(l.r, s.to)
	if i := bytes.IndexByte(l.buf[from:l.w], c); i >= 0 {
		s.at = from + i
		return s.at
	}
	*s = search{at: -1, to: l.w}
	return -1
}

func newLineReader(src io.ReaderAt, off int64, size int) *lineReader {
	if size <= 0 {
		size = defaultBufSize
	}
	return &lineReader{src: src, buf: make([]byte, size), pos: off, nl: fresh, cr: fresh}
}

// readOff is the file offset of the next byte to read.
func (l *lineReader) readOff() int64 { return l.pos + int64(l.w-l.r) }

// buffered is how many bytes were read and not yet consumed.
func (l *lineReader) buffered() int { return l.w - l.r }

// fill reads once into the free end of the buffer. The bytes already read
// are never written again: line texts are strings over them (see text), so
// when the free end runs short the unconsumed bytes move to a new buffer
// (twice as large when they fill it: a line longer than the buffer), never
// to the front of this one. It returns how many bytes were read: 0 at the
// end of the file.
func (l *lineReader) fill() (int, error) {
	if free := len(l.buf) - l.w; free == 0 || free < len(l.buf)/4 {
		size := len(l.buf)
		if l.w-l.r > size/2 {
			size *= 2
		}
		nb := make([]byte, size)
		l.w = copy(nb, l.buf[l.r:l.w])
		l.r = 0
		l.buf = nb
		l.nl, l.cr = fresh, fresh
	}
	n, err := l.src.ReadAt(l.buf[l.w:], l.readOff())
	l.w += n
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// next finds the next complete line in buf[r:w]: the line is buf[r:end],
// its terminator buf[end:after]. A '\r' that is the last buffered byte
// could be the first half of "\r\n": it ends a line only when final (the
// end of a once-read); otherwise next waits for the following byte.
func (l *lineReader) next(final bool) (end, after int, ok bool) {
	nl, cr := l.find('\n', &l.nl), l.find('\r', &l.cr)
	switch {
	case nl >= 0 && (cr < 0 || nl < cr):
		return nl, nl + 1, true
	case cr >= 0:
		switch {
		case cr+1 < l.w && l.buf[cr+1] == '\n':
			return cr, cr + 2, true
		case cr+1 < l.w || final:
			return cr, cr + 1, true
		}
	}
	return 0, 0, false
}

// rewind moves the read point back to buffer index r, file offset pos (an
// earlier point of the buffered bytes: lines consumed but not taken). The
// searches restart from there.
func (l *lineReader) rewind(r int, pos int64) {
	l.r, l.pos = r, pos
	l.nl, l.cr = fresh, fresh
}

// consume takes the bytes up to after.
func (l *lineReader) consume(after int) {
	l.pos += int64(after - l.r)
	l.r = after
}

// doSkip discards what the skip mode says; it reports whether the skip is
// resolved (false: more bytes are needed to decide).
func (l *lineReader) doSkip(final bool) bool {
	switch l.skip {
	case skipLF:
		if l.r == l.w {
			if !final {
				return false
			}
		} else if l.buf[l.r] == '\n' {
			l.consume(l.r + 1)
		}
	case skipRest:
		_, after, ok := l.next(final)
		if !ok {
			return false
		}
		l.consume(after)
	}
	l.skip = skipNone
	return true
}

// text is the decoded text of the line buf[r:end]. Valid UTF-8 is not
// copied: the string is a view of the read buffer, whose bytes are never
// written again once read (fill moves on to a new buffer instead), so a
// line kept by a processor keeps its read buffer alive. Invalid UTF-8
// becomes U+FFFD in a copy.
func (l *lineReader) text(end int) string {
	if end == l.r {
		return ""
	}
	b := l.buf[l.r:end]
	if utf8.Valid(b) {
		return unsafe.String(&b[0], len(b))
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// decode turns a line's bytes into text: invalid UTF-8 becomes U+FFFD.
func decode(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
