package outbox_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/outbox"
)

// committedThrough returns an observer telling the tape's offsets
// committed on the channel (buffered: the hook never waits).
func committedThrough() (engine.Observer, <-chan int64) {
	ch := make(chan int64, 1024)
	return engine.Observer{Committed: func(_ string, c engine.Commit) { ch <- c.Position.Offset }}, ch
}

// waitCommitted waits until the offsets committed reach off.
func waitCommitted(t *testing.T, ch <-chan int64, off int64) {
	t.Helper()
	for got := range ch {
		if got >= off {
			return
		}
	}
}

// crashAt runs the twice app over items fed one at a time (each the only
// item of its batch: the next is fed once the sink took the batch before),
// the sink failing batch k: the outbox fails. Items k+1 .. k+3 are then
// recorded and committed, not delivered, and the run is stopped. It
// returns the outbox's Close error.
func crashAt(t *testing.T, b *bench, sink core.EffectSink, ms *memSink, k int) error {
	t.Helper()
	called := make(chan int64, 16)
	ms.tell(called)
	ms.failBatch(int64(k), ms.apply)
	box := b.mustOpen(sink)
	tp := b.tape
	obs, committed := committedThrough()
	l := b.start(box, runConfig{Source: tp.source(), Observer: obs})
	for n := 1; n <= k; n++ {
		tp.add(n)
		if got := <-called; got != int64(n) {
			t.Fatalf("item %d's outputs came in batch %d", n, got)
		}
	}
	<-box.Failed()
	if !errors.Is(box.Err(), errSink) {
		t.Fatalf("the outbox failed with %v, want the sink's error", box.Err())
	}
	tp.add(ints(k+1, k+3)...)
	waitCommitted(t, committed, int64(k+3))
	l.settle() // the outbox failed: at once
	_, err := l.stop()
	ms.tell(nil)
	return err
}

