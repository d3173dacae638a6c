package outbox_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/outbox"
)

// A clean run of N items, each giving one or two outputs, leaves each
// output in the out file once, in processing order, and says so in its
// status; a second run over the same marks with nothing new delivers
// nothing.
func TestARunDeliversEachRecordedCommittedOutputOnceInOrder(t *testing.T) {
	b := newBench(t)
	tp := newTape(ints(1, 50)...)
	_, box := b.mustOpenFile(outbox.FormatValue)
	st := b.runAll(box, tp)
	if diff := cmp.Diff(outputs(1, 50), lines(t, b.out)); diff != "" {
		t.Fatalf("out file (-want +got):\n%s", diff)
	}
	want := outbox.Status{Guarantee: outbox.GuaranteeExactlyOnce, Batches: st.Batches, Delivered: count(1, 50)}
	if diff := cmp.Diff(want, st); diff != "" || st.Batches < 1 {
		t.Fatalf("status (-want +got):\n%s", diff)
	}
	if got := tp.getCommitted(); got != 50 {
		t.Fatalf("committed through %d, want 50", got)
	}

	_, box = b.mustOpenFile(outbox.FormatValue)
	if st := box.Status(); st.Delivered != 0 || st.Batches != 0 {
		t.Fatalf("a recovery after a clean run delivered %+v", st)
	}
	tp.add(ints(51, 60)...)
	st = b.runAll(box, tp)
	if diff := cmp.Diff(outputs(1, 60), lines(t, b.out)); diff != "" {
		t.Fatalf("out file after a second run (-want +got):\n%s", diff)
	}
	if st.Delivered != count(51, 60) || st.Recovered != 0 || st.Suppressed != 0 {
		t.Fatalf("second run's status %+v, want %d delivered, none recovered or suppressed", st, count(51, 60))
	}
}
