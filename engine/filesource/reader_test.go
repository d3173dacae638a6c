package filesource

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/blackbox-audit/blackbox/core"
)

// growing is an in-memory file that grows (a tailed file).
type growing struct {
	mu sync.Mutex
	b  []byte
}

func (g *growing) ReadAt(p []byte, off int64) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if off >= int64(len(g.b)) {
		return 0, io.EOF
	}
	n := copy(p, g.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

type line struct {
	text string
	pos  int64
}

// drain reads everything src holds now, like a duty cycle loop: it returns
// the complete lines (final: a lone trailing '\r' ends a line). It takes
// lines three at a time, so batches end anywhere in the buffer, and keeps
// their texts across the fills that reuse the buffer.
func drain(t testing.TB, l *lineReader, final bool) []line {
	t.Helper()
	var out []line
	take := func() {
		takeAll(l, final, func(texts []any, ends []core.Position) {
			for i, tx := range texts {
				out = append(out, line{tx.(string), ends[i].Offset})
			}
		})
	}
	for {
		take()
		n, err := l.fill()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			take()
			return out
		}
	}
}

// takeAll takes l's lines three at a time (so that batches end anywhere
// in the buffer), after what it must skip, handing each batch to batch,
// until it has no more.
func takeAll(l *lineReader, final bool, batch func(texts []any, ends []core.Position)) {
	if l.skip != skipNone && !l.doSkip(final) {
		return
	}
	for {
		texts, ends := l.lines(final, 3, nil, nil)
		if len(texts) == 0 {
			return
		}
		batch(texts, ends)
	}
}

// decode turns a line's bytes into text the simple way: invalid UTF-8
// becomes U+FFFD.
func decode(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// reference splits b the simple way, final.
func reference(b []byte) (out []line, rest int) {
	start := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			out = append(out, line{decode(b[start:i]), int64(i + 1)})
			start = i + 1
		case '\r':
			end := i
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
			out = append(out, line{decode(b[start:end]), int64(i + 1)})
			start = i + 1
		}
	}
	return out, len(b) - start
}

func TestLineReaderSplitsOnEveryTerminator(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		final    bool
		want     []line
		rest     int
	}{
		{"lf", "a\nbc\n", false, []line{{"a", 2}, {"bc", 5}}, 0},
		{"crlf", "a\r\nbc\r\n", false, []line{{"a", 3}, {"bc", 7}}, 0},
		{"cr", "a\rbc\rd", false, []line{{"a", 2}, {"bc", 5}}, 1},
		{"empty-lines", "\n\r\n\r\n", false, []line{{"", 1}, {"", 3}, {"", 5}}, 0},
		{"cr-then-crlf", "a\r\r\nb\n", false, []line{{"a", 2}, {"", 4}, {"b", 6}}, 0},
		{"trailing-cr-tailing", "a\nb\r", false, []line{{"a", 2}}, 2},
		{"trailing-cr-final", "a\nb\r", true, []line{{"a", 2}, {"b", 4}}, 0},
		{"partial", "a\nbcd", true, []line{{"a", 2}}, 3},
		{"invalid-utf8", "\xff\xfeok\n\xe2\x82\n", false, []line{{"\uFFFDok", 5}, {"\uFFFD", 8}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1, 2, 3, 64} {
				l := newLineReader(&growing{b: []byte(tc.in)}, 0, size)
				got := drain(t, l, tc.final)
				if !slices.Equal(got, tc.want) || l.buffered() != tc.rest {
					t.Fatalf("buffer %d: got %v rest %d, want %v rest %d", size, got, l.buffered(), tc.want, tc.rest)
				}
			}
		})
	}
}

// FuzzLineReader: reading a file that grows in arbitrary chunks, with a
// small buffer, gives the same lines and positions as splitting the whole
// file at once.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nb\r\nc\rd"), uint8(3), uint8(2))
	f.Add([]byte("\r\r\n\n\r"), uint8(1), uint8(1))
	f.Add([]byte("héllo\xff\r\nx"), uint8(5), uint8(4))
	f.Fuzz(func(t *testing.T, data []byte, chunk, buf uint8) {
		want, rest := reference(data)
		g := &growing{}
		l := newLineReader(g, 0, int(buf)%16+1)
		var got []line
		c := int(chunk)%7 + 1
		for i := 0; i < len(data); i += c {
			g.mu.Lock()
			g.b = append(g.b, data[i:min(i+c, len(data))]...)
			g.mu.Unlock()
			got = append(got, drain(t, l, false)...)
		}
		got = append(got, drain(t, l, true)...)
		if !slices.Equal(got, want) || l.buffered() != rest {
			t.Fatalf("got %v rest %d, want %v rest %d", got, l.buffered(), want, rest)
		}
		if !bytes.Equal(data[len(data)-rest:], l.buf[l.r:l.w]) {
			t.Fatal("unterminated bytes differ")
		}
	})
}

