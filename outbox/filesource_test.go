package outbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/outbox"
)

// appendLines appends the lines from .. to to the file at path.
func appendLines(t *testing.T, path string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for n := from; n <= to; n++ {
		fmt.Fprintf(f, "%d\n", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// fileRun runs the twice app over the input file, read from its committed
// pointer (filesource.Committed, as `blackbox run` reads), until settled,
// delivering through box.
func fileRun(t *testing.T, b *bench, box *outbox.Outbox, input string) (outbox.Status, error) {
	t.Helper()
	src, err := filesource.New(input, filesource.Options{Read: filesource.Committed, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l := b.start(box, runConfig{Source: src})
	l.settle()
	return l.stop()
}

// With the file source reading from its committed pointer, as `blackbox
// run --out` runs: a full disk stops the first run before anything is
// delivered; the second delivers what the first recorded and committed,
// then the lines appended since, each once, in order.
func TestRunsOverACommittedFileDeliverEachLinesOutputsOnce(t *testing.T) {
	b := newBench(t)
	input := filepath.Join(b.dir, "in.txt")
	appendLines(t, input, 1, 20)
	f, err := outbox.OpenFile(b.out, outbox.FormatValue, false)
	if err != nil {
		t.Fatal(err)
	}
	f.Wrap(func(w io.Writer) io.Writer { return &notifyWriter{w: w, failFrom: 1} })
	box := b.mustOpen(f)
	if _, err := fileRun(t, b, box, input); !errors.Is(err, errDiskFull) {
		t.Fatalf("the first run's outbox closed with %v, want the disk's error", err)
	}
	f.Close()
	left := int64(bytes.Count(readFile(t, b.out), []byte("\n"))) // whole lines of the half batch written

	appendLines(t, input, 21, 30)
	_, box = b.mustOpenFile(outbox.FormatValue)
	recovered := box.Status().Recovered
	if recovered == 0 {
		t.Fatal("recovery delivered nothing of the first run")
	}
	st, err := fileRun(t, b, box, input)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outputs(1, 30), lines(t, b.out)); diff != "" {
		t.Fatalf("out file (-want +got):\n%s", diff)
	}
	if st.Delivered != count(1, 30)-left || st.Suppressed != 0 {
		t.Fatalf("the second run's status %+v: want every output but the %d lines the first run wrote delivered (%d), none suppressed",
			st, left, count(1, 30)-left)
	}
}

// A feed whose source commits nothing (the file read once from its
// start, `run --read once-earliest`) has its outputs delivered once
// recorded, its marks say so (an "uncommitted" line), and recovery
// suppresses none of its positions: every run reads them again.
func TestTheOutputsOfAFeedThatCommitsNothingLeaveOnceRecordedAndAreNeverSuppressed(t *testing.T) {
	b := newBench(t)
	input := filepath.Join(b.dir, "in.txt")
	appendLines(t, input, 1, 10)
	once := func(box *outbox.Outbox) outbox.Status {
		src, err := filesource.New(input, filesource.Options{Read: filesource.OnceEarliest, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		l := b.start(box, runConfig{Source: src})
		l.settle()
		st, err := l.stop()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	_, box := b.mustOpenFile(outbox.FormatValue)
	if st := once(box); st.Delivered != count(1, 10) || st.Pending != 0 {
		t.Fatalf("status %+v, want %d delivered, none pending", st, count(1, 10))
	}
	b.crashBeforeClose()
	ls := readMarkLines(t, b.marks)
	if len(ls) < 3 || !bytes.HasPrefix(ls[2].raw, []byte(`{"uncommitted":{"run":0,"feed":"in"}}`)) {
		t.Fatalf("the marks do not say the feed commits nothing:\n%s", bytes.Join(rawLines(ls), nil))
	}
	// A crash before any delivery: recovery delivers it all, and keeps
	// no position.
	writeMarkLines(t, b.marks, ls[:3])
	truncate(t, b.out, 0)
	_, box = b.mustOpenFile(outbox.FormatValue)
	if st := box.Status(); st.Recovered != count(1, 10) {
		t.Fatalf("recovery's status %+v, want %d recovered", st, count(1, 10))
	}
	if got := suppressed(t, b.marks); got != nil {
		t.Fatalf("positions of a feed that commits nothing suppressed: %v", got)
	}
	if st := once(box); st.Delivered-st.Recovered != count(1, 10) || st.Suppressed != 0 {
		t.Fatalf("the next run's status %+v, want its %d outputs delivered again", st, count(1, 10))
	}
	if diff := cmp.Diff(append(outputs(1, 10), outputs(1, 10)...), lines(t, b.out)); diff != "" {
		t.Fatalf("out file (-want +got):\n%s", diff)
	}
}

func rawLines(ls []markLine) [][]byte {
	var r [][]byte
	for _, l := range ls {
		r = append(r, l.raw)
	}
	return r
}
