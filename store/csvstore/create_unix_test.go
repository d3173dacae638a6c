//go:build unix

package csvstore_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// fullDiskChild names the file that a child process of
// TestAFirstAppendThatCannotWriteLeavesNoFileItMade records to, its files
// limited to fullDiskBytes (RLIMIT_FSIZE: a full disk for it alone).
const (
	fullDiskChild = "CSVSTORE_TEST_CREATE_ON_A_FULL_DISK"
	fullDiskBytes = 8 // less than the header: its write stops part way
)

// A first Append that cannot write the header and its rows (a full disk: a
// child process whose files may not grow past a few bytes, so that its
// temporary file is written in part) fails and leaves nothing it made: no
// temporary file, and the recording's file as Create left it (empty: the
// file its lock made where there was none, or the empty file it found),
// which no reader takes for a recording. (A first Append whose temporary
// name is taken is the conformance suite's case, every file store's; this
// one, a temporary file written in part, is the CSV store's own.)
func TestAFirstAppendThatCannotWriteLeavesNoFileItMade(t *testing.T) {
	if path := os.Getenv(fullDiskChild); path != "" {
		createOnAFullDisk(path)
		return
	}
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty file existed %v", existing), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "r.csv")
			if existing {
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestAFirstAppendThatCannotWriteLeavesNoFileItMade$", "-test.count=1")
			cmd.Env = append(os.Environ(), fullDiskChild+"="+path)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			storetest.CheckFailedFirstAppend(t, path)
		})
	}
}

// createOnAFullDisk is the child: it limits its files to fullDiskBytes,
// then creates a recording at path and appends its META row, which must
// fail with EFBIG (the process ignores SIGXFSZ, as every Go program does).
// It exits 1 when it does not.
func createOnAFullDisk(path string) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	lim.Cur = fullDiskBytes
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	s, err := csvstore.Create(path)
	if err != nil {
		fmt.Printf("Create: %v\n", err)
		os.Exit(1)
	}
	err = s.Append(store.EncodeMeta(store.Meta{Format: store.Format, Apps: map[string]string{}}))
	s.Close()
	if err == nil {
		fmt.Println("the first Append succeeded past the file size limit")
		os.Exit(1)
	}
	if !errors.Is(err, syscall.EFBIG) {
		fmt.Printf("Append: %v, want EFBIG\n", err)
		os.Exit(1)
	}
}

// fullDiskLaterChild names the file that a child process of
// TestALaterAppendThatCannotWriteIsTakenBack records to.
const fullDiskLaterChild = "CSVSTORE_TEST_APPEND_ON_A_FULL_DISK"

// fullDiskWritten is how many of the fixture's rows the child writes
// before its files may grow no more.
const fullDiskWritten = 5

// An Append that the disk stops part way (a child process whose files may
// grow only 400 bytes past what its first Appends wrote) fails with the
// write's error and leaves nothing of its rows: the file reads back as the
// rows before it, with no partial line (a row is a claim: the recorder
// takes none of a failed Append's rows for written, and nor may a reader).
func TestALaterAppendThatCannotWriteIsTakenBack(t *testing.T) {
	if path := os.Getenv(fullDiskLaterChild); path != "" {
		appendOnAFullDisk(path)
		return
	}
	path := filepath.Join(t.TempDir(), "r.csv")
	cmd := exec.Command(os.Args[0], "-test.run=^TestALaterAppendThatCannotWriteIsTakenBack$", "-test.count=1")
	cmd.Env = append(os.Environ(), fullDiskLaterChild+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s, err := csvstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, errs := storetest.ReadAll(s)
	if len(errs) > 0 {
		t.Errorf("errors reading the recording back: %v", errs)
	}
	want := storetest.Normalized(storetest.Recording()[:fullDiskWritten])
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rows after the failed Append (-want +got):\n%s", d)
	}
}

// appendOnAFullDisk is the child: it writes the fixture's first
// fullDiskWritten rows, limits its files to 400 bytes more, and appends
// the rest in one call, which must fail with EFBIG after writing a few
// whole rows (an input with its outputs) and a part of one; a later
// Append must fail too. It exits 1 when they do not.
func appendOnAFullDisk(path string) {
	fail := func(format string, a ...any) {
		fmt.Printf(format+"\n", a...)
		os.Exit(1)
	}
	rows := storetest.Recording()
	s, err := csvstore.Create(path)
	if err != nil {
		fail("Create: %v", err)
	}
	defer s.Close()
	for _, e := range rows[:fullDiskWritten] {
		if err := s.Append(e); err != nil {
			fail("Append: %v", err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		fail("%v", err)
	}
	lim := syscall.Rlimit{Cur: uint64(fi.Size()) + 400, Max: uint64(fi.Size()) + 400}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fail("%v", err)
	}
	err = s.Append(rows[fullDiskWritten:]...)
	if !errors.Is(err, syscall.EFBIG) {
		fail("the Append past the limit: %v, want EFBIG", err)
	}
	if pe := (*fs.PathError)(nil); !errors.As(err, &pe) || pe.Path != store.Target(path) {
		fail("the Append past the limit: %v, want a *fs.PathError naming %s", err, path)
	}
	if err := s.Append(rows[len(rows)-1]); !errors.Is(err, syscall.EFBIG) {
		fail("the Append after it: %v, want its error again", err)
	}
}
