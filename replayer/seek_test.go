package replayer_test

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
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
		log := memsource.NewLog()
		for i := 1; i <= 20; i++ {
			log.Append(strconv.Itoa(i))
		}
		log.Close()
		gate := testutil.NewGate(t)
		live := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			if ev == "6" {
				gate.Wait()
			}
			c.Emit("out", ev)
			return nil
		})
		m = store.NewMemory()
		rec, err := recorder.New(m, recorder.Options{Clock: core.NewStepClock(t0, time.Second),
			Apps: map[string]string{"p": "echo"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{
			Clock:    core.NewStepClock(e0, time.Millisecond),
			Feeds:    []engine.FeedConfig{{Name: "input", Source: log.Source(), QueueSize: 32}},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"input"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: live}}}},
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
	r := m.ReadOnly()
	// p's stream: the inputs it processed (1-6), then the skipped range.
	var kinds []string
	var dropped, commit store.Entry
	for _, e := range rows(t, r) {
		switch {
		case e.Processor == "p" && e.Kind != store.KindOutput:
			kinds = append(kinds, string(e.Kind)+" "+strconv.FormatInt(e.Seq, 10))
			if e.Kind == store.KindDropped {
				dropped = e
			}
		case e.Kind == store.KindCommit:
			commit = e
		}
	}
	wantKinds := []string{"START 0"}
	for i := 1; i <= 6; i++ {
		wantKinds = append(wantKinds, "DELIVERY "+strconv.Itoa(i), "INLINE "+strconv.Itoa(i))
	}
	wantKinds = append(wantKinds, "DROPPED 7", "END 0")
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("p's rows\n%q\nwant\n%q", kinds, wantKinds)
	}
	if dropped.N != 14 || !strings.Contains(dropped.Detail, engine.SkippedReason+"poison backlog") || commit.Seq != 20 {
		t.Errorf("DROPPED row %+v, last COMMIT row %+v: want 14 items, the operator's reason, and the commit at seq 20", dropped, commit)
	}
	apps := []core.App{{Name: "echo", New: func(map[string]string) (core.Processor, error) { return echo(), nil }, Decode: recorder.JSON.Decode}}
	rep, err := replayer.Replay(context.Background(), r, apps, replayer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type verdict struct{ Identical, Complete, Lossless bool }
	if got, want := (verdict{rep.Identical, rep.Complete, rep.Lossless}), (verdict{true, true, false}); got != want {
		t.Errorf("replay %+v, want %+v: problems %v", got, want, rep.Problems)
	}
	wantLoss := replayer.Loss{Kind: replayer.LossDropped, Feed: "input", Count: 14, First: 7, Last: 20, Reason: engine.SkippedReason + "poison backlog"}
	if ls := rep.Processors[0].Losses; len(ls) != 1 || func() replayer.Loss { l := ls[0]; l.Index = 0; return l }() != wantLoss {
		t.Errorf("replay losses %+v, want [%+v]", ls, wantLoss)
	}
	f, err := incident.Explain([]incident.Recording{{File: "run", Reader: r}}, incident.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Complete || !f.Lost {
		t.Errorf("explain: complete %v, lost %v; want complete and lost", f.Complete, f.Lost)
	}
}
