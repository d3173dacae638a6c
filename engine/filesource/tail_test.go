package filesource

import (
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

func startOn(t *testing.T, src *Source, p *rec) *run {
	t.Helper()
	return startSource(t, src, &testutil.Logs{}, setup{procs: []*rec{p}})
}

func newSource(t *testing.T, path string, opts Options) (*Source, *testutil.Logs) {
	t.Helper()
	lg := &testutil.Logs{}
	opts.Logger = lg.Logger()
	src, err := New(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return src, lg
}

// A file rotated while tailed is read to its end (what the writer appended
// to it after the source's last read included) before the new file, which
// is read from 0 under a new epoch.
func TestRotatedFileIsReadToItsEndBeforeTheNewOne(t *testing.T) {
	for _, strategy := range []Strategy{Committed, Earliest} {
		t.Run(strategy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("old", 0, 10))
				src, lg := newSource(t, path, Options{Read: strategy})
				var armed atomic.Bool
				src.hookEOF = func() {
					if armed.CompareAndSwap(true, false) {
						// Between the source's last read and its identity check:
						// the file is rotated, the writer appends to the rotated
						// file, and a new file appears.
						if err := os.Rename(path, path+".1"); err != nil {
							t.Error(err)
						}
						appendFile(t, path+".1", numbered("old", 10, 15))
						writeFile(t, path, numbered("new", 0, 5))
					}
				}
				p := &rec{}
				r := startSource(t, src, lg, setup{procs: []*rec{p}})
				testutil.AdvanceUntil(t, "the old lines", func() bool { return p.count() == 10 && r.feed().State == engine.StateCaughtUp })
				armed.Store(true)
				r.settle(20, p)
				got, ds := p.got()
				want := slices.Concat(linesOf("old", 0, 15), linesOf("new", 0, 5))
				if !slices.Equal(got, want) {
					t.Fatalf("got %q\nwant %q", got, want)
				}
				if ds[14].Epoch == ds[15].Epoch || ds[15].Position.Offset != lineLen {
					t.Fatalf("old epoch %d, new %d at %d: want a new epoch from 0", ds[14].Epoch, ds[15].Epoch, ds[15].Position.Offset)
				}
				if !lg.Has("was replaced while being read") {
					t.Fatalf("no warning:\n%s", lg)
				}
				if strategy == Committed {
					testutil.AdvanceUntil(t, "the new file committed", func() bool {
						p := readPointer(t, path+".ptr")
						return p.Epoch == ds[15].Epoch && p.Offset == 5*lineLen
					})
				}
			})
		})
	}
}

func linesOf(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		s := numbered(prefix, i, i+1)
		out = append(out, s[:len(s)-1])
	}
	return out
}

// A file replaced while tailed is read under a new epoch; the pointer keeps
// describing the old file (its identity, its epoch) until every line read
// from it is processed and committed, and only then moves to the new file,
// before any line of it is published (holding): an acknowledgement of the
// old file is never committed into the new pointer, and a crash before
// re-reads only the old file's unprocessed lines.
func TestAReplacedFileKeepsThePointerUntilItsLinesAreCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("old", 0, 10))
		relOld, relNew := testutil.NewGate(t), testutil.NewGate(t)
		old5, new0 := linesOf("old", 5, 6)[0], linesOf("new", 0, 1)[0]
		p := &rec{gate: func(s string) {
			switch s {
			case old5:
				relOld.Wait()
			case new0:
				relNew.Wait()
			}
		}}
		src, lg := newSource(t, path, Options{})
		r := startSource(t, src, lg, setup{procs: []*rec{p}})
		ptr := path + ".ptr"
		testutil.AdvanceUntil(t, "old lines read, 5 processed", func() bool {
			return p.count() == 5 && r.feed().State == engine.StateCaughtUp && readPointer(t, ptr).Offset == 5*lineLen
		})
		before := readPointer(t, ptr)
		replaceFile(t, path, numbered("new", 0, 4))
		testutil.AdvanceUntil(t, "the new file held", func() bool {
			d := r.feed().Detail
			return lg.Has("reading it from 0 under a new epoch") && d != nil && strings.Contains(*d, "waiting for the lines of the file read before")
		})
		testutil.Advance(10 * time.Millisecond)
		if seq := r.feed().Sequence; seq != 10 {
			t.Fatalf("%d lines published while the old file's lines are unprocessed: want 10 (the new file's held)", seq)
		}
		if got := readPointer(t, ptr); got != before {
			t.Fatalf("pointer %+v moved while the old file's lines are unprocessed: want %+v", got, before)
		}
		relOld.Open() // old-5..old-9 are processed: the pointer may move on
		testutil.AdvanceUntil(t, "old lines processed", func() bool { return p.count() == 10 })
		testutil.AdvanceUntil(t, "the new file read", func() bool { return r.feed().Sequence == 14 })
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := readPointer(t, ptr); got.Offset != 0 || got.Identity != identity(fi) {
			t.Fatalf("pointer %+v: want offset 0 of the new file (identity %x)", got, identity(fi))
		}
		relNew.Open()
		r.settle(14, p)
		testutil.AdvanceUntil(t, "the new file committed", func() bool { return readPointer(t, ptr).Offset == 4*lineLen })
		got, ds := p.got()
		if want := slices.Concat(linesOf("old", 0, 10), linesOf("new", 0, 4)); !slices.Equal(got, want) {
			t.Fatalf("got %q", got)
		}
		newEpoch := readPointer(t, ptr).Epoch
		if ds[9].Epoch != before.Epoch || ds[10].Epoch != newEpoch {
			t.Fatalf("epochs %d %d, want %d %d", ds[9].Epoch, ds[10].Epoch, before.Epoch, newEpoch)
		}
	})
}