// A sink whose delivery of batch k fails (having taken none, part or all
// of it) fails the outbox and the run stops; the next run's Open
// finishes batch k as the sink's kind allows, then delivers what the
// failed run recorded and committed, before anything of its own:
// nothing is lost, and only a sink that cannot say what it holds sees
// outputs twice (those of batch k it had taken), counted in Status.Again.
func TestTheNextRunFinishesABatchWhoseDeliveryFailedThenDeliversWhatWasLeft(t *testing.T) {
	const k = 3
	for _, tc := range []struct {
		name      string
		sink      func(*memSink) core.EffectSink
		apply     int // of batch k's effects, what the sink took before failing (-1: all)
		guarantee string
		again     bool // batch k is delivered again
		twice     int  // outputs the sink holds twice
	}{
		{"transactional, failed before its commit", func(s *memSink) core.EffectSink { s.tx = true; return txSink{s} }, 0,
			outbox.GuaranteeExactlyOnce, true, 0},
		{"transactional, failed after its commit", func(s *memSink) core.EffectSink { s.tx = true; return txSink{s} }, -1,
			outbox.GuaranteeExactlyOnce, false, 0},
		{"idempotent, failed part way", func(s *memSink) core.EffectSink { s.idem = true; return idemSink{s} }, 1,
			outbox.GuaranteeIdempotent, true, 0},
		{"idempotent, failed after all", func(s *memSink) core.EffectSink { s.idem = true; return idemSink{s} }, -1,
			outbox.GuaranteeIdempotent, true, 0},
		{"plain, failed before any", func(s *memSink) core.EffectSink { return plainSink{s} }, 0,
			outbox.GuaranteeAtLeastOnce, true, 0},
		{"plain, failed part way", func(s *memSink) core.EffectSink { return plainSink{s} }, 1,
			outbox.GuaranteeAtLeastOnce, true, 1},
		{"plain, failed after all", func(s *memSink) core.EffectSink { return plainSink{s} }, -1,
			outbox.GuaranteeAtLeastOnce, true, int(count(k, k))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			b.tape = newTape()
			ms := &memSink{apply: tc.apply}
			sink := tc.sink(ms)
			if err := crashAt(t, b, sink, ms, k); !errors.Is(err, errSink) {
				t.Fatalf("the failed run's outbox closed with %v, want the sink's error", err)
			}
			if got := ms.failedSize(); got != int(count(k, k)) {
				t.Fatalf("batch %d held %d outputs, want %d", k, got, count(k, k))
			}

			// The next run: recovery, then items k+4 .. k+6.
			box := b.mustOpen(sink)
			st := box.Status()
			recovered := count(k+1, k+3)
			want := outbox.Status{Guarantee: tc.guarantee, Batches: 1, Delivered: recovered, Recovered: recovered}
			if tc.again {
				want.Batches++
				want.Delivered += count(k, k)
				want.Recovered += count(k, k)
				if tc.guarantee != outbox.GuaranteeExactlyOnce {
					want.Again = count(k, k)
				}
			}
			if diff := cmp.Diff(want, st); diff != "" {
				t.Fatalf("recovery's status (-want +got):\n%s", diff)
			}
			b.tape.add(ints(k+4, k+6)...)
			st = b.runAll(box, b.tape)
			if st.Delivered-want.Delivered != count(k+4, k+6) {
				t.Fatalf("the run delivered %d outputs of its own, want %d", st.Delivered-want.Delivered, count(k+4, k+6))
			}

			// In order, each once, but what the sink had taken of batch k
			// when it failed, again.
			wantHeld := outputs(1, k-1)
			batchK := outputs(k, k)
			taken := tc.apply
			if taken < 0 {
				taken = len(batchK)
			}
			if tc.twice > 0 {
				wantHeld = append(wantHeld, batchK[:taken]...)
			}
			wantHeld = append(wantHeld, outputs(k, k+6)...)
			if diff := cmp.Diff(wantHeld, ms.payloads()); diff != "" {
				t.Fatalf("the sink holds (-want +got):\n%s", diff)
			}
			if got := len(ms.payloads()) - int(count(1, k+6)); got != tc.twice {
				t.Fatalf("the sink holds %d outputs twice, want %d", got, tc.twice)
			}
			// Batches numbered from 1 without a gap; only batch k twice.
			calls := ms.batchCalls()
			wantCalls := []int64{1, 2, 3}
			if tc.again {
				wantCalls = append(wantCalls, 3)
			}
			if !slices.Equal(calls[:len(wantCalls)], wantCalls) || !slices.IsSorted(calls) || calls[len(calls)-1] != int64(len(slices.Compact(slices.Clone(calls)))) {
				t.Fatalf("the sink's batches: %v, want %v then 4, 5 ...", calls, wantCalls)
			}
		})
	}
}

