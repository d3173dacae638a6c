package filesource

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

func TestParseStrategy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Strategy
	}{
		{"committed", Committed}, {"earliest", Earliest}, {"latest", Latest},
		{"once-earliest", OnceEarliest}, {"once-latest", OnceLatest},
		{"ONCE_LATEST", OnceLatest}, {" Committed ", Committed},
	} {
		got, err := ParseStrategy(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if err == nil && got.String() != strings.ReplaceAll(strings.ToLower(strings.TrimSpace(tc.in)), "_", "-") {
			t.Errorf("String() = %q for %q", got.String(), tc.in)
		}
	}
	if _, err := ParseStrategy("commited"); !errors.Is(err, ErrStrategy) || !strings.HasPrefix(err.Error(), "filesource: ") {
		t.Fatalf("err = %v, want ErrStrategy", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		path string
		opts Options
		want error
	}{
		{"", Options{}, ErrOptions},
		{"in", Options{Read: Strategy(9)}, ErrStrategy},
		{"in", Options{Interval: -1}, ErrOptions},
		{"in", Options{Pointer: "in"}, ErrOptions},
	} {
		if _, err := New(tc.path, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("New(%q, %+v) = %v, want %v", tc.path, tc.opts, err, tc.want)
		}
	}
	s, err := New("in", Options{})
	if err != nil || s.PointerPath() != "in.ptr" || s.Strategy() != Committed || s.DefaultPolicy().Kind != engine.PauseKind {
		t.Fatalf("defaults: %v %q %v", err, s.PointerPath(), s.Strategy())
	}
}

// latest publishes only lines appended after the start: not the lines
// already there, nor the rest of a line begun before the start.
func TestLatestPublishesOnlyLinesAppendedAfterTheStart(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		want                []string
	}{
		{"at-a-line-start", "a\nb\n", "c\nd\n", []string{"c", "d"}},
		{"inside-a-line", "a\nbe", "gun\nc\n", []string{"c"}},
		{"between-cr-and-lf", "a\r", "\nc\n", []string{"c"}},
		{"empty-file", "", "c\n", []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, "")
				writeFile(t, path, tc.before)
				src, _ := newSource(t, path, Options{Read: Latest})
				p := &rec{}
				r := startOn(t, src, p)
				testutil.AdvanceUntil(t, "started", func() bool { return r.feed().State == engine.StateCaughtUp })
				appendFile(t, path, tc.after)
				r.settle(len(tc.want), p)
				testutil.Advance(5 * time.Millisecond)
				if got, _ := p.got(); !slices.Equal(got, tc.want) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
				if _, err := os.Stat(path + ".ptr"); !os.IsNotExist(err) {
					t.Fatal("latest created a pointer file")
				}
			})
		})
	}
}

func TestOnceLatestPublishesNothingAndEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "a\nb\n")
		src, _ := newSource(t, path, Options{Read: OnceLatest})
		p := &rec{}
		r := startOn(t, src, p)
		st := r.settle(0, p)
		f := st.Feeds[0]
		if f.State != engine.StateEndOfStream || !f.Bounded || f.Detail == nil || !strings.Contains(*f.Detail, "no line is read") || p.count() != 0 {
			t.Fatalf("state %s bounded %v detail %v handled %d", f.State, f.Bounded, f.Detail, p.count())
		}
	})
}

// earliest reads from 0 and tails, without a pointer; its epoch is the
// file's identity.
func TestEarliestReadsFromTheStartAndTails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "a\nb\n")
		src, _ := newSource(t, path, Options{Read: Earliest})
		p := &rec{}
		r := startOn(t, src, p)
		r.settle(2, p)
		appendFile(t, path, "c\n")
		r.settle(3, p)
		got, ds := p.got()
		fi, _ := os.Stat(path)
		if !slices.Equal(got, []string{"a", "b", "c"}) || ds[0].Epoch != int64(identity(fi)) {
			t.Fatalf("got %q epoch %d", got, ds[0].Epoch)
		}
		if _, err := os.Stat(path + ".ptr"); !os.IsNotExist(err) {
			t.Fatal("earliest created a pointer file")
		}
		if f := r.feed(); f.State != engine.StateCaughtUp || f.Bounded || f.PendingAcks != 0 {
			t.Fatalf("feed %+v", f)
		}
	})
}

// once-earliest reads from 0 to the end, ends with END_OF_STREAM, counts
// the bytes after the last terminator as unterminated, and a lone '\r' at
// the end terminates the last line.
func TestOnceEarliest(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
		unterminated  int64
	}{
		{"terminated", "a\nb\r\nc\n", []string{"a", "b", "c"}, 0},
		{"ends-with-a-lone-cr", "a\r\nb\rc\r", []string{"a", "b", "c"}, 0},
		{"unterminated", "a\nb\npartial", []string{"a", "b"}, 7},
		{"empty", "", nil, 0},
		{"long-lines", strings.Repeat("x", 70000) + "\n" + strings.Repeat("y", 3) + "\r\n", []string{strings.Repeat("x", 70000), "yyy"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, "")
				writeFile(t, path, tc.content)
				src, _ := newSource(t, path, Options{Read: OnceEarliest})
				src.bufSize = 4096
				p := &rec{}
				r := startOn(t, src, p)
				st := r.settle(len(tc.want), p)
				f := st.Feeds[0]
				got, _ := p.got()
				if !slices.Equal(got, tc.want) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
				if f.State != engine.StateEndOfStream || !f.Bounded || f.Unterminated != tc.unterminated {
					t.Fatalf("state %s bounded %v unterminated %d, want END_OF_STREAM, bounded, %d", f.State, f.Bounded, f.Unterminated, tc.unterminated)
				}
				if _, err := os.Stat(path + ".ptr"); !os.IsNotExist(err) {
					t.Fatal("once-earliest created a pointer file")
				}
			})
		})
	}
}

func TestOnceEarliestOfAMissingFileFails(t *testing.T) {
	path := input(t, "")
	src, _ := newSource(t, path, Options{Read: OnceEarliest})
	err := src.Run(t.Context(), intakeFor(t, src, 4, (&testutil.Logs{}).Logger()))
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != path || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "filesource: open ") {
		t.Fatalf("err = %v", err)
	}
}

// A tailing source waits for a file that does not exist yet.
func TestATailingSourceWaitsForTheFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "")
		src, _ := newSource(t, path, Options{})
		p := &rec{}
		r := startOn(t, src, p)
		testutil.AdvanceUntil(t, "waiting", func() bool {
			d := r.feed().Detail
			return d != nil && strings.Contains(*d, "waiting for")
		})
		writeFile(t, path, "a\n")
		r.settle(1, p)
	})
}
