package filesource

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// copyTo copies the file at from to to (a new file): copytruncate's copy.
// It may run on the source's goroutine (a hook): failures are t.Error.
func copyTo(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Error(err)
		return
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Error(err)
		return
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Error(err)
	}
	if err := out.Close(); err != nil {
		t.Error(err)
	}
}

// A copy-and-truncate rotation (logrotate's copytruncate) while the source
// follows the file: lines appended after the source's last read, then the
// file copied to a rotated name and truncated in place, then new lines
// written (fewer bytes than were read: noticed at the end of the file; or
// more: noticed after a read). The lines the source had not read are only
// in the copy: it finds the copy among the rotated names by the
// fingerprint of the bytes it read (holding at least its read position),
// reads it from there to its end under the old epoch (the positions go on),
// then the truncated file from 0 (under a new epoch with a pointer). No
// line is lost or repeated, and the run says lossless.
//
// With no copy at a rotated name (deleted, or never made: a truncation),
// the bytes after the read position are gone: the run counts them as a
// loss (unread: the file's identity, its epoch, the read position), warns,
// and says it is not lossless, never silently.
func TestACopyTruncateWhileFollowingLosesNoLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		copy  string // the copy's name after the path; "" for none
		after int    // new lines written after the truncation
	}{
		{"copy, truncation seen at the end of the file", "-0001", 1},
		{"copy, truncation seen after a read", "-0001", 12},
		{"copy at .1", ".1", 1},
		{"no copy, truncation seen at the end of the file", "", 1},
		{"no copy, truncation seen after a read", "", 12},
		{"copy at no rotated name", ".backup", 1},
	} {
		for _, strategy := range []Strategy{Committed, Earliest} {
			t.Run(tc.name+"/"+strategy.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					path := input(t, numbered("old", 0, 3))
					src, lg := newSource(t, path, Options{Read: strategy})
					p := &rec{}
					var lost losses
					r := startSource(t, src, lg, setup{procs: []*rec{p}, observer: lost.observer()})
					testutil.AdvanceUntil(t, "the first lines", func() bool { return p.count() == 3 && r.feed().State == engine.StateCaughtUp })
					fi, err := os.Stat(path)
					if err != nil {
						t.Fatal(err)
					}
					// The source sleeps (every goroutine of the bubble is
					// blocked): it looks again once the clock moves.
					appendFile(t, path, numbered("old", 3, 5)) // never read before the copy
					if tc.copy != "" {
						copyTo(t, path, path+tc.copy)
					}
					if err := os.Truncate(path, 0); err != nil {
						t.Fatal(err)
					}
					appendFile(t, path, numbered("new", 0, tc.after))
					found := tc.copy == "-0001" || tc.copy == ".1"
					want := linesOf("old", 0, 3)
					if found {
						want = append(want, linesOf("old", 3, 5)...)
					}
					want = append(want, linesOf("new", 0, tc.after)...)
					st := r.settle(len(want), p)
					got, ds := p.got()
					if !slices.Equal(got, want) {
						t.Fatalf("got %q\nwant %q\n%s", got, want, lg)
					}
					fs := st.Feeds[0]
					newAt := len(want) - tc.after // the first line of the truncated file
					if ds[newAt].Position.Offset != lineLen {
						t.Fatalf("the truncated file's first line at %d: want it read from 0", ds[newAt].Position.Offset)
					}
					if strategy == Committed && ds[newAt].Epoch == ds[0].Epoch {
						t.Fatal("the truncated file is read under the old epoch")
					}
					if found {
						for i := 3; i < 5; i++ {
							if ds[i].Epoch != ds[0].Epoch || ds[i].Position.Offset != int64(i+1)*lineLen {
								t.Fatalf("line %d from the copy at %+v: want it under the old epoch %d at %d", i, ds[i], ds[0].Epoch, (i+1)*lineLen)
							}
						}
						if !st.Lossless || fs.Losses[LossUnread] != 0 || len(lost.got()) != 0 {
							t.Fatalf("status %+v, losses %+v: want lossless\n%s", fs, lost.got(), lg)
						}
						if !lg.Has("copy") {
							t.Fatalf("no warning naming the copy:\n%s", lg)
						}
					} else {
						if st.Lossless || fs.Losses[LossUnread] != 1 {
							t.Fatalf("lossless %v, unreadFiles %d: want not lossless, 1\n%s", st.Lossless, fs.Losses[LossUnread], lg)
						}
						ls := lost.got()
						if len(ls) != 1 || ls[0].Reason != LossUnread || ls[0].Epoch != ds[0].Epoch || ls[0].From != 3*lineLen || ls[0].Seq != 3 ||
							!strings.Contains(ls[0].Detail, fmt.Sprintf("identity %x", identity(fi))) {
							t.Fatalf("losses %+v: want one unread loss of the file (identity %x, epoch %d) from offset %d, after the third line", ls, identity(fi), ds[0].Epoch, 3*lineLen)
						}
					}
					if strategy == Committed {
						testutil.AdvanceUntil(t, "the truncated file committed", func() bool {
							ptr := readPointer(t, path+".ptr")
							return ptr.Identity == identity(fi) && ptr.Epoch == ds[newAt].Epoch && ptr.Offset == int64(tc.after)*lineLen
						})
					}
				})
			})
		}
	}
}

