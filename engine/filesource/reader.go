package filesource

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/blackbox-audit/blackbox/core"
)

// defaultBufSize is the size of one read: large buffered reads keep the
// system calls per line negligible.
const defaultBufSize = 256 << 10

// DefaultMaxLine is the default maximum line length (Options.MaxLine).
const DefaultMaxLine = 16 << 20

type skipMode uint8

const (
	skipNone skipMode = iota
	skipRest          // discard up to and including the next terminator (a line begun before the start)
	skipLF            // discard one leading '\n' (the start sat between '\r' and '\n')
	skipOver          // discard up to and including the next terminator, and report it (an oversized line)
	skipNUL           // discard leading NUL bytes (a hole a stale writer left in a truncated file)
)

// extent is a range of file offsets: [from, to).
type extent struct{ from, to int64 }

// lineReader splits the bytes of src, from an offset, into lines ended by
// "\n", "\r\n" or "\r". It reads with large ReadAt calls into one buffer and
// remembers where the next '\n' and '\r' are, so that each byte is searched
// once. Not safe for concurrent use.
type lineReader struct {
	name string // the file's name, for warnings
	src  io.ReaderAt
	buf  []byte
	r, w int   // unconsumed bytes: buf[r:w]
	pos  int64 // file offset of buf[r]: the offset after the last consumed line
	skip skipMode

	// max is the longest line (without its terminator) lines returns; a
	// longer one is skipped whole (skipOver from overFrom) and its extent
	// appended to over. holes counts the NUL bytes skipNUL discarded, from
	// holeFrom. The Source takes both after each publish.
	max      int
	overFrom int64
	over     []extent
	holes    int64
	holeFrom int64

	// head is a copy of the file's first bytes as they were read (at most
	// FingerprintMax): the fingerprint is made from it, never from what
	// the file holds later, and the file is compared with it to notice an
	// in-place rewrite. checked is how many of them were last found
	// unchanged in the file (the prefix check): the bytes read after that
	// may already be a rewrite's.
	head    []byte
	checked int

	// Where the next '\n' and '\r' are, so that each byte is searched once.
	nl, cr search

	spans []span // lines' scratch
	// Where the last batch lines returned begins (after the oversized
	// lines it skipped): a batch the feed did not take is rewound there.
	// batchNoCR: when it was taken, buf[batchR:batchW] held no '\r' (w
	// was batchW), so that a rewind into it keeps that knowledge rather
	// than search the rest of the buffer again.
	batchR    int
	batchPos  int64
	batchW    int
	batchNoCR bool

	// The Source's account of what it published from the file: pubEnd is
	// the end of the last line it published (where the reader began when
	// none), overAfter that an oversized line after it was counted lost.
	// The pointer moves on from the file at pubEnd: the bytes after it that
	// were consumed and never published (oversized lines, a hole) are never
	// acknowledged.
	pubEnd    int64
	overAfter bool
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
	return &lineReader{src: src, buf: make([]byte, size), pos: off, pubEnd: off, nl: fresh, cr: fresh, max: DefaultMaxLine}
}

// drop discards the buffered bytes: they are never published.
func (l *lineReader) drop() {
	l.consume(l.w)
}

// readOff is the file offset of the next byte to read.
func (l *lineReader) readOff() int64 { return l.pos + int64(l.w-l.r) }

// buffered is how many bytes were read and not yet consumed.
func (l *lineReader) buffered() int { return l.w - l.r }

// fill reads once into the free end of the buffer. When the free end runs
// short, the unconsumed bytes move to the front (to a buffer twice as large
// when they fill more than half of it: a line longer than the buffer): the
// buffer is reused, so line texts are always copies (see lines). It returns
// how many bytes were read: 0 at the end of the file.
//
// A line that grows past max bytes with no terminator is not buffered
// further: its bytes are discarded as they are read until its terminator
// (skipOver), so the buffer stays within a small multiple of max.
func (l *lineReader) fill() (int, error) {
	if l.skip == skipNone && l.overlong() {
		l.skip, l.overFrom = skipOver, l.pos
		l.discardLine(false)
	}
	if free := len(l.buf) - l.w; free == 0 || free < len(l.buf)/4 {
		buf := l.buf
		if l.w-l.r > len(buf)/2 {
			buf = make([]byte, 2*len(buf))
		}
		l.w = copy(buf, l.buf[l.r:l.w])
		l.r = 0
		l.buf = buf
		l.nl, l.cr = fresh, fresh
	}
	at := l.readOff()
	n, err := l.src.ReadAt(l.buf[l.w:], at)
	if h := int64(len(l.head)); h < FingerprintMax && at <= h && h < at+int64(n) {
		from := l.w + int(h-at)
		l.head = append(l.head, l.buf[from:l.w+int(min(int64(n), FingerprintMax-at))]...)
	}
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
// searches restart from there, but for a rewind into the last batch when
// it held no '\r' (batchNoCR, nothing read since): there is still none
// up to w. (A feed that refuses a batch, paused, would otherwise have the
// rest of the buffer searched for '\r' again at each refusal: a third of
// the line reader's time when recording to SQLite, docs/PERFORMANCE.md.)
func (l *lineReader) rewind(r int, pos int64) {
	l.r, l.pos = r, pos
	l.nl, l.cr = fresh, fresh
	if l.batchNoCR && r >= l.batchR && l.w == l.batchW {
		l.cr = search{at: -1, to: l.w}
	}
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
	case skipRest, skipOver:
		if !l.discardLine(final) {
			return false
		}
	case skipNUL:
		i := l.r
		for i < l.w && l.buf[i] == 0 {
			i++
		}
		l.holes += int64(i - l.r)
		l.consume(i)
		if i == l.w && !final {
			return false
		}
	}
	l.skip = skipNone
	return true
}