// FuzzLineReaderRefused: as FuzzLineReader, with batches a paused feed
// takes in part (refuse says how many lines of each), rewound as the
// Source's publish does: the lines and positions are still those of the
// whole file split at once.
func FuzzLineReaderRefused(f *testing.F) {
	f.Add([]byte("a\nb\nc\nd\ne\r\nf\n"), uint8(2), uint8(4), uint8(0x5a))
	f.Add([]byte("aaaa\nbb\rcc\r\n\n\nd\r"), uint8(3), uint8(1), uint8(0x13))
	f.Add([]byte("x\ny\nz\n"), uint8(1), uint8(15), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, chunk, buf, refuse uint8) {
		want, rest := reference(data)
		g := &growing{}
		l := newLineReader(g, 0, int(buf)%16+1)
		var got []line
		calls := 0
		take := func(final bool) {
			takeAll(l, final, func(texts []any, ends []core.Position) {
				calls++
				k := len(texts)
				if calls%2 == 1 { // every other batch is refused in part
					k = int(refuse>>(calls%8)) % (len(texts) + 1)
				}
				for i := range k {
					got = append(got, line{texts[i].(string), ends[i].Offset})
				}
				if k < len(texts) {
					to := l.batchPos
					if k > 0 {
						to = ends[k-1].Offset
					}
					l.rewind(l.batchR+int(to-l.batchPos), to)
				}
			})
		}
		pass := func(final bool) {
			for {
				take(final)
				n, err := l.fill()
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					take(final)
					return
				}
			}
		}
		c := int(chunk)%7 + 1
		for i := 0; i < len(data); i += c {
			g.mu.Lock()
			g.b = append(g.b, data[i:min(i+c, len(data))]...)
			g.mu.Unlock()
			pass(false)
		}
		pass(true)
		if !slices.Equal(got, want) || l.buffered() != rest {
			t.Fatalf("got %v rest %d, want %v rest %d", got, l.buffered(), want, rest)
		}
	})
}

// A batch the feed refuses is rewound without searching the rest of the
// buffer for '\r' again when the batch held none: the reader still knows
// there is none up to what it read.
func TestARefusedBatchKeepsTheSearchForCR(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		wantTo int // the '\r' search after the rewind: none up to (fresh: -1 with to 0)
	}{
		{"no cr", "a\nb\nc\nd\n", 8},
		{"a cr after the batch", "a\nb\nc\rd\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLineReader(strings.NewReader(tc.in), 0, 64)
			if _, err := l.fill(); err != nil {
				t.Fatal(err)
			}
			texts, ends := l.lines(false, 2, nil, nil)
			if len(texts) != 2 {
				t.Fatalf("%d lines, want 2", len(texts))
			}
			l.rewind(l.batchR+int(ends[0].Offset-l.batchPos), ends[0].Offset) // the second refused
			if got := l.cr; got.at >= l.r || got.to != tc.wantTo {
				t.Errorf("the '\\r' search after the rewind: %+v, want none found up to %d", got, tc.wantTo)
			}
			texts, _ = l.lines(false, 8, nil, nil)
			if n := strings.Count(tc.in, "\n") + strings.Count(tc.in, "\r") - 1; len(texts) != n {
				t.Errorf("%d lines after the rewind, want %d", len(texts), n)
			}
		})
	}
}

// A batch of lines costs two allocations whatever its length: one copy of
// its bytes and one array of string headers (the interface values share
// both), with the line texts still exact and independent of the buffer.
func TestABatchOfLinesCostsTwoAllocations(t *testing.T) {
	var src strings.Builder
	for i := range 4 * publishBatch {
		src.WriteString(strings.Repeat(string(rune('a'+i%26)), 1+i%90) + "\n")
	}
	l := newLineReader(strings.NewReader(src.String()), 0, 1<<20)
	if _, err := l.fill(); err != nil {
		t.Fatal(err)
	}
	texts := make([]any, 0, publishBatch)
	ends := make([]core.Position, 0, publishBatch)
	var kept []any
	allocs := testing.AllocsPerRun(3, func() {
		texts, ends = l.lines(false, publishBatch, texts[:0], ends[:0])
		kept = append(kept[:0:0], texts...)
	}) - 1 // kept's own copy
	if allocs != 2 {
		t.Errorf("%v allocations per batch of %d lines, want 2", allocs, publishBatch)
	}
	for i, v := range kept {
		n := 3*publishBatch + i
		if want := strings.Repeat(string(rune('a'+n%26)), 1+n%90); v.(string) != want {
			t.Fatalf("line %d: %q, want %q", n, v, want)
		}
	}
}
