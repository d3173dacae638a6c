package filesource

import (
	"encoding/binary"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/internal/testutil"
)

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// Appending to the input or changing its times keeps the pointer and its
// epoch: a restart delivers only the appended lines.
func TestAppendAndTouchKeepPointerAndEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 0, 10))
		once(t, path, Options{}, 10)
		before := readPointer(t, path+".ptr")
		appendFile(t, path, numbered("line", 10, 15))
		future := time.Now().Add(72 * time.Hour)
		if err := os.Chtimes(path, future, future); err != nil {
			t.Fatal(err)
		}
		p, _ := once(t, path, Options{}, 5)
		got, ds := p.got()
		wantInOrder(t, got, 10, 15)
		after := readPointer(t, path+".ptr")
		if after.Epoch != before.Epoch || ds[0].Epoch != before.Epoch {
			t.Fatalf("epoch %d (delivered %d), want %d kept", after.Epoch, ds[0].Epoch, before.Epoch)
		}
		if after.Offset != 15*lineLen {
			t.Fatalf("pointer %d, want %d", after.Offset, 15*lineLen)
		}
	})
}

// A replaced input (another file with other content at the path, or the
// same file rewritten in place with other leading bytes) and a truncated
// input are read from 0 under a new epoch.
func TestReplacedOrTruncatedInputResetsToZeroUnderANewEpoch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
		lines  []string
	}{
		// Longer than what was read: only the fingerprint tells.
		{"new-file-other-content", func(t *testing.T, path string) {
			replaceFile(t, path, numbered("new", 0, 1200))
		}, []string{"new-0000000", "new-0001199"}},
		{"rewritten-in-place", func(t *testing.T, path string) {
			writeFile(t, path, numbered("new", 0, 1200)) // O_TRUNC: same inode
		}, []string{"new-0000000", "new-0001199"}},
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, 3*lineLen); err != nil {
				t.Fatal(err)
			}
		}, []string{lineAt(0), lineAt(2)}},
		{"truncated-past-the-fingerprint", func(t *testing.T, path string) {
			// Still longer than the 4 KB fingerprint, shorter than the pointer.
			if err := os.Truncate(path, 500*lineLen); err != nil {
				t.Fatal(err)
			}
		}, []string{lineAt(0), lineAt(499)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("line", 0, 1000))
				once(t, path, Options{}, 1000)
				before := readPointer(t, path+".ptr")
				tc.change(t, path)
				lg := &testutil.Logs{}
				p := &rec{}
				r := start(t, path, Options{Logger: lg.Logger()}, setup{procs: []*rec{p}})
				size := fileSize(t, path)
				want := int(size / lineLen)
				r.settle(want, p)
				r.stop()
				got, ds := p.got()
				if got[0] != tc.lines[0] || got[len(got)-1] != tc.lines[1] || len(got) != want {
					t.Fatalf("got %d lines %q..%q, want %d from 0", len(got), got[0], got[len(got)-1], want)
				}
				after := readPointer(t, path+".ptr")
				if after.Epoch == before.Epoch || ds[0].Epoch != after.Epoch {
					t.Fatalf("epoch %d (delivered %d), was %d: want a new one", after.Epoch, ds[0].Epoch, before.Epoch)
				}
				if after.Offset != size {
					t.Fatalf("pointer %d, want %d", after.Offset, size)
				}
				if !lg.Has("from 0 under a new epoch") {
					t.Fatalf("no warning about the reset:\n%s", lg)
				}
			})
		})
	}
}

// The same bytes under a new identity (a copy renamed over the path, as a
// writer that appends by rename does) keep the pointer and epoch, with a
// warning.
func TestSameContentUnderANewInodeKeepsThePointer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 0, 10))
		once(t, path, Options{}, 10)
		before := readPointer(t, path+".ptr")
		replaceFile(t, path, numbered("line", 0, 13))
		lg := &testutil.Logs{}
		p, _ := once(t, path, Options{Logger: lg.Logger()}, 3)
		got, ds := p.got()
		wantInOrder(t, got, 10, 13)
		after := readPointer(t, path+".ptr")
		if after.Epoch != before.Epoch || ds[0].Epoch != before.Epoch || after.Identity == before.Identity {
			t.Fatalf("epoch %d identity %x, was %d %x: want the epoch kept under the new identity", after.Epoch, after.Identity, before.Epoch, before.Identity)
		}
		if !lg.Has("same first") {
			t.Fatalf("no warning about the new identity:\n%s", lg)
		}
	})
}

// The fingerprint is grown at commits until it covers 4 KB: a file first
// opened holding only a header, then rewritten in place with the same
// header and other lines, is a replacement.
func TestFingerprintGrowsAtCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "header\n")
		p := &rec{}
		r := start(t, path, Options{}, setup{procs: []*rec{p}})
		r.settle(1, p)
		if fp := readPointer(t, path+".ptr").FingerprintLen; fp != 7 {
			t.Fatalf("fingerprint over %d bytes at the first open, want 7", fp)
		}
		appendFile(t, path, numbered("line", 0, 500))
		r.settle(501, p)
		r.stop()
		if fp := readPointer(t, path+".ptr").FingerprintLen; fp != FingerprintMax {
			t.Fatalf("fingerprint over %d bytes after commits, want %d", fp, FingerprintMax)
		}
		epoch := readPointer(t, path+".ptr").Epoch
		writeFile(t, path, "header\n"+numbered("other", 0, 500)) // same header, same length, other lines
		p2, _ := once(t, path, Options{}, 501)
		got, ds := p2.got()
		if got[1] != "other-00000" || ds[0].Epoch == epoch {
			t.Fatalf("got %q epoch %d: want the rewrite read from 0 under a new epoch", got[1], ds[0].Epoch)
		}
	})
}

