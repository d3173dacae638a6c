package outbox_test

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// A recording the marks name with a commit or a batch (the next Open
// reads it to find what is left) that is gone, or was replaced by another
// (META created at another instant), or is not a recording, is refused
// (ErrRecording) before anything is delivered or changed.
func TestARecordingTheMarksNeedGoneOrReplacedIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{"removed", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			w, err := store.Create(path, "")
			if err != nil {
				t.Fatal(err)
			}
			r, err := recorder.New(w, recorder.Options{Clock: core.NewStepClock(t0.Add(time.Minute), time.Second),
				Apps: map[string]string{"twice": "twice"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(r.Close(), w.Close()); err != nil {
				t.Fatal(err)
			}
		}},
		{"not a recording", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("hello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			tp := newTape(ints(1, 4)...)
			_, box := b.mustOpenFile(outbox.FormatValue)
			b.runAll(box, tp)
			b.crashBeforeClose()
			tc.change(t, b.recording(1))
			out, marks := readFile(t, b.out), readFile(t, b.marks)
			if _, box, err := b.openFile(outbox.FormatValue); !errors.Is(err, outbox.ErrRecording) {
				if box != nil {
					box.Close()
				}
				t.Fatalf("Open: %v, want ErrRecording", err)
			}
			if !bytes.Equal(out, readFile(t, b.out)) || !bytes.Equal(marks, readFile(t, b.marks)) {
				t.Fatal("a refusing Open changed the file or its marks")
			}
		})
	}
}

// A clean Close (every output delivered, every input committed) rewrites
// the marks as a header alone: the next Open needs none of the run's
// recording, which may be removed, and delivers nothing again.
func TestAfterACleanCloseTheMarksNeedNoRecording(t *testing.T) {
	b := newBench(t)
	tp := newTape(ints(1, 4)...)
	_, box := b.mustOpenFile(outbox.FormatValue)
	b.runAll(box, tp)
	ls := readMarkLines(t, b.marks)
	if len(ls) != 1 {
		t.Fatalf("the marks after a clean Close hold %d lines, want the header alone:\n%s", len(ls), bytes.Join(rawLines(ls), nil))
	}
	if err := os.Remove(b.recording(1)); err != nil {
		t.Fatal(err)
	}
	out := readFile(t, b.out)
	_, box, err := b.openFile(outbox.FormatValue)
	if err != nil {
		t.Fatalf("Open after the clean run's recording was removed: %v", err)
	}
	st := box.Status()
	if err := box.Close(); err != nil {
		t.Fatal(err)
	}
	if want := (outbox.Status{Guarantee: outbox.GuaranteeExactlyOnce}); st != want {
		t.Errorf("status %+v, want %+v", st, want)
	}
	if !bytes.Equal(out, readFile(t, b.out)) {
		t.Error("the Open changed the file")
	}
}