// A once-read never moves on to another file: when the file it reads is
// truncated and rewritten under it, it reads the new content from 0, and
// the old content's bytes after the last line it published are counted as
// a loss (unread, from that line's end), never silently.
func TestAFileRewrittenUnderAOnceReadIsALoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("old", 0, 10))
		src, lg := newSource(t, path, Options{Read: OnceEarliest})
		src.bufSize = 2 * lineLen // two lines a read: the rest of the file is read later
		g := testutil.NewGate(t)
		p := &rec{gate: blockAt(linesOf("old", 3, 4)[0], g)}
		var lost losses
		r := startSource(t, src, lg, setup{procs: []*rec{p}, queue: 1, observer: lost.observer()})
		testutil.AdvanceUntil(t, "the source paused on a full queue", func() bool { return p.count() == 3 && r.feed().State == engine.StateBehind })
		writeFile(t, path, numbered("new", 0, 10)) // truncates and rewrites in place
		g.Open()
		var st engine.Status
		testutil.AdvanceUntil(t, "the once-read ended", func() bool {
			st = r.e.Status()
			return st.Settled
		})
		got, _ := p.got()
		k := slices.Index(got, linesOf("new", 0, 1)[0])
		if k < 4 || !slices.Equal(got[:k], linesOf("old", 0, k)) || !slices.Equal(got[k:], linesOf("new", 0, 10)) {
			t.Fatalf("got %q: want old lines from the first, then every new line", got)
		}
		fs := st.Feeds[0]
		if st.Lossless || fs.Losses[LossUnread] != 1 {
			t.Fatalf("lossless %v, unreadFiles %d: want not lossless, 1\n%s", st.Lossless, fs.Losses[LossUnread], lg)
		}
		if ls := lost.got(); len(ls) != 1 || ls[0].Reason != LossUnread || ls[0].From != int64(k)*lineLen {
			t.Fatalf("losses %+v: want one unread loss from offset %d", ls, k*lineLen)
		}
	})
}