// A full disk fails the file sink's batch k part way (each of its tries
// writes half of what is left): the outbox fails and the run stops. The
// next run's Open appends the rest of batch k, then the outputs the
// failed run recorded and committed, before its own: the file holds each
// output once, in order.
func TestAFullDiskStopsTheRunAndTheNextRunAppendsWhatItLeftFirst(t *testing.T) {
	const k = 3
	b := newBench(t)
	f, err := outbox.OpenFile(b.out, outbox.FormatEnvelope, false)
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan int, 16)
	f.Wrap(func(w io.Writer) io.Writer { return &notifyWriter{w: w, failFrom: k, wrote: wrote} })
	box := b.mustOpen(f)
	tp := newTape()
	obs, committed := committedThrough()
	l := b.start(box, runConfig{Source: tp.source(), Observer: obs})
	for n := 1; n <= k; n++ {
		tp.add(n)
		<-wrote
	}
	<-box.Failed()
	if !errors.Is(box.Err(), errDiskFull) {
		t.Fatalf("the outbox failed with %v, want the disk's error", box.Err())
	}
	tp.add(ints(k+1, k+3)...)
	waitCommitted(t, committed, k+3)
	l.settle()
	st, err := l.stop()
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("the outbox closed with %v, want the disk's error", err)
	}
	// The failed batch (item k) and what was committed after it (k+1 ..
	// k+3): recorded and committed, not delivered.
	if st.Undelivered != count(k, k+3) || st.Pending != 0 {
		t.Fatalf("the failed run's status %+v, want %d undelivered, none pending", st, count(k, k+3))
	}
	f.Close()
	if cut := readFile(t, b.out); bytes.Count(cut, []byte("\n")) != int(count(1, k-1)) || cut[len(cut)-1] == '\n' {
		t.Fatalf("the failed run left %q, want %d whole lines and part of one", cut, count(1, k-1))
	}

	_, box = b.mustOpenFile(outbox.FormatEnvelope)
	st = box.Status()
	if want := (outbox.Status{Guarantee: outbox.GuaranteeExactlyOnce, Batches: 2, Delivered: count(k, k+3),
		Recovered: count(k, k+3)}); st != want {
		t.Fatalf("recovery's status %+v, want %+v", st, want)
	}
	tp.add(ints(k+4, k+6)...)
	b.runAll(box, tp)
	var got []string
	for _, l := range lines(t, b.out) {
		var e struct {
			Key    core.EffectKey  `json:"key"`
			Output json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		var o out
		json.Unmarshal(e.Output, &o)
		if want := (core.EffectKey{Feed: "in", Epoch: 1, Position: core.Position{Offset: int64(o.N)}, Index: int64(o.K)}); e.Key != want {
			t.Fatalf("the line of %s has the key %+v, want %+v", e.Output, e.Key, want)
		}
		got = append(got, string(e.Output))
	}
	if diff := cmp.Diff(outputs(1, k+6), got); diff != "" {
		t.Fatalf("the file's outputs (-want +got):\n%s", diff)
	}
}

// failAfterCommit is the example's SQL sink, the process dying right
// after the transaction of batch n committed: the outbox never learns
// that it went through.
type failAfterCommit struct {
	*sqlSink
	n int64
}

func (s failAfterCommit) Deliver(batch int64, effects []core.Effect) error {
	if err := s.sqlSink.Deliver(batch, effects); err != nil || batch != s.n {
		return err
	}
	return errSink
}

// The SQL sink of Example_sqlSink (docs/PROCESSORS.md) holds each output
// once when its delivery fails after its transaction committed: the next
// Open asks Delivered and does not deliver that batch again; and once
// when it fails before: the batch is delivered again.
func TestTheExamplesSQLSinkHoldsEachOutputOnceWhateverItsFailure(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed %v", committed), func(t *testing.T) {
			b := newBench(t)
			db, err := sql.Open("sqlite", filepath.Join(b.dir, "outputs.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			s, err := newSQLSink(db)
			if err != nil {
				t.Fatal(err)
			}
			var sink core.EffectSink = failAfterCommit{s, 1}
			if !committed {
				sink = failBefore{s, 1}
			}
			tp := newTape(ints(1, 4)...)
			tp.setClosed(true)
			box := b.mustOpen(sink)
			l := b.start(box, runConfig{Source: tp.source()})
			<-box.Failed()
			l.settle()
			if _, err := l.stop(); !errors.Is(err, errSink) {
				t.Fatalf("the outbox closed with %v, want the sink's error", err)
			}

			held := int64(len(tableOutputs(t, db)))
			if committed == (held == 0) {
				t.Fatalf("the table holds %d outputs after the failure", held)
			}

			box = b.mustOpen(s)
			st := box.Status()
			if left := count(1, 4) - held; st.Recovered != left || st.Again != 0 {
				t.Fatalf("recovery's status %+v, want the %d outputs the table lacked recovered", st, left)
			}
			tp.add(ints(5, 6)...)
			b.runAll(box, tp)
			if diff := cmp.Diff(outputs(1, 6), tableOutputs(t, db)); diff != "" {
				t.Fatalf("the table holds (-want +got):\n%s", diff)
			}
		})
	}
}

