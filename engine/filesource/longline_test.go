package filesource

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// A line longer than Options.MaxLine is skipped whole (never truncated,
// never published), counted (oversized: the feed is not lossless) and
// warned with its offsets; the lines around it are published with exact
// positions, and the pointer moves past it. The reader does not buffer the
// long line: a 50 MB line under a 1 MiB limit allocates a few MiB, not the
// line.
func TestAnOversizedLineIsSkippedWholeWithoutBufferingIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if testing.Short() {
			t.Skip("writes a 50 MB file")
		}
		const (
			limit = 1 << 20
			long  = 50 << 20
		)
		path := input(t, "")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		chunk := bytes.Repeat([]byte{'x'}, 1<<20)
		f.WriteString("a\n")
		for range long / len(chunk) {
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		f.WriteString("\nb\n")
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		chunk = nil

		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		src, lg := newSource(t, path, Options{MaxLine: limit})
		p := &rec{}
		r := startSource(t, src, lg, setup{procs: []*rec{p}})
		r.settle(2, p)
		runtime.ReadMemStats(&after)
		r.stop()

		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("allocated %d bytes (heap in use %d)", alloc, after.HeapAlloc)
		if alloc > 8*limit {
			t.Fatalf("allocated %d bytes reading a %d-byte line under a %d-byte limit: want at most %d", alloc, long, limit, 8*limit)
		}
		got, ds := p.got()
		if !slices.Equal(got, []string{"a", "b"}) || ds[1].Position.Offset != 2+long+1+2 {
			t.Fatalf("got %q at %v", got, ds)
		}
		st := r.e.Status()
		if fs := st.Feeds[0]; fs.Losses[LossOversized] != 1 || fs.Lossless || st.Lossless {
			t.Fatalf("oversized %d, lossless %v (feed %v): want 1 and not lossless", fs.Losses[LossOversized], st.Lossless, fs.Lossless)
		}
		if want := fmt.Sprintf("a line of %d bytes at offsets [2, %d)", long+1, 2+long+1); !lg.Has(want) {
			t.Fatalf("no warning %q:\n%s", want, lg)
		}
		if ptr := readPointer(t, path+".ptr"); ptr.Offset != 2+long+1+2 {
			t.Fatalf("pointer %d, want past the long line", ptr.Offset)
		}
	})
}

// The line length limit at the reader: a line of exactly max bytes is
// published, one byte more is skipped whole with its terminator, whatever
// the terminator and however the reads split it; an unterminated oversized
// tail of a once-read is skipped to the end of the file.
func TestTheMaximumLineLengthAtTheReader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		final bool
		want  []line
		over  []extent
	}{
		{"exactly-max", "12345\nab\n", true, []line{{"12345", 6}, {"ab", 9}}, nil},
		{"max-plus-one", "123456\nab\n", true, []line{{"ab", 10}}, []extent{{0, 7}}},
		{"crlf", "123456\r\nab\r\n", true, []line{{"ab", 12}}, []extent{{0, 8}}},
		{"cr", "123456\rab\r", true, []line{{"ab", 10}}, []extent{{0, 7}}},
		{"max-then-crlf", "12345\r\nab\n", true, []line{{"12345", 7}, {"ab", 10}}, nil},
		{"long-in-the-middle", "a\n1234567890123\nb\n", true, []line{{"a", 2}, {"b", 18}}, []extent{{2, 16}}},
		{"two-long", "1234567\n1234567\nc\n", true, []line{{"c", 18}}, []extent{{0, 8}, {8, 16}}},
		{"unterminated-tail-once", "a\n12345678901", true, []line{{"a", 2}}, []extent{{2, 13}}},
		{"unterminated-tail-tailing", "a\n12345678901", false, []line{{"a", 2}}, nil},
	} {
		for _, size := range []int{1, 2, 3, 7, 64} {
			t.Run(fmt.Sprintf("%s/buf=%d", tc.name, size), func(t *testing.T) {
				l := newLineReader(&growing{b: []byte(tc.in)}, 0, size)
				l.max = 5
				got := drain(t, l, false)
				if tc.final {
					got = append(got, drain(t, l, true)...)
				}
				if !slices.Equal(got, tc.want) {
					t.Fatalf("lines %v, want %v", got, tc.want)
				}
				if !slices.Equal(l.over, tc.over) {
					t.Fatalf("oversized %v, want %v", l.over, tc.over)
				}
				if len(l.buf) > 4*l.max+2*size+8 {
					t.Fatalf("buffer grew to %d bytes for a limit of %d", len(l.buf), l.max)
				}
			})
		}
	}
}