// While the source reads the copy of a file truncated under it, the
// pointer describes the copy (its identity and fingerprint, the old epoch,
// the offset committed): a crash then resumes in the copy, at the first
// line not processed, and reads the truncated file after it (held until
// the copy's lines are committed: none of its lines is published before).
// No line is lost or repeated.
func TestACrashWhileReadingACopyResumesInTheCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("old", 0, 3))
		g := testutil.NewGate(t)
		p := &rec{gate: blockAt(linesOf("old", 3, 4)[0], g)}
		src, lg := newSource(t, path, Options{})
		r := startSource(t, src, lg, setup{procs: []*rec{p}})
		ptr := path + ".ptr"
		testutil.AdvanceUntil(t, "the first lines committed", func() bool {
			return p.count() == 3 && r.feed().State == engine.StateCaughtUp && readPointer(t, ptr).Offset == 3*lineLen
		})
		before := readPointer(t, ptr)
		appendFile(t, path, numbered("old", 3, 5))
		copyTo(t, path, path+"-0001")
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		appendFile(t, path, numbered("new", 0, 2))
		testutil.AdvanceUntil(t, "the copy read, the truncated file held", func() bool {
			f := r.feed()
			return f.Sequence == 5 && f.Detail != nil && strings.Contains(*f.Detail, "waiting for the lines of the file read before")
		})
		cp, err := os.Stat(path + "-0001")
		if err != nil {
			t.Fatal(err)
		}
		if got := readPointer(t, ptr); got.Identity != identity(cp) || got.Epoch != before.Epoch || got.Offset != 3*lineLen {
			t.Fatalf("pointer %+v: want the copy (identity %x) under the old epoch %d at %d", got, identity(cp), before.Epoch, 3*lineLen)
		}
		snapshot, err := os.ReadFile(ptr)
		if err != nil {
			t.Fatal(err)
		}
		// The crash: nothing more is processed, the pointer file is what it was.
		p.ignore.Store(true)
		g.Open()
		r.stop()
		if err := os.WriteFile(ptr, snapshot, 0o644); err != nil {
			t.Fatal(err)
		}
		p2, _ := once(t, path, Options{}, 4)
		got, ds := p2.got()
		if want := slices.Concat(linesOf("old", 3, 5), linesOf("new", 0, 2)); !slices.Equal(got, want) {
			t.Fatalf("the restart got %q, want %q", got, want)
		}
		if ds[0].Epoch != before.Epoch || ds[0].Position.Offset != 4*lineLen {
			t.Fatalf("first re-delivered %+v: want the copy's line under the old epoch %d at %d", ds[0], before.Epoch, 4*lineLen)
		}
	})
}

// A copy-and-truncate rotation, then lines written to the truncated file
// and a rotation by rename, all before the source looks again: it reads
// the rest of the old content from the copy, then the truncated file's new
// lines at its rotated name (from 0), then the files rotated after it,
// then the path. After a first copytruncate the source had reopened the
// truncated file empty: that file is not taken for one it read. No line is
// lost or repeated, and the run says lossless.
func TestATruncatedFileRenamedBeforeTheSourceLooksIsReadAfterItsCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("a", 0, 3))
		src, lg := newSource(t, path, Options{})
		p := &rec{}
		r := startSource(t, src, lg, setup{procs: []*rec{p}})
		testutil.AdvanceUntil(t, "the first lines", func() bool { return p.count() == 3 && r.feed().State == engine.StateCaughtUp })
		copyTruncate := func(lines, to string) {
			appendFile(t, path, lines)
			copyTo(t, path, to)
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}
		copyTruncate(numbered("a", 3, 5), path+"-0001")
		testutil.AdvanceUntil(t, "the first copy read", func() bool { return p.count() == 5 && r.feed().State == engine.StateCaughtUp })
		appendFile(t, path, numbered("b", 0, 3))
		testutil.AdvanceUntil(t, "the truncated file's lines", func() bool { return p.count() == 8 && r.feed().State == engine.StateCaughtUp })
		// While the source sleeps: a second copytruncate, then lines
		// written to the truncated file, which is renamed; a new file at
		// the path.
		copyTruncate(numbered("b", 3, 5), path+"-0002")
		appendFile(t, path, numbered("c", 0, 2))
		if err := os.Rename(path, path+"-0003"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, numbered("d", 0, 2))
		want := slices.Concat(linesOf("a", 0, 5), linesOf("b", 0, 5), linesOf("c", 0, 2), linesOf("d", 0, 2))
		st := r.settle(len(want), p)
		if got, _ := p.got(); !slices.Equal(got, want) {
			t.Fatalf("got %q\nwant %q\n%s", got, want, lg)
		}
		if fs := st.Feeds[0]; !st.Lossless || fs.Losses[LossUnread] != 0 {
			t.Fatalf("status %+v: want lossless", fs)
		}
	})
}

