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