// referenceMax splits b the simple way, final, skipping the lines longer
// than max bytes (reported as extents, terminator included).
func referenceMax(b []byte, max int) (out []line, over []extent) {
	start := 0
	emit := func(end, after int) {
		if end-start > max {
			over = append(over, extent{int64(start), int64(after)})
		} else {
			out = append(out, line{decode(b[start:end]), int64(after)})
		}
		start = after
	}
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			emit(i, i+1)
		case '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				emit(i, i+2)
				i++
			} else {
				emit(i, i+1)
			}
		}
	}
	if start < len(b) && len(b)-start > max {
		over = append(over, extent{int64(start), int64(len(b))})
	}
	return out, over
}

// FuzzLineReaderMaxLine: with a maximum line length, reading a file that
// grows in arbitrary chunks gives the lines of the reference split that are
// not too long, and reports exactly the others; the buffer stays bounded.
func FuzzLineReaderMaxLine(f *testing.F) {
	f.Add([]byte("a\n1234567\r\nb\r12345678"), uint8(3), uint8(2), uint8(4))
	f.Add([]byte("\r\r\n\n\r"), uint8(1), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, chunk, buf, max uint8) {
		limit := int(max) % 9
		want, over := referenceMax(data, limit)
		g := &growing{}
		l := newLineReader(g, 0, int(buf)%16+1)
		l.max = limit
		var got []line
		c := int(chunk)%7 + 1
		for i := 0; i < len(data); i += c {
			g.mu.Lock()
			g.b = append(g.b, data[i:min(i+c, len(data))]...)
			g.mu.Unlock()
			got = append(got, drain(t, l, false)...)
		}
		got = append(got, drain(t, l, true)...)
		// The unterminated rest of a once-read that is not too long stays
		// buffered (counted as unterminated): not a line of want.
		if !slices.Equal(got, want) || !slices.Equal(l.over, over) {
			t.Fatalf("got %v over %v, want %v over %v", got, l.over, want, over)
		}
		if len(l.buf) > 4*limit+2*16+8 {
			t.Fatalf("buffer %d bytes for a limit of %d", len(l.buf), limit)
		}
	})
}

// An oversized line followed by lines the feed refuses (a full queue
// pauses the source): the refused lines are offered again, the oversized
// line is skipped and counted once, not at every retry.
func TestAnOversizedLineBeforeARefusedBatchIsCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "a\nc\n"+strings.Repeat("x", 100)+"\nb\nd\n")
		rel := testutil.NewGate(t)
		p := &rec{gate: blockAt("a", rel)}
		src, lg := newSource(t, path, Options{MaxLine: 10})
		r := startSource(t, src, lg, setup{procs: []*rec{p}, queue: 1})
		testutil.AdvanceUntil(t, "the source paused after the long line", func() bool { st := r.feed(); return st.Paused && st.Losses[LossOversized] == 1 })
		rel.Open()
		st := r.settle(4, p)
		if got, _ := p.got(); !slices.Equal(got, []string{"a", "c", "b", "d"}) {
			t.Fatalf("got %q", got)
		}
		if n := st.Feeds[0].Losses[LossOversized]; n != 1 {
			t.Fatalf("oversized %d, want 1:\n%s", n, lg)
		}
	})
}
