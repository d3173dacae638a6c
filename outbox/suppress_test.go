package outbox_test

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/outbox"
)

// oneAtATime runs the twice app over items 1..n of a new tape fed one at
// a time (the next once the file took the one before: each item's
// outputs are one batch, after its commit's mark), delivering to the out
// file in format value, and stops the run. It returns the tape.
func oneAtATime(t *testing.T, b *bench, n int) *tape {
	t.Helper()
	f, err := outbox.OpenFile(b.out, outbox.FormatValue, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wrote := make(chan int, 1)
	f.Wrap(func(w io.Writer) io.Writer { return &notifyWriter{w: w, wrote: wrote} })
	box := b.mustOpen(f)
	tp := newTape()
	l := b.start(box, runConfig{Source: tp.source()})
	for i := 1; i <= n; i++ {
		tp.add(i)
		<-wrote
	}
	tp.setClosed(true)
	l.settle()
	if _, err := l.stop(); err != nil {
		t.Fatal(err)
	}
	b.crashBeforeClose()
	return tp
}

// suppressed is the suppression list of the marks' header.
func suppressed(t *testing.T, path string) []map[string]any {
	t.Helper()
	var h struct {
		Suppress []map[string]any `json:"suppress"`
	}
	if err := json.Unmarshal(readMarkLines(t, path)[0].raw, &h); err != nil {
		t.Fatal(err)
	}
	return h.Suppress
}

// A run recorded its last inputs (and their outputs) and stopped before
// its source committed them: the next Open delivers their outputs from
// the recording and keeps their positions; the next run reads them again
// and delivers none of their outputs again (Status.Suppressed), then its
// own. Once a commit covers them, the positions are forgotten.
func TestOutputsRecordedButNotCommittedAreDeliveredOnceByRecoveryNotByTheRunReadingThemAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed int // through which the crashed run committed (and delivered)
	}{
		{"nothing committed", 0},
		{"three of six committed", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 6
			b := newBench(t)
			tp := oneAtATime(t, b, n)
			// The crash: after the outputs of the items through committed,
			// before the commit of the next.
			ls := readMarkLines(t, b.marks)
			bs := batches(ls)
			if len(bs) != n || len(ls) != 2+2*n {
				t.Fatalf("marks of %d lines, %d batches; want a run's, then a commit's and a batch's per item", len(ls), len(bs))
			}
			keep := 2 + 2*tc.committed
			size := bs[tc.committed].Batch.Size
			writeMarkLines(t, b.marks, ls[:keep])
			truncate(t, b.out, size)
			tp.setCommitted(int64(tc.committed))

			_, box := b.mustOpenFile(outbox.FormatValue)
			left := count(tc.committed+1, n)
			if st := box.Status(); st.Recovered != left || st.Delivered != left || st.Again != 0 {
				t.Fatalf("recovery's status %+v, want %d outputs recovered", st, left)
			}
			var offsets []any
			for off := tc.committed + 1; off <= n; off++ {
				offsets = append(offsets, float64(off))
			}
			want := []map[string]any{{"feed": "in", "key": "", "epoch": float64(1), "offsets": offsets}}
			if diff := cmp.Diff(want, suppressed(t, b.marks)); diff != "" {
				t.Fatalf("the marks' suppression (-want +got):\n%s", diff)
			}

			tp.add(ints(n+1, n+2)...)
			st := b.runAll(box, tp)
			if st.Suppressed != left || st.Delivered != left+count(n+1, n+2) {
				t.Fatalf("the next run's status %+v: want %d suppressed, %d delivered of its own", st, left, count(n+1, n+2))
			}
			if diff := cmp.Diff(outputs(1, n+2), lines(t, b.out)); diff != "" {
				t.Fatalf("out file (-want +got):\n%s", diff)
			}

			_, box = b.mustOpenFile(outbox.FormatValue)
			if err := box.Close(); err != nil {
				t.Fatal(err)
			}
			if got := suppressed(t, b.marks); got != nil {
				t.Fatalf("positions a commit covers still suppressed: %v", got)
			}
		})
	}
}

// A run committed items 1-6, then was moved back to item 2 (a backwards
// seek: its source's commit came down to item 2, and the commit of the
// first item it read again is marked at that offset), and crashed before
// it committed the rest again: the commit a run marked last, not its
// highest, says which positions are never read again. The next run reads
// items 3-6 again and delivers none of their outputs again.
func TestAMoveBackKeepsThePositionsAfterItsTargetSuppressed(t *testing.T) {
	const n = 6
	b := newBench(t)
	tp := oneAtATime(t, b, n)
	ls := readMarkLines(t, b.marks)
	if len(ls) != 2+2*n || ls[2+2*1].Commit == nil || ls[2+2*1].Commit.Offset != 2 {
		t.Fatalf("marks of %d lines, want a run's, then a commit's and a batch's per item", len(ls))
	}
	writeMarkLines(t, b.marks, append(ls, ls[2+2*1])) // the commit at item 2 again, after the move back
	tp.setCommitted(2)

	_, box := b.mustOpenFile(outbox.FormatValue)
	want := []map[string]any{{"feed": "in", "key": "", "epoch": float64(1), "offsets": []any{float64(3), float64(4), float64(5), float64(6)}}}
	if diff := cmp.Diff(want, suppressed(t, b.marks)); diff != "" {
		t.Fatalf("the marks' suppression (-want +got):\n%s", diff)
	}
	st := b.runAll(box, tp)
	if st.Suppressed != count(3, n) {
		t.Errorf("the next run's status %+v: want %d suppressed", st, count(3, n))
	}
	if diff := cmp.Diff(outputs(1, n), lines(t, b.out)); diff != "" {
		t.Errorf("out file (-want +got):\n%s", diff)
	}
}

