package filesource

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// rewriteInPlace rewrites path's content through the same inode: with
// truncate, ftruncate to 0 and write in one open (cp over a file, case 12);
// without, overwrite from offset 0 (the file never shrinks). It runs on
// the source's goroutine (a hook): failures are t.Error.
func rewriteInPlace(t testing.TB, path, content string, truncate bool) {
	t.Helper()
	flag := os.O_WRONLY
	if truncate {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(content), 0); err != nil {
		t.Error(err)
	}
}

func newLines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "new-line-number-%d,%d\n", i, i)
	}
	return b.String()
}

// An input rewritten in place while tailed (the same inode: truncated and
// rewritten longer before the tailer looks, or overwritten without a
// truncation, as long or longer) is noticed by its first bytes, not by its
// size: what was read after the rewrite is discarded (never a fragment
// such as "r-1,1"), and the file is read again from 0 under a new epoch
// (committed), said in a warning and counted (replaced).
func TestAnInputRewrittenInPlaceWhileTailedIsReadAgainFromTheStart(t *testing.T) {
	const old = "old-line-0,0\nold-line-1,1\nold-2,2\n"
	oldLines := []string{"old-line-0,0", "old-line-1,1", "old-2,2"}
	for _, tc := range []struct {
		name     string
		content  string
		truncate bool
	}{
		{"truncate-and-rewrite-longer", newLines(5), true},
		{"overwrite-same-length", "OLD-LINE-0,0\nOLD-LINE-1,1\nOLD-2,2\n", false},
		{"overwrite-longer", newLines(5), false},
	} {
		for _, strategy := range []Strategy{Committed, Earliest} {
			t.Run(tc.name+"/"+strategy.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					path := input(t, old)
					src, lg := newSource(t, path, Options{Read: strategy})
					var armed atomic.Bool
					src.hookEOF = func() {
						if armed.CompareAndSwap(true, false) {
							rewriteInPlace(t, path, tc.content, tc.truncate)
						}
					}
					p := &rec{}
					r := startSource(t, src, lg, setup{procs: []*rec{p}})
					testutil.AdvanceUntil(t, "the old lines", func() bool { return p.count() == 3 && r.feed().State == engine.StateCaughtUp })
					armed.Store(true)
					newOnes := strings.Split(strings.TrimSuffix(tc.content, "\n"), "\n")
					r.settle(3+len(newOnes), p)
					got, ds := p.got()
					if want := slices.Concat(oldLines, newOnes); !slices.Equal(got, want) {
						t.Fatalf("got %q\nwant %q", got, want)
					}
					if off := ds[3].Position.Offset; off != int64(len(newOnes[0])+1) {
						t.Fatalf("the rewritten file's first line at %d: want it read from 0", off)
					}
					if !lg.Has("rewritten in place") {
						t.Fatalf("no warning:\n%s", lg)
					}
					if n := r.src.Status().Replaced; n != 1 {
						t.Fatalf("replaced %d, want 1", n)
					}
					if strategy == Committed {
						if ds[3].Epoch == ds[2].Epoch {
							t.Fatal("the rewritten file is read under the old epoch")
						}
						testutil.AdvanceUntil(t, "the rewritten file committed", func() bool {
							p := readPointer(t, path+".ptr")
							return p.Epoch == ds[3].Epoch && p.Offset == int64(len(tc.content))
						})
						want, _ := fingerprint(stringReaderAt(tc.content), int64(len(tc.content)))
						if p := readPointer(t, path+".ptr"); p.Fingerprint != want {
							t.Fatalf("pointer %+v: want the fingerprint of the rewritten content", p)
						}
					}
				})
			})
		}
	}
}

// A file rewritten in place (overwritten longer) while a run tails it,
// then a restart: every line of the new content is delivered, in the run
// or after the restart. The pointer's fingerprint grows only from the bytes
// the reader read, after checking the file still starts with them: it is
// never grown from the new content over a position of the old one (a
// restart would then take the rewritten file for the old one and skip its
// first lines).
func TestAnInPlaceRewriteIsNotLostAcrossARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("old", 0, 1))
		src, lg := newSource(t, path, Options{})
		var armed atomic.Bool
		content := numbered("new", 0, 4)
		src.hookEOF = func() {
			if armed.CompareAndSwap(true, false) {
				rewriteInPlace(t, path, content, false)
			}
		}
		p := &rec{}
		r := startSource(t, src, lg, setup{procs: []*rec{p}})
		r.settle(1, p)
		appendFile(t, path, numbered("old", 1, 3)) // the fingerprint grows over them
		testutil.AdvanceUntil(t, "the old lines", func() bool { return p.count() == 3 && r.feed().State == engine.StateCaughtUp })
		armed.Store(true)
		testutil.AdvanceUntil(t, "the rewrite read", func() bool { return !armed.Load() && r.e.Status().Settled })
		r.stop()

		p2 := &rec{}
		src2, lg2 := newSource(t, path, Options{})
		r2 := startSource(t, src2, lg2, setup{procs: []*rec{p2}})
		testutil.AdvanceUntil(t, "the restart settled", func() bool { return r2.e.Status().Settled })
		r2.stop()
		got1, _ := p.got()
		got2, _ := p2.got()
		all := slices.Concat(got1, got2)
		for _, want := range linesOf("new", 0, 4) {
			if !slices.Contains(all, want) {
				t.Fatalf("%q never delivered: run %q, restart %q", want, got1, got2)
			}
		}
		want, _ := fingerprint(stringReaderAt(content), int64(len(content)))
		if ptr := readPointer(t, path+".ptr"); ptr.Fingerprint != want || ptr.Offset != int64(len(content)) {
			t.Fatalf("pointer %+v: want the new content's fingerprint, at its end", ptr)
		}
	})
}