// tableOutputs is the outputs the example's SQL sink holds, in order.
func tableOutputs(t *testing.T, db *sql.DB) []string {
	t.Helper()
	var got []string
	rows, err := db.Query(`SELECT output FROM outputs ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// failBefore is the SQL sink failing batch n before its transaction.
type failBefore struct {
	*sqlSink
	n int64
}

func (s failBefore) Deliver(batch int64, effects []core.Effect) error {
	if batch == s.n {
		return errSink
	}
	return s.sqlSink.Deliver(batch, effects)
}

// A recovery whose own delivery fails (Open returns the sink's error)
// has marked the batch it was delivering: the next Open finishes that
// batch as the sink allows and delivers the rest, nothing lost, and an
// exactly-once sink holds each output once.
func TestARecoveryThatFailsIsFinishedByTheNextOpen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sink  func(*memSink) core.EffectSink
		apply int
		twice int
	}{
		{"transactional", func(s *memSink) core.EffectSink { s.tx = true; return txSink{s} }, 0, 0},
		{"plain, after all", func(s *memSink) core.EffectSink { return plainSink{s} }, -1, int(count(4, 6))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			b.tape = newTape()
			ms := &memSink{apply: 0}
			sink := tc.sink(ms)
			if err := crashAt(t, b, sink, ms, 3); !errors.Is(err, errSink) {
				t.Fatal(err)
			}
			// Open: batch 3 again (the sink took none of it), then batch 4
			// (items 4..6) fails.
			ms.failBatch(4, tc.apply)
			if box, err := b.open(sink); !errors.Is(err, errSink) {
				if box != nil {
					box.Close()
				}
				t.Fatalf("Open: %v, want the sink's error", err)
			}
			box := b.mustOpen(sink)
			st := box.Status()
			if err := box.Close(); err != nil {
				t.Fatal(err)
			}
			if want := int64(tc.twice); st.Again != want {
				t.Fatalf("the second recovery's status %+v, want %d again", st, want)
			}
			got := ms.payloads()
			want := outputs(1, 3)
			if tc.twice > 0 {
				want = append(want, outputs(4, 6)...)
			}
			want = append(want, outputs(4, 6)...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("the sink holds (-want +got):\n%s", diff)
			}
			if calls := ms.batchCalls(); !slices.Equal(calls, []int64{1, 2, 3, 3, 4, 4}) {
				t.Fatalf("the sink's batches: %v, want 1, 2, 3, 3 (recovery), 4 (failed), 4", calls)
			}
		})
	}
}

// With two workers each input is in one of two streams: the batches'
// marks hold a watermark per stream, and a crash's recovery delivers
// each output once, but those of the failed batch the sink had taken.
func TestTwoWorkersStreamsAreDeliveredOnceAcrossAFailure(t *testing.T) {
	b := newBench(t)
	ms := &memSink{}
	called := make(chan int64, 1024)
	ms.tell(called)
	box := b.mustOpen(plainSink{ms})
	tp := newTape(ints(1, 100)...)
	l := b.start(box, runConfig{Source: tp.source(), Workers: 2})
	for len(ms.payloads()) < int(count(1, 100)) {
		<-called
	}
	calls := ms.batchCalls()
	ms.failBatch(calls[len(calls)-1]+1, -1) // the next: taken, then failed, delivered again in full
	tp.add(ints(101, 200)...)
	tp.setClosed(true)
	<-box.Failed()
	l.settle()
	if _, err := l.stop(); !errors.Is(err, errSink) {
		t.Fatalf("the outbox closed with %v, want the sink's error", err)
	}
	ms.tell(nil)
	failed := ms.failedSize()
	box = b.mustOpen(plainSink{ms})
	if st := box.Status(); st.Again != int64(failed) || failed == 0 {
		t.Fatalf("recovery's status %+v, want the %d outputs of the failed batch again", st, failed)
	}
	tp.add(ints(201, 220)...)
	b.runAll(box, tp)
	seen := map[string]int{}
	for _, p := range ms.payloads() {
		seen[p]++
	}
	twice := 0
	for _, o := range outputs(1, 220) {
		switch seen[o] {
		case 1:
		case 2:
			twice++
		default:
			t.Fatalf("%s delivered %d times", o, seen[o])
		}
	}
	if len(seen) != int(count(1, 220)) || twice != failed {
		t.Fatalf("%d outputs delivered, %d twice; want %d, %d twice (the failed batch)", len(seen), twice, count(1, 220), failed)
	}
}