// A run processed and committed items 1-6, then its operator moved it
// back to item 2 (Observer.Acted: the seek's CONTROL row; its source's
// commit came down to item 2) and it stopped before it processed any
// item again: Close keeps the marks (the next Open needs the run's
// recording), whose recovery reads the move back and keeps the run's
// positions suppressed: the next run, reading 3-6 again, delivers none of
// their outputs again.
func TestAMoveBackBeforeAStopKeepsThePositionsAfterItsTargetSuppressed(t *testing.T) {
	const n = 6
	b := newBench(t)
	tp := movedBack(t, b, n, n)

	_, box := b.mustOpenFile(outbox.FormatValue)
	// Every position the run recorded whole (1 and 2 too: the recovery
	// does not look up the target's position; they are never read again,
	// and the next commit past them forgets them).
	var offsets []any
	for off := 1; off <= n; off++ {
		offsets = append(offsets, float64(off))
	}
	want := []map[string]any{{"feed": "in", "key": "", "epoch": float64(1), "offsets": offsets}}
	if diff := cmp.Diff(want, suppressed(t, b.marks)); diff != "" {
		t.Fatalf("the marks' suppression (-want +got):\n%s", diff)
	}
	st := b.runAll(box, tp)
	if st.Suppressed != count(3, n) {
		t.Errorf("the next run's status %+v: want %d suppressed", st, count(3, n))
	}
	if diff := cmp.Diff(outputs(1, n), lines(t, b.out)); diff != "" {
		t.Errorf("out file (-want +got):\n%s", diff)
	}
}

// As above, but the feed had published past the last item the run
// recorded (items 7 and 8 dropped by a full queue: no DELIVERY row, and
// the commit before the move back covers their seqs): a commit of seq 8
// made before the move back is still one it lowered (the CONTROL row's
// before, not the run's last DELIVERY, says what the feed had published),
// and the positions after the target stay suppressed.
func TestAMoveBackPastDroppedItemsKeepsThePositionsAfterItsTargetSuppressed(t *testing.T) {
	const n, published = 6, 8
	b := newBench(t)
	tp := movedBack(t, b, n, published)
	// The commits as a source that dropped 7 and 8 marks them: the last
	// one, before the move back, covers seq 8.
	ls := readMarkLines(t, b.marks)
	last := -1
	for i, l := range ls {
		if l.Commit != nil {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("the run marked no commit")
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(ls[last].raw, &m); err != nil {
		t.Fatal(err)
	}
	m["commit"]["seq"] = published
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	ls[last].raw = append(raw, '\n')
	writeMarkLines(t, b.marks, ls)

	_, box := b.mustOpenFile(outbox.FormatValue)
	st := b.runAll(box, tp)
	if st.Suppressed != count(3, n) {
		t.Errorf("the next run's status %+v: want %d suppressed", st, count(3, n))
	}
	if diff := cmp.Diff(outputs(1, n), lines(t, b.out)); diff != "" {
		t.Errorf("out file (-want +got):\n%s", diff)
	}
}

// movedBack runs the twice app over items 1..n of a new tape, settles,
// moves the feed back to item 2 as the engine tells it (Observer.Acted:
// the recorder writes the seek's CONTROL row, with before as its before;
// the outbox notes it), lowers the source's commit to 2 and stops the
// run. It returns the tape.
func movedBack(t *testing.T, b *bench, n int, before int64) *tape {
	t.Helper()
	_, box := b.mustOpenFile(outbox.FormatValue)
	tp := newTape()
	tp.add(ints(1, n)...)
	tp.setClosed(true)
	l := b.start(box, runConfig{Source: tp.source()})
	l.settle()
	act := engine.OperatorAction{Action: engine.ActionSeek, Feed: "in", Group: "main", Who: "alice", Reason: "recompute", At: t0,
		Before: before, After: 2}
	if err := l.run.Recorder().Observer().Then(box.Observer()).Acted(act); err != nil {
		t.Fatal(err)
	}
	tp.setCommitted(2)
	if _, err := l.stop(); err != nil {
		t.Fatal(err)
	}
	return tp
}
