package outbox_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/outbox"
)

// cleanFileRun runs the twice app over items 1..5, then in a second run
// over items 6..10, delivering to the out file, and returns the file's
// bytes, the marks' lines the second run left right before its outbox's
// Close (a crash then: a clean Close rewrites them as a header) and the
// size of the file before its last batch.
func cleanFileRun(t *testing.T, b *bench, format string) (out []byte, marks []markLine, lastSize int64) {
	t.Helper()
	_, box := b.mustOpenFile(format)
	tp := newTape(ints(1, 5)...)
	b.runAll(box, tp)
	_, box = b.mustOpenFile(format)
	tp.add(ints(6, 10)...)
	b.runAll(box, tp)
	b.crashBeforeClose()
	out, err := os.ReadFile(b.out)
	if err != nil {
		t.Fatal(err)
	}
	marks = readMarkLines(t, b.marks)
	bs := batches(marks)
	if len(bs) == 0 {
		t.Fatal("the run wrote no batch mark")
	}
	last := bs[len(bs)-1].Batch
	if n := bytes.Count(out[last.Size:], []byte("\n")); n < 2 {
		t.Fatalf("the last batch holds %d lines; the tests need 2 or more", n)
	}
	return out, marks, last.Size
}

// Recovery finishes the last batch of the file sink from the file's
// size its mark holds: the file must hold a prefix of the batch's lines
// from there, and gets the rest; a file shorter than the mark's size,
// longer than the batch, or holding other bytes is refused (ErrOut),
// and nothing changes.
func TestRecoveryFinishesTheFilesLastBatchOrRefusesAFileThatDoesNotHoldIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage makes the file of a crash from the clean run's (out), its
		// last batch starting at size.
		damage func(out []byte, size int64) []byte
		ok     bool // recovery rebuilds out
	}{
		{"whole", func(out []byte, _ int64) []byte { return out }, true},
		{"none of the batch", func(out []byte, size int64) []byte { return out[:size] }, true},
		{"a line of it", func(out []byte, size int64) []byte {
			return out[:size+int64(bytes.IndexByte(out[size:], '\n'))+1]
		}, true},
		{"a line and a half", func(out []byte, size int64) []byte {
			return out[:size+int64(bytes.IndexByte(out[size:], '\n'))+4]
		}, true},
		{"all of it but its last line break", func(out []byte, _ int64) []byte { return out[:len(out)-1] }, true},
		{"shorter than the mark's size", func(out []byte, size int64) []byte { return out[:size-1] }, false},
		{"empty", func([]byte, int64) []byte { return nil }, false},
		{"longer than the batch", func(out []byte, _ int64) []byte { return append(bytes.Clone(out), "{}\n"...) }, false},
		{"other bytes in the batch", func(out []byte, size int64) []byte {
			b := bytes.Clone(out)
			b[size+1] ^= 1
			return b
		}, false},
		{"other bytes in a prefix of the batch", func(out []byte, size int64) []byte {
			b := bytes.Clone(out[:size+3])
			b[size+2] ^= 1
			return b
		}, false},
		{"a line break for the last byte", func(out []byte, _ int64) []byte {
			b := bytes.Clone(out)
			b[len(b)-2] = '\n'
			return b
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			out, _, size := cleanFileRun(t, b, outbox.FormatEnvelope)
			damaged := tc.damage(out, size)
			if err := os.WriteFile(b.out, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			marks, _ := os.ReadFile(b.marks)
			_, box, err := b.openFile(outbox.FormatEnvelope)
			if !tc.ok {
				if !errors.Is(err, outbox.ErrOut) {
					if box != nil {
						box.Close()
					}
					t.Fatalf("Open: %v, want ErrOut", err)
				}
				got, _ := os.ReadFile(b.out)
				gotMarks, _ := os.ReadFile(b.marks)
				if !bytes.Equal(got, damaged) || !bytes.Equal(gotMarks, marks) {
					t.Fatal("a refusing Open changed the file or its marks")
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			st := box.Status()
			if err := box.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(b.out)
			if diff := cmp.Diff(string(out), string(got)); diff != "" {
				t.Fatalf("the file after recovery (-want +got):\n%s", diff)
			}
			// The lines appended: those whose line break the crash cut.
			appended := int64(bytes.Count(out[len(damaged):], []byte("\n")))
			want := outbox.Status{Guarantee: outbox.GuaranteeExactlyOnce, Delivered: appended, Recovered: appended}
			if appended > 0 {
				want.Batches = 1
			}
			if diff := cmp.Diff(want, st); diff != "" {
				t.Fatalf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// A crash before the last batch's mark was written whole (the mark
// missing, or torn) left the file before the batch: recovery delivers the
// batch's outputs from the recording.
func TestRecoveryDeliversTheOutputsOfABatchWhoseMarkACrashCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(mark []byte) []byte // the last batch's mark as the crash left it
	}{
		{"missing", func([]byte) []byte { return nil }},
		{"torn", func(mark []byte) []byte { return mark[:len(mark)/2] }},
		{"all but its line break", func(mark []byte) []byte { return mark[:len(mark)-1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			out, marks, size := cleanFileRun(t, b, outbox.FormatValue)
			i := len(marks) - 1
			for marks[i].Batch == nil {
				i--
			}
			marks[i].raw = tc.cut(marks[i].raw)
			writeMarkLines(t, b.marks, marks[:i+1])
			truncate(t, b.out, size)
			_, box := b.mustOpenFile(outbox.FormatValue)
			st := box.Status()
			if err := box.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(out), string(readFile(t, b.out))); diff != "" {
				t.Fatalf("the file after recovery (-want +got):\n%s", diff)
			}
			n := int64(bytes.Count(out[size:], []byte("\n")))
			want := outbox.Status{Guarantee: outbox.GuaranteeExactlyOnce, Batches: 1, Delivered: n, Recovered: n}
			if diff := cmp.Diff(want, st); diff != "" {
				t.Fatalf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// Once recovered, the marks are a header holding the file's size: a file
// that grew or shrank since is refused (ErrOut).
func TestAFileChangedSinceItsMarksHeaderIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(out []byte) []byte
	}{
		{"a line more", func(out []byte) []byte { return append(bytes.Clone(out), "{}\n"...) }},
		{"a line less", func(out []byte) []byte { return out[:bytes.LastIndexByte(out[:len(out)-1], '\n')+1] }},
		{"emptied", func([]byte) []byte { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			out, _, _ := cleanFileRun(t, b, outbox.FormatValue)
			_, box := b.mustOpenFile(outbox.FormatValue) // the marks: a header
			if err := box.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(b.out, tc.change(out), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, box, err := b.openFile(outbox.FormatValue); !errors.Is(err, outbox.ErrOut) {
				if box != nil {
					box.Close()
				}
				t.Fatalf("Open: %v, want ErrOut", err)
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
