package storetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// testAFileIsEmptyUntilItsFirstAppendPlacesItWhole: Create leaves the file
// empty (no CSV header, no SQLite schema); the first Append writes the
// header or schema with its rows in store.StartPath and renames it into
// place, replacing a stale one a writer killed in its first Append left,
// and leaves no temporary file; the recording then reads back whole. A
// Create used to write the header or the schema at once, so that a process
// killed before (or in) its first Append left a file that is not a
// recording.
func testAFileIsEmptyUntilItsFirstAppendPlacesItWhole(t *testing.T, b Backend) {
	p := path(t)
	start := store.StartPath(p)
	if err := os.WriteFile(start, []byte("processor,index,ki"), 0o600); err != nil { // a killed writer's
		t.Fatal(err)
	}
	w, err := b.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Skipf("backend without files: %v", err)
	}
	if fi.Size() != 0 {
		t.Fatalf("Create wrote %d bytes, want an empty file until the first Append", fi.Size())
	}
	rows := Recording()
	groups := Groups(rows)
	if err := w.Append(groups[0]...); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(start + "*"); len(left) > 0 {
		t.Errorf("the first Append left %v", left)
	}
	r := open(t, b, p)
	if got := r.Meta(); got.Format != store.Format {
		r.Close()
		t.Fatalf("after the first Append the file reads as META %+v, want the recording's", got)
	}
	r.Close()
	for _, g := range groups[1:] {
		if err := w.Append(g...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, b, p)
	defer r.Close()
	got, errs := ReadAll(r)
	if len(errs) > 0 {
		t.Fatalf("reading back: %v", errs)
	}
	if diff := cmp.Diff(Normalized(rows), got); diff != "" {
		t.Errorf("rows read back (-want +got):\n%s", diff)
	}
}

// testAFirstAppendThatFailsLeavesNoFileItMade: the first Append builds the
// recording in a file of its own beside it and places it whole; when it
// cannot (here its temporary name is taken by a directory holding a file),
// the Append fails naming the file and leaves nothing it made: the
// recording's file is as Create found it (absent before: the empty file its
// lock made, which no reader takes for a recording), and no other file (no
// database, no -wal or -shm file).
func testAFirstAppendThatFailsLeavesNoFileItMade(t *testing.T, b Backend) {
	skipWithoutFiles(t, b)
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty file existed %v", existing), func(t *testing.T) {
			p := path(t)
			if existing {
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			blocker := store.StartPath(p)
			if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			s, err := b.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Append(store.EncodeMeta(store.Meta{Format: store.Format, Apps: map[string]string{}}))
			s.Close()
			if err == nil {
				t.Fatal("the first Append succeeded with its temporary name taken")
			}
			CheckFailedFirstAppend(t, p, filepath.Base(blocker))
		})
	}
}

// CheckFailedFirstAppend checks the directory of the recording at path
// after its first Append failed: it holds path, empty (as Create left it),
// and the names others the test put there, and nothing else.
func CheckFailedFirstAppend(t testing.TB, path string, others ...string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := append([]string{filepath.Base(path)}, others...)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files after the failed first Append (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the recording's file: %v, %v; want it there, empty", fi, err)
	}
}

// skipWithoutFiles skips the test for a backend whose recordings are no
// files (Memory).
func skipWithoutFiles(t *testing.T, b Backend) {
	t.Helper()
	probe := path(t)
	pw, err := b.Create(probe)
	if err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if _, err := os.Stat(probe); err != nil {
		t.Skipf("backend without files: %v", err)
	}
}

// testARecordingReachedThroughASymlinkIsWrittenWhereItPoints: a recording
// created at a symlink is written in the file the link points to, its
// first Append placed over that file: the link stays a link.
func testARecordingReachedThroughASymlinkIsWrittenWhereItPoints(t *testing.T, b Backend) {
	skipWithoutFiles(t, b)
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real"), filepath.Join(dir, "link")
	if err := os.WriteFile(real, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	w, err := b.Create(link)
	if err != nil {
		t.Fatal(err)
	}
	rows := Recording()
	for _, g := range Groups(rows) {
		if err := w.Append(g...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is no longer a symlink (%v, %v)", link, fi.Mode(), err)
	}
	r := open(t, b, real)
	defer r.Close()
	got, errs := ReadAll(r)
	if len(errs) > 0 {
		t.Fatalf("reading %s back: %v", real, errs)
	}
	if diff := cmp.Diff(Normalized(rows), got); diff != "" {
		t.Errorf("rows of %s (-want +got):\n%s", real, diff)
	}
}