// A file truncated in place while tailed is read from 0 under a new epoch.
func TestFileTruncatedWhileTailingIsReadFromTheStart(t *testing.T) {
	for _, strategy := range []Strategy{Committed, Earliest} {
		t.Run(strategy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("old", 0, 10))
				src, lg := newSource(t, path, Options{Read: strategy})
				p := &rec{}
				r := startOn(t, src, p)
				r.settle(10, p)
				writeFile(t, path, numbered("new", 0, 3)) // truncate in place, shorter
				r.settle(13, p)
				got, ds := p.got()
				if want := slices.Concat(linesOf("old", 0, 10), linesOf("new", 0, 3)); !slices.Equal(got, want) {
					t.Fatalf("got %q", got)
				}
				if ds[10].Position.Offset != lineLen {
					t.Fatalf("new file's first position %d", ds[10].Position.Offset)
				}
				if strategy == Committed && ds[10].Epoch == ds[9].Epoch {
					t.Fatal("same epoch after a truncation")
				}
				if !lg.Has("truncated") {
					t.Fatalf("no truncation warning:\n%s", lg)
				}
			})
		})
	}
}

// A partial last line is read once across a reopen: the path now names a
// file with the same leading bytes (the pointer is kept) in which the line
// was completed; the line is read from its start, never "parpartial".
func TestPartialLineIsReadOnceAcrossAReopen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "a\nb\npar")
		src, lg := newSource(t, path, Options{})
		p := &rec{}
		r := startOn(t, src, p)
		testutil.AdvanceUntil(t, "a and b", func() bool { return p.count() == 2 && r.feed().State == engine.StateCaughtUp })
		epoch := readPointer(t, path+".ptr").Epoch
		replaceFile(t, path, "a\nb\npartial\nc\n")
		r.settle(4, p)
		got, ds := p.got()
		if want := []string{"a", "b", "partial", "c"}; !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		if ds[2].Epoch != epoch || ds[2].Position.Offset != 12 {
			t.Fatalf("partial at %d epoch %d, want 12 under %d", ds[2].Position.Offset, ds[2].Epoch, epoch)
		}
		if !lg.Has("same first") {
			t.Fatalf("no warning:\n%s", lg)
		}
	})
}

// A path with no file (a rotation in progress) is not a change: the open
// file is read on; the file that appears later is read after it.
func TestAPathWithNoFileIsNotAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("old", 0, 3))
		src, _ := newSource(t, path, Options{})
		p := &rec{}
		r := startOn(t, src, p)
		r.settle(3, p)
		if err := os.Rename(path, path+".1"); err != nil {
			t.Fatal(err)
		}
		appendFile(t, path+".1", numbered("old", 3, 6))
		r.settle(6, p)
		if st := r.feed(); st.State != engine.StateCaughtUp {
			t.Fatalf("state %s %v with no file at the path", st.State, st.Detail)
		}
		writeFile(t, path, numbered("new", 0, 2))
		r.settle(8, p)
		got, _ := p.got()
		if want := slices.Concat(linesOf("old", 0, 6), linesOf("new", 0, 2)); !slices.Equal(got, want) {
			t.Fatalf("got %q", got)
		}
	})
}

