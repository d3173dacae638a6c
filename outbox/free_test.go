package outbox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/outbox"
)

// pushRun runs the twice app over items pushed by a memsource.List (no
// position: its outputs are delivered once recorded, keyed by the
// recording, stream and row), delivering through box.
func pushRun(t *testing.T, b *bench, box *outbox.Outbox, items ...any) outbox.Status {
	t.Helper()
	l := b.start(box, runConfig{Source: memsource.NewList(items...),
		Feed: func(fc *engine.FeedConfig) { fc.Policy = engine.BlockWithDeadline(time.Minute) }})
	l.settle()
	st, err := l.stop()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// An output without a source position is keyed by its recording (META's
// creation instant), stream and row: the outputs of two runs have other
// keys, so a core.Idempotent sink keeps both runs' (it kept the first
// run's alone: the keys did not name the recording).
func TestOutputsWithoutAPositionAreKeyedByTheirRecording(t *testing.T) {
	b := newBench(t)
	ms := &memSink{idem: true}
	st := pushRun(t, b, b.mustOpen(idemSink{ms}), 1, 2)
	if want := (outbox.Status{Guarantee: outbox.GuaranteeIdempotent, Batches: st.Batches, Delivered: count(1, 2)}); st != want {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	pushRun(t, b, b.mustOpen(idemSink{ms}), 3, 4)
	if diff := cmp.Diff(outputs(1, 4), ms.payloads()); diff != "" {
		t.Fatalf("the sink holds (-want +got):\n%s", diff)
	}
	var keys []core.EffectKey
	for _, e := range ms.effects() {
		keys = append(keys, e.Key)
	}
	run1, run2 := t0.Add(time.Hour).Format(time.RFC3339Nano), t0.Add(2*time.Hour).Format(time.RFC3339Nano)
	// The rows of the recorder's stream: START, then per item its INLINE
	// row and its OUTPUT rows.
	want := []core.EffectKey{
		{Recording: run1, Stream: "twice", Row: 3, Index: 1},
		{Recording: run1, Stream: "twice", Row: 5, Index: 1}, {Recording: run1, Stream: "twice", Row: 6, Index: 2},
		{Recording: run2, Stream: "twice", Row: 3, Index: 1},
		{Recording: run2, Stream: "twice", Row: 5, Index: 1}, {Recording: run2, Stream: "twice", Row: 6, Index: 2},
	}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Fatalf("the keys (-want +got):\n%s", diff)
	}

	// Recovery gives a batch again with the keys it had: the sink drops
	// them.
	calls := ms.batchCalls()
	ms.failBatch(calls[len(calls)-1]+1, -1)
	box := b.mustOpen(idemSink{ms})
	l := b.start(box, runConfig{Source: memsource.NewList(5, 6),
		Feed: func(fc *engine.FeedConfig) { fc.Policy = engine.BlockWithDeadline(time.Minute) }})
	<-box.Failed()
	l.settle()
	if _, err := l.stop(); !errors.Is(err, errSink) {
		t.Fatalf("the outbox closed with %v, want the sink's error", err)
	}
	box = b.mustOpen(idemSink{ms})
	if st := box.Status(); st.Again == 0 || st.Again != int64(ms.failedSize()) {
		t.Fatalf("recovery's status %+v: want the failed batch's %d outputs again", st, ms.failedSize())
	}
	if err := box.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outputs(1, 6), ms.payloads()); diff != "" {
		t.Fatalf("the sink holds (-want +got):\n%s", diff)
	}
}
