package outbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/outbox"
)

// The header of a marks file for a sink of the caller's.
const sinkHeader = `{"outbox":1,"sink":"sink","batch":0,"size":0}` + "\n"

// A marks file is read line by line: the torn last line a crash leaves is
// dropped; any other line that cannot be read is a *MarksError naming it,
// wrapping ErrMarks.
func TestTheMarksReaderDropsATornLastLineAndNamesABadOne(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.csv") // a run killed before its first rows
	run := `{"run":{"path":"` + missing + `","created":"2030-01-01T00:00:00Z"}}` + "\n"
	for _, tc := range []struct {
		name  string
		marks string
		line  int // of the *MarksError; 0: read
	}{
		{"header only", sinkHeader, 0},
		{"a run", sinkHeader + run, 0},
		{"a torn last line", sinkHeader + run + `{"commit":{"run":0,"feed":"in","ke`, 0},
		{"a torn line naming a run not named", sinkHeader + `{"commit":{"run":7,"feed":"in","key":"","seq":1,"epoch":1,"offset":1}}`, 0},
		{"the same line whole", sinkHeader + `{"commit":{"run":7,"feed":"in","key":"","seq":1,"epoch":1,"offset":1}}` + "\n", 2},
		{"empty", "", 1},
		{"a torn header", strings.TrimSuffix(sinkHeader, "\n"), 1},
		{"not JSON in the middle", sinkHeader + run + "not json\n" + run, 3},
		{"a line of no kind", sinkHeader + "{}\n", 2},
		{"null", sinkHeader + "null\n", 2},
		{"a line of an unknown kind", sinkHeader + `{"flush":{"n":1}}` + "\n", 2},
		{"an unknown field", sinkHeader + `{"run":{"path":"` + missing + `","created":"2030-01-01T00:00:00Z","host":"h"}}` + "\n", 2},
		{"two values on a line", sinkHeader + run[:len(run)-1] + run, 2},
		{"another version", `{"outbox":2,"sink":"sink","batch":0,"size":0}` + "\n", 1},
		{"no version", `{"sink":"sink","batch":0,"size":0}` + "\n", 1},
		{"a header that is a run", run, 1},
		{"a commit of a run not named", sinkHeader + run + `{"commit":{"run":1,"feed":"in","key":"","seq":1,"epoch":1,"offset":1}}` + "\n", 3},
		{"a commit of a negative run", sinkHeader + run + `{"commit":{"run":-1,"feed":"in","key":"","seq":1,"epoch":1,"offset":1}}` + "\n", 3},
		{"an uncommitted feed of a run not named", sinkHeader + `{"uncommitted":{"run":0,"feed":"in"}}` + "\n", 2},
		{"an uncommitted feed of a negative run", sinkHeader + run + `{"uncommitted":{"run":-1,"feed":"in"}}` + "\n", 3},
		{"a batch of a run not named", sinkHeader + run + `{"batch":{"n":1,"size":0,"to":[{"run":1,"stream":"p","row":3}]}}` + "\n", 3},
		{"a batch of a negative run", sinkHeader + run + `{"batch":{"n":1,"size":0,"to":[{"run":-1,"stream":"p","row":3}]}}` + "\n", 3},
		{"a line of two kinds", sinkHeader + `{"run":{"path":"` + missing + `","created":"2030-01-01T00:00:00Z"},"batch":{"n":1,"size":0,"to":[]}}` + "\n", 2},
		{"a batch numbered 0", sinkHeader + `{"batch":{"n":0,"size":0,"to":[]}}` + "\n", 2},
		{"a negative size", sinkHeader + `{"batch":{"n":1,"size":-1,"to":[]}}` + "\n", 2},
		{"a header's negative batch", `{"outbox":1,"sink":"sink","batch":-1,"size":0}` + "\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marks := filepath.Join(t.TempDir(), "m.outbox")
			if err := os.WriteFile(marks, []byte(tc.marks), 0o644); err != nil {
				t.Fatal(err)
			}
			box, err := outbox.Open(outbox.Config{Marks: marks, Sink: plainSink{&memSink{}}, Logger: quiet})
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if err := box.Close(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				box.Close()
				t.Fatalf("Open read it; want a *MarksError at line %d", tc.line)
			}
			var me *outbox.MarksError
			if !errors.As(err, &me) || !errors.Is(err, outbox.ErrMarks) {
				t.Fatalf("Open: %v (%T), want a *MarksError wrapping ErrMarks", err, err)
			}
			if got := (outbox.MarksError{Path: me.Path, Line: me.Line}); got != (outbox.MarksError{Path: marks, Line: tc.line}) {
				t.Fatalf("the error names %s:%d, want %s:%d (%v)", me.Path, me.Line, marks, tc.line, err)
			}
			b, _ := os.ReadFile(marks)
			if diff := cmp.Diff(tc.marks, string(b)); diff != "" {
				t.Fatalf("Open refused the marks and changed them (-want +got):\n%s", diff)
			}
		})
	}
}

// Marks written for another kind of sink or another line format are
// refused (ErrMarks), before anything is delivered or changed.
func TestMarksOfAnotherSinkOrFormatAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		file         string // the file sink's format, "" for a sink of the caller's
	}{
		{"file marks, a sink", `{"outbox":1,"sink":"file","format":"value","batch":0,"size":0}`, ""},
		{"sink marks, a file", sinkHeader[:len(sinkHeader)-1], outbox.FormatValue},
		{"value marks, an envelope file", `{"outbox":1,"sink":"file","format":"value","batch":0,"size":0}`, outbox.FormatEnvelope},
		{"envelope marks, a value file", `{"outbox":1,"sink":"file","format":"envelope","batch":0,"size":0}`, outbox.FormatValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			if err := os.WriteFile(b.marks, []byte(tc.header+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			var box *outbox.Outbox
			if tc.file != "" {
				_, box, err = b.openFile(tc.file)
			} else {
				box, err = b.open(plainSink{&memSink{}})
			}
			if !errors.Is(err, outbox.ErrMarks) {
				if box != nil {
					box.Close()
				}
				t.Fatalf("Open: %v, want ErrMarks", err)
			}
			if got, _ := os.ReadFile(b.marks); string(got) != tc.header+"\n" {
				t.Fatalf("the marks changed: %q", got)
			}
		})
	}
}

// A line longer than the reader takes (64 MiB) is a *MarksError naming
// it, as any other line it cannot read.
func TestAMarksLineTooLongIsAMarksError(t *testing.T) {
	marks := filepath.Join(t.TempDir(), "m.outbox")
	long := sinkHeader + `{"uncommitted":{"run":0,"feed":"` + strings.Repeat("x", 64<<20) + `"}}` + "\n"
	if err := os.WriteFile(marks, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := outbox.Open(outbox.Config{Marks: marks, Sink: plainSink{&memSink{}}, Logger: quiet})
	var me *outbox.MarksError
	if !errors.As(err, &me) || !errors.Is(err, outbox.ErrMarks) || me.Line != 2 {
		t.Fatalf("Open: %v, want a *MarksError at line 2 wrapping ErrMarks", err)
	}
}
