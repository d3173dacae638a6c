package filesource

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
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

	// nl is the index of the next '\n' at or after r when nl >= r;
	// otherwise there is none in buf[r:nlTo]. Likewise cr for '\r'.
	nl, nlTo int
	cr, crTo int

	// arena holds a copy of buf[arenaAt:arenaAt+len(arena)]: the text of
	// the lines inside it are substrings of it, one allocation for many
	// short lines. arenaValid: the arena is valid UTF-8 as a whole.
	arena      string
	arenaAt    int
	arenaValid bool
}

// arenaSize bounds the memory a line kept by a processor can hold on to:
// the lines read with it, up to 4 KiB (or the line itself, if longer).
const arenaSize = 4 << 10

func newLineReader(src io.ReaderAt, off int64, size int) *lineReader {
	if size <= 0 {
		size = defaultBufSize
	}
	return &lineReader{src: src, buf: make([]byte, size), pos: off, nl: -1, cr: -1}
}

// readOff is the file offset of the next byte to read.
func (l *lineReader) readOff() int64 { return l.pos + int64(l.w-l.r) }

// buffered is how many bytes were read and not yet consumed.
func (l *lineReader) buffered() int { return l.w - l.r }

// fill reads once, after moving the unconsumed bytes to the front of the
// buffer (and growing it when they fill it: a line longer than the buffer).
// It returns how many bytes were read: 0 at the end of the file.
func (l *lineReader) fill() (int, error) {
	if l.r > 0 {
		l.w = copy(l.buf, l.buf[l.r:l.w])
		l.r = 0
		l.nl, l.nlTo, l.cr, l.crTo = -1, 0, -1, 0
		l.arena, l.arenaAt = "", 0
	}
	if l.w == len(l.buf) {
		nb := make([]byte, 2*len(l.buf))
		copy(nb, l.buf[:l.w])
		l.buf = nb
	}
	n, err := l.src.ReadAt(l.buf[l.w:], l.readOff())
	l.w += n
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (l *lineReader) findNL() int {
	if l.nl >= l.r {
		return l.nl
	}
	from := max(l.r, l.nlTo)
	if i := bytes.IndexByte(l.buf[from:l.w], '\n'); i >= 0 {
		l.nl = from + i
		return l.nl
	}
	l.nl, l.nlTo = -1, l.w
	return -1
}

func (l *lineReader) findCR() int {
	if l.cr >= l.r {
		return l.cr
	}
	from := max(l.r, l.crTo)
	if i := bytes.IndexByte(l.buf[from:l.w], '\r'); i >= 0 {
		l.cr = from + i
		return l.cr
	}
	l.cr, l.crTo = -1, l.w
	return -1
}

// next finds the next complete line in buf[r:w]: the line is buf[r:end],
// its terminator buf[end:after]. A '\r' that is the last buffered byte
// could be the first half of "\r\n": it ends a line only when final (the
// end of a once-read); otherwise next waits for the following byte.
func (l *lineReader) next(final bool) (end, after int, ok bool) {
	nl, cr := l.findNL(), l.findCR()
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
	l.nl, l.nlTo, l.cr, l.crTo = -1, 0, -1, 0
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

// text is the decoded text of the line buf[r:end]: a substring of the
// arena, made anew (from r, 4 KiB or the line) when the line is not in it.
// Invalid UTF-8 becomes U+FFFD.
func (l *lineReader) text(end int) string {
	if l.arena == "" || l.r < l.arenaAt || end > l.arenaAt+len(l.arena) {
		n := max(end, min(l.w, l.r+arenaSize))
		l.arena, l.arenaAt = string(l.buf[l.r:n]), l.r
		l.arenaValid = utf8.ValidString(l.arena)
	}
	s := l.arena[l.r-l.arenaAt : end-l.arenaAt]
	if l.arenaValid || utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// decode turns a line's bytes into text: invalid UTF-8 becomes U+FFFD.
func decode(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