// A file truncated while followed is read again from 0 under a new epoch,
// kept as the pointer file's pending header until a line of it is
// committed. Copied and truncated again meanwhile (copytruncate), it is
// read from 0 a third time: under another new epoch, never the pending
// one, which its earlier content's lines carry (torture seed
// 1796300000000000061, invariant 5: the pending header, taken for a file
// after the pointer's, gave the new content the old content's epoch, and
// the pointer went back to offset 0 of it).
func TestAFileReadAgainAfterALossIsNeverReadUnderItsPendingEpochTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("a", 0, 4))
		g := testutil.NewGate(t)
		slow := &rec{gate: blockAt(linesOf("x", 0, 1)[0], g)} // holds every acknowledgement of x's epoch
		fast := &rec{}
		src, lg := newSource(t, path, Options{})
		r := startSource(t, src, lg, setup{procs: []*rec{slow, fast}})
		testutil.AdvanceUntil(t, "a read", func() bool { return fast.count() == 4 && r.feed().State == engine.StateCaughtUp })
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "the truncation seen", func() bool { return lg.Has("never read") })
		appendFile(t, path, numbered("x", 0, 3))
		testutil.AdvanceUntil(t, "x read", func() bool { return fast.count() == 7 })
		copyTo(t, path, path+"-0001")
		writeFile(t, path, numbered("y", 0, 2)) // truncated in place, and written
		testutil.AdvanceUntil(t, "y held (its epoch drawn) until x is committed", func() bool {
			d := r.feed().Detail
			return d != nil && strings.Contains(*d, "waiting for the lines of the file read before")
		})
		g.Open()
		r.settle(9, slow, fast)
		got, ds := fast.got()
		if want := slices.Concat(linesOf("a", 0, 4), linesOf("x", 0, 3), linesOf("y", 0, 2)); !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		if x, y := ds[4].Epoch, ds[7].Epoch; x == y || y == ds[0].Epoch {
			t.Fatalf("epochs: a %d, x %d, y %d: y's content read under an earlier content's epoch", ds[0].Epoch, x, y)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "the pointer at y's end", func() bool {
			p := readPointer(t, path+".ptr")
			return p.Identity == identity(fi) && p.Epoch == ds[7].Epoch && p.Offset == 2*lineLen
		})
	})
}

// A rotated file's successor is held (its lines wait for the old file's to
// be committed), but its first bytes are read meanwhile: written, copied
// and truncated during the hold (copytruncate), it is noticed as any read
// file is, and its lines are read from the copy. Before, the hold made the
// file's "one look" last as long as the hold: the source found it empty
// when the hold ended, never looked for a copy, and its lines were lost
// with the feed lossless (torture seed 1796340000000000039, invariant 1).
func TestAFileCopiedAndTruncatedWhileItsLinesAreHeldIsReadFromItsCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("old", 0, 4))
		g := testutil.NewGate(t)
		slow := &rec{gate: blockAt(linesOf("old", 3, 4)[0], g)}
		src, lg := newSource(t, path, Options{})
		r := startSource(t, src, lg, setup{procs: []*rec{slow}})
		testutil.AdvanceUntil(t, "the old lines read", func() bool { return r.feed().Sequence == 4 && slow.count() == 3 })
		if err := os.Rename(path, path+"-0001"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, "")
		testutil.AdvanceUntil(t, "the new file held", func() bool {
			d := r.feed().Detail
			return d != nil && strings.Contains(*d, "waiting for the lines of the file read before")
		})
		appendFile(t, path, numbered("new", 0, 3))
		testutil.Advance(5 * time.Millisecond) // looks at the held file
		copyTo(t, path, path+"-0002")
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		testutil.Advance(5 * time.Millisecond)
		g.Open()
		st := r.settle(7, slow)
		got, _ := slow.got()
		if want := slices.Concat(linesOf("old", 0, 4), linesOf("new", 0, 3)); !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q\n%s", got, want, lg)
		}
		if !st.Feeds[0].Lossless {
			t.Fatalf("not lossless: %+v", st.Feeds[0])
		}
	})
}
