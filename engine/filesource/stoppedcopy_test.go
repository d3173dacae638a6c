package filesource

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// neverRead runs a source on an empty file at a new path and stops it:
// the pointer names the file at 0 with an empty fingerprint (no byte of
// it read). It returns the path and the pointer.
func neverRead(t *testing.T) (string, Pointer) {
	t.Helper()
	path := input(t, "")
	writeFile(t, path, "")
	once(t, path, Options{}, 0)
	p := readPointer(t, path+".ptr")
	if p.FingerprintLen != 0 || p.Offset != 0 {
		t.Fatalf("pointer %+v: want the file at 0 with an empty fingerprint", p)
	}
	return path, p
}

// writtenAt sets the time the pointer file at ptr was last written to
// at: file times are coarse (a few milliseconds), and a test is faster.
func writtenAt(t *testing.T, ptr string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(ptr, at, at); err != nil {
		t.Fatal(err)
	}
}

func mustMadeAt(t *testing.T, name string) time.Time {
	t.Helper()
	at, err := madeAt(name)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// A restart whose pointer names the file at the path with an empty
// fingerprint (the source read no byte of it: it had just moved to a file
// a rotation left empty) cannot recognise a copy of it by its first
// bytes. While the source was stopped, lines were written to the file,
// which was copied to a rotated name and truncated (copytruncate): the
// restart takes the rotated sibling made after the pointer was last
// written, that the file at the path does not go on from, for the copy:
// it reads it from the pointer's offset under the pointer's epoch, then
// the truncated file from 0 under a new epoch. A plain backup copy (the
// file not truncated) is not read (the file at the path holds its lines),
// nor is a sibling made before the pointer was written (a file rotated
// before, read by an earlier run). Every line once, lossless. The restart
// used to find the file empty at the path, read nothing of the copy and
// say lossless (torture seed 44083).
//
// Over 100 lines: a table of five cases (what happens while stopped, a few
// lines each) and the one restart that checks them all; split, a case
// would be read apart from what it must give.
func TestACopyTruncateWhileStoppedOfAFileNeverReadLosesNoLine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stopped func(t *testing.T, path, ptr string) // what happens while stopped
		want    []string
		copied  int // how many lines come from the copy, under the pointer's epoch
	}{
		{
			name: "copytruncate, then lines written",
			stopped: func(t *testing.T, path, ptr string) {
				writtenAt(t, ptr, mustMadeAt(t, path).Add(-time.Hour))
				appendFile(t, path, numbered("old", 0, 4))
				copyTo(t, path, path+"-0001")
				if err := os.Truncate(path, 0); err != nil {
					t.Fatal(err)
				}
				appendFile(t, path, numbered("new", 0, 2))
			},
			want:   slices.Concat(linesOf("old", 0, 4), linesOf("new", 0, 2)),
			copied: 4,
		},
		{
			name: "copytruncate, more lines written than copied",
			stopped: func(t *testing.T, path, ptr string) {
				writtenAt(t, ptr, mustMadeAt(t, path).Add(-time.Hour))
				appendFile(t, path, numbered("old", 0, 2))
				copyTo(t, path, path+".1")
				if err := os.Truncate(path, 0); err != nil {
					t.Fatal(err)
				}
				appendFile(t, path, numbered("new", 0, 5))
			},
			want:   slices.Concat(linesOf("old", 0, 2), linesOf("new", 0, 5)),
			copied: 2,
		},
		{
			name: "copytruncate, the file left empty",
			stopped: func(t *testing.T, path, ptr string) {
				writtenAt(t, ptr, mustMadeAt(t, path).Add(-time.Hour))
				appendFile(t, path, numbered("old", 0, 3))
				copyTo(t, path, path+"-0001")
				if err := os.Truncate(path, 0); err != nil {
					t.Fatal(err)
				}
			},
			want:   linesOf("old", 0, 3),
			copied: 3,
		},
		{
			name: "a plain backup copy, the file not truncated",
			stopped: func(t *testing.T, path, ptr string) {
				writtenAt(t, ptr, mustMadeAt(t, path).Add(-time.Hour))
				appendFile(t, path, numbered("old", 0, 3))
				copyTo(t, path, path+"-0001")
				appendFile(t, path, numbered("new", 0, 2))
			},
			want: slices.Concat(linesOf("old", 0, 3), linesOf("new", 0, 2)),
		},
		{
			name: "a sibling made before the pointer was written",
			stopped: func(t *testing.T, path, ptr string) {
				writeFile(t, path+"-0001", numbered("rotated", 0, 3))
				writtenAt(t, ptr, mustMadeAt(t, path+"-0001").Add(time.Hour))
				appendFile(t, path, numbered("new", 0, 2))
			},
			want: linesOf("new", 0, 2),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path, before := neverRead(t)
				tc.stopped(t, path, path+".ptr")
				var lost losses
				p := &rec{}
				r := start(t, path, Options{}, setup{procs: []*rec{p}, observer: lost.observer()})
				st := r.settle(len(tc.want), p)
				r.stop()
				got, ds := p.got()
				if !slices.Equal(got, tc.want) {
					t.Fatalf("got %q\nwant %q\n%s", got, tc.want, r.log)
				}
				if fs := st.Feeds[0]; !st.Lossless || fs.Losses[LossUnread] != 0 || len(lost.got()) != 0 {
					t.Fatalf("lossless %v, unreadFiles %d, losses %+v: want lossless\n%s", st.Lossless, fs.Losses[LossUnread], lost.got(), r.log)
				}
				for i, d := range ds {
					at := int64(i+1) * lineLen
					if i >= tc.copied {
						at = int64(i+1-tc.copied) * lineLen
					}
					// The pointer's epoch goes on in the copy, or in the
					// file at the path when there is none.
					ptrEpoch := i < tc.copied || tc.copied == 0
					if ptrEpoch != (d.Epoch == before.Epoch) || d.Position.Offset != at {
						t.Fatalf("line %d at %+v: want offset %d, under the pointer's epoch %d: %v (%d lines from the copy)", i, d, at, before.Epoch, ptrEpoch, tc.copied)
					}
				}
				if tc.copied > 0 && !r.log.Has("copy") {
					t.Fatalf("no warning naming the copy:\n%s", r.log)
				}
			})
		})
	}
}

