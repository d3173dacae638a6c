package replayer_test

import (
	"log/slog"
	"time"

	"github.com/blackbox-audit/blackbox/engine/memsource"
	"slices"
	"strconv"

	"context"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
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
// says not lossless, explain says lost. The seek itself is a CONTROL row
// the engine's observer wrote before the DROPPED row, for a direct caller
// of Engine.Seek as for the console's.
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
	// The engine's observer recorded the seek (a direct caller: no
	// console), before its effect: its CONTROL row precedes the DROPPED
	// row of what it skipped.
	all := rows(t, m.ReadOnly())
	var controls []store.Control
	for _, e := range all {
		if e.Kind == store.KindControl {
			c, err := store.ControlOf(e)
			if err != nil {
				t.Fatal(err)
			}
			controls = append(controls, c)
		}
	}
	want := store.Control{Feed: "input", Group: "g", Action: store.ControlSeek, Who: engine.DefaultOperator, Reason: "poison backlog",
		Before: 6, After: 20, Released: 14}
	if len(controls) != 1 || controls[0].At.IsZero() {
		t.Fatalf("CONTROL rows %+v, want one, of the seek %+v", controls, want)
	}
	controls[0].At = time.Time{}
	if controls[0] != want {
		t.Errorf("CONTROL row %+v, want %+v", controls[0], want)
	}
	ctl := slices.IndexFunc(all, func(e store.Entry) bool { return e.Kind == store.KindControl })
	if drop := find(t, all, "p", store.KindDropped, 1); ctl > drop {
		t.Errorf("the CONTROL row at %d, the DROPPED row at %d: want the seek recorded before its effect", ctl, drop)
	}
}

