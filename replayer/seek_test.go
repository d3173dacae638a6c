package replayer_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/store"
)

// A range a forward seek skipped (engine.Engine.Seek) is in the recording
// as a loss where it was, as a released one is: a DROPPED row of the
// group's stream covering the skipped seqs, with the operator's reason,
// after the inputs the group processed; the COMMIT row passes the range
// (a restart does not deliver it) and the recording is complete; replay
// says not lossless, explain says lost.
func TestASkippedRangeIsRecordedAsALoss(t *testing.T) {
	var m *store.Memory
	var rel engine.SeekPlan
	synctest.Test(t, func(t *testing.T) {
		e, rec, log, gate, mem := echoRun(t)
		m = mem
		ctx := context.Background()
		var err error
		synctest.Wait() // the source published 1-20; p handled 1-5 and waits in 6
		if err := e.Fence("g"); err != nil {
			t.Fatal(err)
		}
		gate.Open() // 6 completes; fenced, g takes nothing more
		synctest.Wait()
		testutil.AdvanceUntil(t, "the commit at 6", func() bool { return log.Committed() == 6 })
		var gen int64
		for _, s := range e.Status().Feeds[0].Subscribers {
			if !s.Removed {
				gen = s.Generation
			}
		}
		if rel, err = e.Seek("input", "g", gen, engine.SeekTarget{Latest: true}, engine.SeekOptions{Reason: "poison backlog"}); err != nil {
			t.Fatal(err)
		}
		if err := e.Resume("input", "g", rel.Replacement); err != nil {
			t.Fatal(err)
		}
		if _, err := e.WaitSettled(ctx); err != nil {
			t.Fatalf("not settled after the seek: %v: %+v", err, e.Status())
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if got := log.Committed(); got != 20 {
			t.Fatalf("committed %d after the seek, want 20", got)
		}
	})
	if rel.Unprocessed != 14 || rel.FirstSeq != 7 || rel.LastSeq != 20 {
		t.Fatalf("seek %+v, want 14 unprocessed items skipped, seqs 7-20", rel)
	}
	checkOperatorLoss(t, m.ReadOnly(), engine.SkippedReason+"poison backlog")
}