// copytruncate with a writer that keeps its old offset (no O_APPEND): the
// file truncated under the reader starts with a run of NUL bytes (a hole)
// before the writer's next line. The hole is skipped, counted (holeBytes)
// and warned; the line keeps its bytes and exact position. NUL bytes that
// are not at the start of a truncated file are data. The copy holds
// nothing the source had not read: the run is lossless; with no copy (a
// truncation alone), whether the file held bytes the source had not read
// cannot be known: counted unread, not lossless, the hole skipped all the
// same.
func TestAStaleWritersNULHoleIsSkippedAndCounted(t *testing.T) {
	const old = "line-0,0\nline-1,1\nl2,2\n" // 22 bytes: the writer's offset
	for _, tc := range []struct {
		name   string
		seen   bool   // the truncation is seen before the stale write
		after  string // what the stale writer writes at its offset
		want   []string
		noCopy bool // truncated without a copy
	}{
		{"write-before-the-tailer-looks", false, "after-truncate,3\n", []string{"after-truncate,3"}, false},
		{"write-after-the-truncation-was-seen", true, "after-truncate,3\n", []string{"after-truncate,3"}, false},
		{"nul-inside-a-line-is-data", false, "x\x00y\n", []string{"x\x00y"}, false},
		{"no-copy", false, "after-truncate,3\n", []string{"after-truncate,3"}, true},
	} {
		for _, strategy := range []Strategy{Committed, Earliest} {
			t.Run(tc.name+"/"+strategy.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					path := input(t, "")
					w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644) // no O_APPEND
					if err != nil {
						t.Fatal(err)
					}
					defer w.Close()
					if _, err := w.WriteString(old); err != nil {
						t.Fatal(err)
					}
					src, lg := newSource(t, path, Options{Read: strategy})
					var armed atomic.Bool
					src.hookEOF = func() {
						if armed.CompareAndSwap(true, false) {
							if !tc.noCopy {
								copyTo(t, path, path+".1")
							}
							if err := os.Truncate(path, 0); err != nil { // the copy's truncation
								t.Error(err)
							}
							if !tc.seen {
								w.WriteString(tc.after)
							}
						}
					}
					p := &rec{}
					r := startSource(t, src, lg, setup{procs: []*rec{p}})
					testutil.AdvanceUntil(t, "the old lines", func() bool { return p.count() == 3 && r.feed().State == engine.StateCaughtUp })
					armed.Store(true)
					if tc.seen {
						testutil.AdvanceUntil(t, "the truncation", func() bool { return lg.Has("truncated") })
						w.WriteString(tc.after)
					}
					r.settle(3+len(tc.want), p)
					got, ds := p.got()
					if want := slices.Concat([]string{"line-0,0", "line-1,1", "l2,2"}, tc.want); !slices.Equal(got, want) {
						t.Fatalf("got %q\nwant %q", got, want)
					}
					if off := ds[3].Position.Offset; off != int64(len(old)+len(tc.after)) {
						t.Fatalf("position %d", off)
					}
					if st, holes := r.feed(), r.src.Status().HoleBytes; holes != int64(len(old)) || st.Lossless != !tc.noCopy || st.Losses[LossUnread] != boolInt(tc.noCopy) {
						t.Fatalf("holeBytes %d lossless %v unreadFiles %d: want %d, lossless %v", holes, st.Lossless, st.Losses[LossUnread], len(old), !tc.noCopy)
					}
					if want := fmt.Sprintf("%d NUL bytes at offsets [0, %d)", len(old), len(old)); !lg.Has(want) {
						t.Fatalf("no warning %q:\n%s", want, lg)
					}
				})
			})
		}
	}
}

// NUL bytes at the start of a file that was not truncated are data.
func TestLeadingNULBytesOfAnUntruncatedFileAreData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "\x00\x00a\n")
		p, r := once(t, path, Options{Read: OnceEarliest}, 1)
		if got, _ := p.got(); got[0] != "\x00\x00a" || r.src.Status().HoleBytes != 0 {
			t.Fatalf("got %q, holeBytes %d", got, r.src.Status().HoleBytes)
		}
	})
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