// A range a backwards seek moved a group back over (engine.Engine.Seek to
// a seq before its position: the source reads it again) is in the
// recording as the group's inputs of new seqs after the feed's last one
// at the seek, with the items' first positions, after a CONTROL row of
// the seek whose after is below its before (the recorded move back,
// written by the engine's observer for a direct caller of Engine.Seek):
// every seq has its row, the COMMIT rows' seqs only grow, and replay
// replays it identical, complete and lossless; explain finds it complete,
// nothing lost.
func TestAMovedBackRangeIsReDeliveredAsRecorded(t *testing.T) {
	var m *store.Memory
	var plan engine.SeekPlan
	synctest.Test(t, func(t *testing.T) {
		e, rec, log, gate, mem := echoRun(t)
		m = mem
		ctx := context.Background()
		gate.Open()
		testutil.AdvanceUntil(t, "the commit at 20", func() bool { return log.Committed() == 20 })
		if err := e.Fence("g"); err != nil {
			t.Fatal(err)
		}
		var gen int64
		for _, s := range e.Status().Feeds[0].Subscribers {
			if !s.Removed {
				gen = s.Generation
			}
		}
		var err error
		// A direct caller of the engine: no console, no Recorder.Control
		// call; the engine's observer writes the seek's CONTROL row.
		if plan, err = e.Seek("input", "g", gen, engine.SeekTarget{Seq: 10}, engine.SeekOptions{Reason: "recompute", Who: "op", At: t0}); err != nil {
			t.Fatal(err)
		}
		if err := e.Resume("input", "g", plan.Replacement); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "the commit at 20 again", func() bool {
			return e.Feed("input").Status().Acknowledged == 30 && log.Committed() == 20
		})
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if !plan.Redelivery || plan.Before != 20 || plan.After != 10 || plan.FirstSeq != 11 || plan.LastSeq != 20 || plan.Redelivered != 10 {
		t.Fatalf("seek %+v, want a re-delivery of seqs 11-20 (10 items)", plan)
	}
	var inputs []string
	var commits []int64
	var controls []store.Control
	for _, e := range rows(t, m.ReadOnly()) {
		switch {
		case e.Kind == store.KindControl:
			c, err := store.ControlOf(e)
			if err != nil {
				t.Fatal(err)
			}
			controls = append(controls, c)
			if len(inputs) != 20 {
				t.Errorf("the CONTROL row after %d inputs: want it before the first item read again (after 20)", len(inputs))
			}
		case e.Processor == "p" && e.Kind == store.KindDelivery:
			inputs = append(inputs, strconv.FormatInt(e.Seq, 10)+"@"+strconv.FormatInt(e.Offset, 10))
		case e.Kind == store.KindCommit:
			commits = append(commits, e.Seq)
		}
	}
	var want []string
	for i := 1; i <= 20; i++ {
		want = append(want, strconv.Itoa(i)+"@"+strconv.Itoa(i))
	}
	for i := 11; i <= 20; i++ {
		want = append(want, strconv.Itoa(i+10)+"@"+strconv.Itoa(i))
	}
	if !slices.Equal(inputs, want) {
		t.Errorf("p's inputs (seq@offset)\n%q\nwant\n%q", inputs, want)
	}
	if !slices.IsSorted(commits) || len(commits) == 0 || commits[len(commits)-1] != 30 {
		t.Errorf("COMMIT rows' seqs %v: want growing, to 30", commits)
	}
	moveBack := store.Control{Feed: "input", Group: "g", Action: store.ControlSeek, Who: "op", Reason: "recompute", At: t0, Before: 20, After: 10}
	if want := []store.Control{moveBack}; !slices.Equal(controls, want) {
		t.Errorf("CONTROL rows %+v, want %+v (one, the move back)", controls, want)
	}
	apps := []core.App{{Name: "echo", New: func(map[string]string) (core.Processor, error) { return echo(), nil }, Decode: recorder.JSON.Decode}}
	rep, err := replayer.Replay(context.Background(), m.ReadOnly(), apps, replayer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type verdict struct{ Identical, Complete, Lossless bool }
	if got, want := (verdict{rep.Identical, rep.Complete, rep.Lossless}), (verdict{true, true, true}); got != want {
		t.Errorf("replay %+v, want %+v: problems %v", got, want, rep.Problems)
	}
	f, err := incident.Explain([]incident.Recording{{File: "run", Reader: m.ReadOnly()}}, incident.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Complete || f.Lost {
		t.Errorf("explain: complete %v, lost %v; want complete, nothing lost", f.Complete, f.Lost)
	}
	if len(f.Runs) != 1 || len(f.Runs[0].Controls) != 1 || f.Runs[0].Controls[0].Control() != moveBack {
		t.Errorf("explain's operator actions %+v, want the move back %+v", f.Runs, moveBack)
	}
	for _, a := range f.Answers {
		if len(a.Redelivered) != 0 || len(a.Duplicates) != 0 {
			t.Errorf("explain: %s redelivered %d, duplicates %d: want none (one run)", a.Processor, len(a.Redelivered), len(a.Duplicates))
		}
	}
}

// With two groups, the items a backwards seek of g reads again are in h's
// stream as a COMPLETED row of their new seqs (h was handed them under
// their first ones), so the recording of both streams is complete: every
// seq of each has its row, and it replays identical and lossless.
func TestAMovedBackRangeIsCompletedForTheOtherGroup(t *testing.T) {
	m := store.NewMemory()
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog()
		for i := 1; i <= 20; i++ {
			log.Append(strconv.Itoa(i))
		}
		log.Close()
		live := core.ProcessorFunc(func(c *core.Cycle, ev any) error { c.Emit("out", ev); return nil })
		rec, err := recorder.New(m, recorder.Options{Clock: core.NewStepClock(t0, time.Second),
			Apps: map[string]string{"p": "echo", "q": "echo"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{
			Clock: core.NewStepClock(e0, time.Millisecond),
			Feeds: []engine.FeedConfig{{Name: "input", Source: log.GroupSource(), QueueSize: 32, SkipCompleted: true}},
			Groups: []engine.GroupConfig{
				{Name: "g", Feeds: []string{"input"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: live}}},
				{Name: "h", Feeds: []string{"input"}, Processors: []engine.ProcessorConfig{{Name: "q", Processor: live}}}},
			Observer: rec.Observer(),
			Logger:   slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "the commit at 20", func() bool { return log.Committed() == 20 })
		if err := e.Fence("g"); err != nil {
			t.Fatal(err)
		}
		var gen int64
		for _, s := range e.Status().Feeds[0].Subscribers {
			if s.Queue == "g/input" && !s.Removed {
				gen = s.Generation
			}
		}
		p, err := e.Seek("input", "g", gen, engine.SeekTarget{Seq: 10}, engine.SeekOptions{Reason: "recompute"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Resume("input", "g", p.Replacement); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "the items read again acknowledged", func() bool {
			return e.Feed("input").Status().Acknowledged == 30 && log.Committed() == 20
		})
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	})
	var pInputs, qInputs int
	var completed []store.Completed
	for _, e := range rows(t, m.ReadOnly()) {
		switch {
		case e.Kind == store.KindDelivery && e.Processor == "p":
			pInputs++
		case e.Kind == store.KindDelivery && e.Processor == "q":
			qInputs++
		case e.Kind == store.KindCompleted:
			if e.Processor != "q" {
				t.Errorf("a COMPLETED row in %s's stream: only h's (q) is handed nothing again", e.Processor)
			}
			c, err := store.CompletedOf(e)
			if err != nil {
				t.Fatal(err)
			}
			c.Epoch = 0
			completed = append(completed, c)
		}
	}
	want := []store.Completed{{Feed: "input", Seq: 21, Items: 10, From: 11, Last: 20}}
	if pInputs != 30 || qInputs != 20 || !slices.Equal(completed, want) {
		t.Errorf("p's inputs %d, q's %d, COMPLETED rows %+v: want 30, 20, %+v", pInputs, qInputs, completed, want)
	}
	apps := []core.App{{Name: "echo", New: func(map[string]string) (core.Processor, error) { return echo(), nil }, Decode: recorder.JSON.Decode}}
	rep, err := replayer.Replay(context.Background(), m.ReadOnly(), apps, replayer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Identical || !rep.Complete || !rep.Lossless {
		t.Errorf("replay identical %v complete %v lossless %v, want all: problems %v", rep.Identical, rep.Complete, rep.Lossless, rep.Problems)
	}
}