// The identity is the opened file's (its descriptor), so a rotation between
// the open and the identification does not label the old file with the new
// file's identity (the new file would never be read).
func TestTheOpenedFileIsIdentifiedByItsDescriptor(t *testing.T) {
	for _, strategy := range []Strategy{Committed, Earliest} {
		t.Run(strategy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("old", 0, 3))
				src, _ := newSource(t, path, Options{Read: strategy})
				var once atomic.Bool
				src.hookOpened = func() {
					if once.CompareAndSwap(false, true) {
						if err := os.Rename(path, path+".1"); err != nil {
							t.Error(err)
						}
						writeFile(t, path, numbered("new", 0, 6)) // longer: not mistaken for a truncation
					}
				}
				p := &rec{}
				r := startOn(t, src, p)
				r.settle(9, p)
				got, _ := p.got()
				if want := slices.Concat(linesOf("old", 0, 3), linesOf("new", 0, 6)); !slices.Equal(got, want) {
					t.Fatalf("got %q", got)
				}
			})
		})
	}
}

// A tailing read waits for the byte after a '\r' (it may be the '\n' of
// "\r\n"): no empty line is published when the '\n' arrives later.
func TestATailingReadWaitsForTheByteAfterACR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "a\r")
		src, _ := newSource(t, path, Options{Read: Earliest})
		p := &rec{}
		r := startOn(t, src, p)
		testutil.AdvanceUntil(t, "caught up", func() bool { return r.feed().State == engine.StateCaughtUp })
		testutil.Advance(5 * time.Millisecond)
		if p.count() != 0 {
			t.Fatal("a line ended by a '\\r' with nothing after it was published while tailing")
		}
		appendFile(t, path, "\nb\r\r\n")
		r.settle(3, p)
		testutil.Advance(5 * time.Millisecond)
		got, ds := p.got()
		if want := []string{"a", "b", ""}; !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		if offs := []int64{ds[0].Position.Offset, ds[1].Position.Offset, ds[2].Position.Offset}; !slices.Equal(offs, []int64{3, 5, 7}) {
			t.Fatalf("positions %v", offs)
		}
	})
}

// Two replacements while the first file's lines are still queued: the
// second file is opened (kept open: replaced in turn, it is still read)
// but none of its lines is published until the first file's lines are
// committed; the pointer stays on the first file until then, then moves
// through the second to the third, never committing one file's offset
// under another's identity.
func TestTwoReplacementsWhileLinesAreQueuedMoveThePointerInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("one", 0, 4))
		rel := testutil.NewGate(t)
		p := &rec{gate: blockAt(linesOf("one", 2, 3)[0], rel)}
		src, lg := newSource(t, path, Options{})
		r := startSource(t, src, lg, setup{procs: []*rec{p}})
		ptr := path + ".ptr"
		testutil.AdvanceUntil(t, "one read, 2 processed", func() bool {
			return r.feed().Sequence == 4 && r.feed().State == engine.StateCaughtUp && readPointer(t, ptr).Offset == 2*lineLen
		})
		before := readPointer(t, ptr)
		replaceFile(t, path, numbered("two", 0, 3))
		testutil.AdvanceUntil(t, "two opened", func() bool { return lg.Has("reading it from 0 under a new epoch") })
		replaceFile(t, path, numbered("three", 0, 2))
		testutil.Advance(10 * time.Millisecond)
		if seq := r.feed().Sequence; seq != 4 {
			t.Fatalf("%d lines published while the first file's lines are queued: want 4 (two held)", seq)
		}
		if got := readPointer(t, ptr); got != before {
			t.Fatalf("pointer %+v moved while the first file's lines are queued: want %+v", got, before)
		}
		rel.Open()
		r.settle(9, p)
		if got, _ := p.got(); !slices.Equal(got, slices.Concat(linesOf("one", 0, 4), linesOf("two", 0, 3), linesOf("three", 0, 2))) {
			t.Fatalf("got %q", got)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		_, ds := p.got()
		testutil.AdvanceUntil(t, "the third file committed", func() bool {
			got := readPointer(t, ptr)
			return got.Identity == identity(fi) && got.Epoch == ds[8].Epoch && got.Offset == 2*lineLen
		})
		if ds[3].Epoch == ds[4].Epoch || ds[6].Epoch == ds[7].Epoch {
			t.Fatalf("epochs %d %d %d: want one per file", ds[3].Epoch, ds[4].Epoch, ds[7].Epoch)
		}
	})
}
