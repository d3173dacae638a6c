package outbox

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
)

// encodeMarks is m as a marks file: its header, then its lines.
func encodeMarks(m marks) []byte {
	b := encodeLine(m.head)
	for _, l := range m.lines {
		b = append(b, encodeLine(l)...)
	}
	return b
}

// FuzzMarks: any bytes as a marks file are read without a panic: either
// a *MarksError wrapping ErrMarks naming a line of the file, or marks
// that encode back to a file read as the same marks. Open over what the
// reader accepted (its runs' recordings moved to missing files of the
// test's) never panics, refuses only with ErrMarks, ErrRecording or
// ErrOut, and leaves a header alone that the next Open keeps as it is.
func FuzzMarks(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte(`{"outbox":1,"sink":"sink","batch":0,"size":0}` + "\n"))
	f.Add([]byte(`{"outbox":1,"sink":"file","format":"value","batch":3,"size":0,"suppress":[{"feed":"in","key":"","epoch":1,"offsets":[4,5]}]}` + "\n"))
	f.Add([]byte(`{"outbox":1,"sink":"file","format":"envelope","batch":0,"size":0}` + "\n" +
		`{"run":{"path":"/nowhere/run1.csv","created":"2030-01-01T01:00:00Z"}}` + "\n" +
		`{"uncommitted":{"run":0,"feed":"in"}}` + "\n" +
		`{"commit":{"run":0,"feed":"in","key":"","seq":2,"epoch":1,"offset":2}}` + "\n" +
		`{"batch":{"n":1,"size":0,"to":[{"run":0,"stream":"twice","feed":"in","row":6},{"run":0,"stream":"t","free":true,"row":9}]}}` + "\n" +
		`{"run":{"path":"run2.csv","created":"2030-01-01T02:00:00+01:00"}}` + "\n" +
		`{"batch":{"n":2,"size":40,"to":[{"run":1,"stream":"twice","feed":"in","key":"p0","row":3}]}}` + "\n" +
		`{"commit":{"run":1,"feed":"in","key":"p0","seq":9,"epoch":2,"of`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "m.outbox")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, ok, err := readMarks(path)
		if err != nil {
			var me *MarksError
			if !errors.As(err, &me) || !errors.Is(err, ErrMarks) {
				t.Fatalf("readMarks: %v (%T), want a *MarksError wrapping ErrMarks", err, err)
			}
			if n := bytes.Count(b, []byte("\n")); me.Path != path || me.Line < 1 || me.Line > n+1 {
				t.Fatalf("the error names %s:%d; the file %s has %d lines", me.Path, me.Line, path, n)
			}
			return
		}
		if !ok {
			t.Fatal("readMarks found no file")
		}
		enc := encodeMarks(m)
		if err := os.WriteFile(path, enc, 0o644); err != nil {
			t.Fatal(err)
		}
		again, ok, err := readMarks(path)
		if err != nil || !ok {
			t.Fatalf("the marks read, encoded again, are not read: %v\n%s", err, enc)
		}
		if enc2 := encodeMarks(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("the marks read back differ:\n%s\n%s", enc, enc2)
		}

		// Open, each run's recording a missing file of the test's.
		for i, l := range m.lines {
			if l.Run != nil {
				l.Run.Path = filepath.Join(dir, fmt.Sprintf("run%d.csv", i))
			}
		}
		if err := os.WriteFile(path, encodeMarks(m), 0o644); err != nil {
			t.Fatal(err)
		}
		var sink sinkOpener = func() (sinkCloser, error) { return discard{}, nil }
		if m.head.Sink == "file" {
			sink = func() (sinkCloser, error) { return OpenFile(filepath.Join(dir, "out"), m.head.Format, false) }
		}
		first := openOnce(t, path, sink)
		if first == nil {
			return
		}
		if second := openOnce(t, path, sink); !bytes.Equal(first, second) {
			t.Fatalf("a second Open rewrote the marks:\n%s\n%s", first, second)
		}
		h, ok, err := readMarks(path)
		if err != nil || !ok || len(h.lines) != 0 || h.head.Batch < m.head.Batch {
			t.Fatalf("Open left marks that are not a header alone, at batch %d or after: %v\n%s", m.head.Batch, err, first)
		}
	})
}

// sinkCloser is a sink the fuzz test closes.
type sinkCloser interface {
	core.EffectSink
	Close() error
}

type sinkOpener func() (sinkCloser, error)

// discard is a sink of the caller's that keeps nothing.
type discard struct{}

func (discard) Deliver(int64, []core.Effect) error { return nil }
func (discard) Close() error                       { return nil }

// openOnce opens an outbox over the marks at path, closes it and returns
// the marks it left; nil if Open refused them, or the sink cannot be
// opened (a line format no File has).
func openOnce(t *testing.T, path string, open sinkOpener) []byte {
	t.Helper()
	s, err := open()
	if err != nil {
		return nil
	}
	defer s.Close()
	box, err := Open(Config{Marks: path, Sink: s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		if !errors.Is(err, ErrMarks) && !errors.Is(err, ErrRecording) && !errors.Is(err, ErrOut) {
			t.Fatalf("Open: %v, want ErrMarks, ErrRecording or ErrOut", err)
		}
		return nil
	}
	if err := box.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