// A commit fingerprints the file being read (its open descriptor), never
// whatever the path names by then.
func TestACommitAfterAReplacementFingerprintsTheOpenFile(t *testing.T) {
	path := input(t, "x\n")
	// The fingerprint covers "x\n" at the open; the commit grows it over
	// what was read since: "x\nyy\n", of the open file.
	src, err := New(path, Options{Logger: (&testutil.Logs{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	// Drive the source by hand on this goroutine: open, read, then the
	// path is replaced before the source notices, then a commit.
	src.f = intakeFor(t, src, 16, nil)
	src.ptr = pointerFile{path: src.opts.Pointer}
	if src.ptrCreated, err = src.ptr.acquire(true); err != nil {
		t.Fatal(err)
	}
	src.com = committer{s: src}
	if ok, err := src.start(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	defer src.closeRun()
	appendFile(t, path, "yy\n")
	if _, err := src.rd.fill(); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, path, "hello\nworld\n")
	if err := src.commit(2); err != nil {
		t.Fatal(err)
	}
	want, _ := fingerprint(stringReaderAt("x\nyy\n"), 5)
	p := readPointer(t, path+".ptr")
	if p.FingerprintLen != 5 || p.Fingerprint != want || p.Offset != 2 {
		t.Fatalf("pointer %+v: want the open file's fingerprint over 5 bytes", p)
	}
}

type stringReaderAt string

func (s stringReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n := copy(b, s[off:])
	if n < len(b) {
		return n, os.ErrClosed
	}
	return n, nil
}

// Pointer files that cannot be used are read from 0 with a warning, never a
// crash, and rewritten at 1,024 bytes; one holding only an offset has it
// taken as a byte offset; a short file with a complete header keeps it.
func TestUnusablePointerFiles(t *testing.T) {
	full := Pointer{Offset: 5 * lineLen, Epoch: 77, Layout: Layout}.encode()
	unknown := slices.Clone(full)
	binary.LittleEndian.PutUint64(unknown[offLayout:], 9)
	offsetOnly := make([]byte, 8)
	binary.LittleEndian.PutUint64(offsetOnly, 4*lineLen)
	for _, tc := range []struct {
		name    string
		content []byte
		from    int    // first line delivered
		warn    string // in the warning
	}{
		{"empty", []byte{}, 0, "is empty"},
		{"too-short", []byte{1, 2, 3}, 0, "too short"},
		{"unknown-layout", unknown, 0, "unknown layout 9"},
		{"header-cut", full[:30], 0, "of its 48-byte header"},
		{"corrupt", Pointer{Offset: -4, Epoch: 1, Layout: Layout}.encode(), 0, "corrupt"},
		{"offset-only", offsetOnly, 4, "taking its offset 48"},
		{"short-complete-header", full[:64], 5, "header is kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("line", 0, 10))
				writeFile(t, path+".ptr", string(tc.content))
				lg := &testutil.Logs{}
				p, _ := once(t, path, Options{Logger: lg.Logger()}, 10-tc.from)
				got, _ := p.got()
				wantInOrder(t, got, tc.from, 10)
				if !lg.Has(tc.warn) {
					t.Fatalf("no warning %q:\n%s", tc.warn, lg)
				}
				if n := fileSize(t, path+".ptr"); n != PointerSize {
					t.Fatalf("pointer file is %d bytes, want %d", n, PointerSize)
				}
				ptr := readPointer(t, path+".ptr")
				if ptr.Offset != 10*lineLen || ptr.Epoch == 0 {
					t.Fatalf("pointer %+v", ptr)
				}
				if tc.name == "short-complete-header" && ptr.Epoch != 77 {
					t.Fatalf("epoch %d, want the kept 77", ptr.Epoch)
				}
			})
		})
	}
}

// A new pointer file gets a nonzero epoch and the input's identity and
// fingerprint; the file is exactly 1,024 bytes.
func TestANewPointerFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 0, 3))
		once(t, path, Options{}, 3)
		p := readPointer(t, path+".ptr")
		want, _ := fingerprint(stringReaderAt(numbered("line", 0, 3)), 3*lineLen)
		fi, _ := os.Stat(path)
		if p.Epoch == 0 || p.Layout != Layout || p.Identity != identity(fi) || p.FingerprintLen != 3*lineLen || p.Fingerprint != want || p.Offset != 3*lineLen {
			t.Fatalf("pointer %+v", p)
		}
		if n := fileSize(t, path+".ptr"); n != PointerSize {
			t.Fatalf("pointer file %d bytes", n)
		}
	})
}