// overlong reports whether the buffered bytes are the start of a line
// longer than max: no terminator among them (a '\r' that is the last byte
// may still be the start of "\r\n") and more than max bytes before it.
func (l *lineReader) overlong() bool {
	n := l.w - l.r
	if n <= l.max {
		return false
	}
	if l.find('\n', &l.nl) >= 0 {
		return false
	}
	if cr := l.find('\r', &l.cr); cr >= 0 {
		if cr < l.w-1 {
			return false
		}
		n--
	}
	return n > l.max
}

// discardLine discards the rest of the line being skipped (skipRest,
// skipOver): through its terminator if buffered (true), else every
// buffered byte but a last '\r' (false: more bytes are needed). At the end
// of a once-read (final) the line ends with the file. An oversized line's
// extent is appended to over when it ends.
func (l *lineReader) discardLine(final bool) bool {
	_, after, ok := l.next(final)
	switch {
	case ok:
		l.consume(after)
	case final:
		l.drop()
	default:
		keep := l.w
		if l.w > l.r && l.buf[l.w-1] == '\r' {
			keep-- // may be the first half of "\r\n"
		}
		l.consume(keep)
		return false
	}
	if l.skip == skipOver {
		l.over = append(l.over, extent{l.overFrom, l.pos})
	}
	return true
}

// lines takes up to max complete buffered lines (see next for final): it
// skips a line longer than l.max (appending its extent to over), and it
// appends their texts to texts and their positions (the file offset after
// each line's terminator) to ends. Invalid UTF-8 becomes U+FFFD (in a copy
// of that line); offsets stay exact.
//
// A batch of lines costs two allocations, not one per line: the texts are
// substrings of one copy of the batch's bytes (terminators included, so
// that it is one copy), and their interface values point to the elements
// of one array of their headers (see boxed).
func (l *lineReader) lines(final bool, max int, texts []any, ends []core.Position) ([]any, []core.Position) {
	spans := l.spans[:0]
	from := l.r
	noCR := l.find('\r', &l.cr) < 0 // w stays put: none in buf[r:w] for this whole call
	for len(spans) < max {
		var end, after int
		if noCR {
			// No '\r' in the buffer: the next '\n' ends the line.
			i := bytes.IndexByte(l.buf[l.r:l.w], '\n')
			if i < 0 {
				break
			}
			end, after = l.r+i, l.r+i+1
		} else {
			var ok bool
			if end, after, ok = l.next(final); !ok {
				break
			}
		}
		if end-l.r > l.max { // an oversized line that arrived whole: skipped
			if len(spans) > 0 {
				break // the batch ends before it
			}
			at := l.pos
			l.consume(after)
			l.over = append(l.over, extent{at, l.pos})
			from = l.r
			continue
		}
		if len(spans) == 0 {
			l.batchR, l.batchPos, l.batchW, l.batchNoCR = l.r, l.pos, l.w, noCR
		}
		spans = append(spans, span{l.r, end})
		l.consume(after)
		ends = append(ends, core.Position{Offset: l.pos})
	}
	l.spans = spans
	if len(spans) == 0 {
		return texts, ends
	}
	all := string(l.buf[from:spans[len(spans)-1].to])
	// "\n" and "\r" are never part of a multi-byte sequence: when the
	// batch is valid UTF-8, so is each of its lines.
	valid := utf8.ValidString(all)
	box := make([]string, len(spans))
	for i, sp := range spans {
		t := all[sp.from-from : sp.to-from]
		if !valid && !utf8.ValidString(t) {
			t = strings.ToValidUTF8(t, "\uFFFD")
		}
		box[i] = t
	}
	return boxed(texts, box), ends
}

// boxed appends the elements of box to texts as interface values that
// refer to them, allocating nothing: converting a string to an interface
// allocates a copy of its header (an allocation per line would make the
// garbage collector a large part of the source's time: the file source's
// benchmark, docs/PERFORMANCE.md), but an interface value holding a string
// is a pointer to a string header, and box, allocated once for the batch,
// holds them. box must never be written after: a value in an interface is
// immutable. reflect does the same for an element of a non-addressable
// array (Value.Index, then Interface), at the cost of copying the whole
// array and of a reflect call per element: 3.6 times the CPU of this in
// BenchmarkSource (0.47s against 0.13s of samples).
func boxed(texts []any, box []string) []any {
	for i := range box {
		var v any
		e := (*eface)(unsafe.Pointer(&v))
		e.typ, e.data = stringType, unsafe.Pointer(&box[i])
		texts = append(texts, v)
	}
	return texts
}

// eface is the layout of an interface value of type any: its dynamic
// type, and a pointer to its value (for a string, to its header).
type eface struct {
	typ, data unsafe.Pointer
}

// stringType is the dynamic type word of a string in an any.
var stringType = func() unsafe.Pointer {
	var v any = ""
	return (*eface)(unsafe.Pointer(&v)).typ
}()

// span is a line's bytes in the buffer: buf[from:to].
type span struct{ from, to int }
