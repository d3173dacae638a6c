package filesource

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// errDiskFull is the failure of a recording that cannot be written.
var errDiskFull = errors.New("test: the recording cannot be written (disk full)")

// failedRun runs a source on path whose one group's recording cannot be
// written (its Flush fails: nothing it handles is dispatched, so nothing
// is committed) until the group failed, then stops it; it returns what
// its processor handled.
func failedRun(t *testing.T, path string) *rec {
	t.Helper()
	p := &rec{}
	obs := engine.Observer{Flush: func(string) error { return errDiskFull }}
	r := start(t, path, Options{}, setup{procs: []*rec{p}, observer: obs})
	testutil.AdvanceUntil(t, "the group failed on its recording", func() bool { return r.e.Err() != nil })
	var oe *engine.ObserverError
	if err := r.e.Stop(context.Background()); !errors.As(err, &oe) || !errors.Is(err, errDiskFull) {
		t.Fatalf("stop: %v, want the observer's failure", err)
	}
	if p.count() == 0 {
		t.Fatal("the failed run handled no line: the test proves nothing")
	}
	return p
}

// sameHeader fails unless the pointer file at ptr still holds want's
// position: its file (identity and fingerprint), offset and epoch.
func sameHeader(t *testing.T, ptr string, want Pointer, when string) {
	t.Helper()
	if got := readPointer(t, ptr); got != want {
		t.Fatalf("%s the pointer holds %+v, want it as it was, %+v", when, got, want)
	}
}

// A run that counts a loss at its start (the pointer's file truncated
// while stopped, no copy of it) and whose recording cannot be written, so
// that it commits nothing and records no LOST row, leaves the pointer as
// it found it: the next run finds the same truncation, counts the same
// loss (the old file's identity, epoch and offset) and is told of it where
// a recorder writes its LOST row. The start used to write the new file's
// pointer at once: the next run found a pointer that agreed with the file,
// counted nothing and said lossless.
func TestARunThatCommitsNothingAfterALossAtItsStartLeavesThePointerForTheNextRunToCountIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("old", 0, 10))
		once(t, path, Options{}, 10)
		ptr := path + ".ptr"
		before := readPointer(t, ptr)
		writeFile(t, path, numbered("new", 0, 2)) // truncated in place: shorter than the pointer

		failedRun(t, path)
		sameHeader(t, ptr, before, "after a run that committed nothing,")

		var lost losses
		p := &rec{}
		r := start(t, path, Options{}, setup{procs: []*rec{p}, observer: lost.observer()})
		st := r.settle(2, p)
		r.stop()
		got, ds := p.got()
		if !slices.Equal(got, linesOf("new", 0, 2)) {
			t.Fatalf("got %q, want the new lines", got)
		}
		fs := st.Feeds[0]
		if st.Lossless || fs.Lossless || fs.Losses[LossUnread] != 1 {
			t.Fatalf("lossless %v, unreadFiles %d: want the loss counted again", fs.Lossless, fs.Losses[LossUnread])
		}
		want := []engine.Loss{{Reason: LossUnread, Epoch: before.Epoch, From: before.Offset}}
		var ls []engine.Loss
		for _, sl := range lost.got() {
			sl.Detail = ""
			ls = append(ls, sl.Loss)
		}
		if !slices.Equal(ls, want) {
			t.Fatalf("losses told %+v, want %+v", ls, want)
		}
		after := readPointer(t, ptr)
		if after.Offset != 2*lineLen || after.Epoch != ds[0].Epoch || after.Identity != before.Identity {
			t.Fatalf("pointer %+v after the new lines were committed, want offset %d under their epoch %d", after, 2*lineLen, ds[0].Epoch)
		}
	})
}

// The lines read after a loss at the start of a run that commits nothing
// are read again by the next run under the same epoch while the file
// holds them (the same file, appended to or not), so that an app that
// skips what its durable state holds by epoch and offset
// (core.Delivery.AlreadyApplied) does not apply them twice; a file
// rewritten again meanwhile gets another epoch (the state skips none of
// its lines).
func TestTheLinesReadAfterALossAtTheStartKeepTheirEpochUntilTheFirstCommit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		then  func(t *testing.T, path string)
		lines []string
		same  bool // the failed run's epoch again
	}{
		{"unchanged", func(*testing.T, string) {}, linesOf("new", 0, 2), true},
		{"appended-to", func(t *testing.T, path string) { appendFile(t, path, numbered("new", 2, 3)) }, linesOf("new", 0, 3), true},
		{"rewritten-again", func(t *testing.T, path string) { writeFile(t, path, numbered("other", 0, 2)) }, linesOf("other", 0, 2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("old", 0, 10))
				once(t, path, Options{}, 10)
				writeFile(t, path, numbered("new", 0, 2))
				_, failed := failedRun(t, path).got()
				tc.then(t, path)

				p := &rec{}
				r := start(t, path, Options{}, setup{procs: []*rec{p}})
				r.settle(len(tc.lines), p)
				r.stop()
				got, ds := p.got()
				if !slices.Equal(got, tc.lines) {
					t.Fatalf("got %q, want %q", got, tc.lines)
				}
				if same := ds[0].Epoch == failed[0].Epoch; same != tc.same {
					t.Fatalf("epoch %d, the failed run's %d: want the same %v", ds[0].Epoch, failed[0].Epoch, tc.same)
				}
			})
		})
	}
}

// A file truncated or rewritten under a following source with no copy of
// it: the rest of it is counted lost, and the pointer moves to the file
// read again from 0 only with the commit of a line read after the loss
// (its LOST row is recorded before that line's rows), never at once
// because every line before the loss was committed: until then it keeps
// the old file, offset and epoch, so that a crash leaves the loss for the
// restart to count again; the new epoch is the pointer file's pending
// header meanwhile, for the restart to read the file under it.
func TestALossWhileFollowingMovesThePointerOnlyWithALineReadAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("old", 0, 10))
		ptr := path + ".ptr"
		release := testutil.NewGate(t)
		p := &rec{gate: blockAt("new-0000000", release)}
		r := start(t, path, Options{}, setup{procs: []*rec{p}})
		testutil.AdvanceUntil(t, "the old lines committed", func() bool { return p.count() == 10 && readPointer(t, ptr).Offset == 10*lineLen })
		before := readPointer(t, ptr)
		writeFile(t, path, numbered("new", 0, 2)) // truncated in place, no copy
		testutil.AdvanceUntil(t, "the loss counted", func() bool { return r.feed().Losses[LossUnread] == 1 })
		testutil.Advance(50 * time.Millisecond) // many duty cycles
		sameHeader(t, ptr, before, "with no line read after the loss processed,")
		b, err := os.ReadFile(ptr)
		if err != nil {
			t.Fatal(err)
		}
		pending := pendingOf(b)
		if pending.Epoch == 0 || pending.Epoch == before.Epoch || pending.Identity != before.Identity {
			t.Fatalf("pending header %+v: want the file's, under a new epoch", pending)
		}
		release.Open()
		r.settle(12, p)
		r.stop()
		_, ds := p.got()
		after := readPointer(t, ptr)
		if after.Offset != 2*lineLen || after.Epoch != pending.Epoch || ds[10].Epoch != pending.Epoch {
			t.Fatalf("pointer %+v, deliveries under %d: want offset %d under the pending epoch %d", after, ds[10].Epoch, 2*lineLen, pending.Epoch)
		}
		b, err = os.ReadFile(ptr)
		if err != nil {
			t.Fatal(err)
		}
		if q := pendingOf(b); q != (Pointer{}) {
			t.Fatalf("pending header %+v left after the commit", q)
		}
	})
}