// A rotated sibling made at the time the pointer was last written (file
// times are coarse) may be a copy of the pointer's file made while the
// source was stopped, or a file rotated before it that an earlier run
// read: the restart cannot tell. It does not read it (a file read twice
// would apply its lines twice), and it does not say lossless: the pointer's
// file's bytes from the pointer are counted unread (LossUnread,
// the pointer's epoch and offset), with a warning naming the sibling. A
// run that commits nothing after it leaves the pointer file as it was (its
// bytes and its time), and the next run counts the same loss.
func TestASiblingMadeWhenThePointerWasWrittenIsCountedUnreadByEveryRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path, before := neverRead(t)
		ptr := path + ".ptr"
		appendFile(t, path, numbered("old", 0, 3))
		copyTo(t, path, path+"-0001")
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		writtenAt(t, ptr, mustMadeAt(t, path+"-0001"))
		snapshot, err := os.ReadFile(ptr)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(ptr)
		if err != nil {
			t.Fatal(err)
		}
		for run := range 2 {
			var lost losses
			p := &rec{}
			r := start(t, path, Options{}, setup{procs: []*rec{p}, observer: lost.observer()})
			st := r.settle(0, p)
			r.stop()
			if n := p.count(); n != 0 {
				t.Fatalf("run %d handled %d lines: want the sibling not read", run, n)
			}
			ls := lost.got()
			if fs := st.Feeds[0]; st.Lossless || fs.Losses[LossUnread] != 1 || len(ls) != 1 ||
				ls[0].Reason != LossUnread || ls[0].Epoch != before.Epoch || ls[0].From != 0 ||
				!strings.Contains(ls[0].Detail, path+"-0001") {
				t.Fatalf("run %d: lossless %v, unreadFiles %d, losses %+v: want one unread loss of the pointer's file (epoch %d) from 0 naming the sibling\n%s",
					run, st.Lossless, fs.Losses[LossUnread], ls, before.Epoch, r.log)
			}
			b, err := os.ReadFile(ptr)
			if err != nil {
				t.Fatal(err)
			}
			after, err := os.Stat(ptr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, snapshot) || !after.ModTime().Equal(fi.ModTime()) {
				t.Fatalf("run %d committed nothing, but the pointer file changed (%v, was %v)", run, after.ModTime(), fi.ModTime())
			}
		}
	})
}
