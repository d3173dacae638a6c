package replayer_test

import (
	"context"
	"fmt"
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

// echo emits each item to sink "out".
func echo() core.Processor {
	return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Emit("out", ev)
		return nil
	})
}

// A range an operator released (engine.Engine.Release) is in the
// recording as a loss where it was: a DROPPED row of the group's stream
// covering the released seqs, with the operator's reason, after the
// inputs the group processed. The COMMIT row passes the range and the
// recording is still complete (every seq it covers has a row); replay
// replays it identical but not lossless, and explain says something was
// lost. The release itself is a CONTROL row the engine's observer wrote
// before the DROPPED row, for a direct caller of Engine.Release as for the
// console's.
func TestAReleasedRangeIsRecordedAsALoss(t *testing.T) {
	var m *store.Memory
	var rel engine.Released
	synctest.Test(t, func(t *testing.T) {
		e, rec, log, gate, mem := echoRun(t)
		m = mem
		ctx := context.Background()
		var err error
		synctest.Wait() // the source published 1-20; p handled 1-5 and waits in 6
		if err := e.Unsubscribe("g", "input"); err != nil {
			t.Fatal(err)
		}
		gate.Open() // 6 completes; g takes nothing more of the removed queue
		synctest.Wait()
		if err := e.Subscribe("g", "input"); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "the commit at 6", func() bool { return log.Committed() == 6 })
		st := e.Status()
		var gen int64
		for _, s := range st.Feeds[0].Subscribers {
			if s.Removed {
				gen = s.Generation
			}
		}
		if st.Feeds[0].Stalled == nil || st.Settled {
			t.Fatalf("status %+v: want the feed stalled by the removed queue, not settled", st.Feeds[0])
		}
		if rel, err = e.Release("input", "g", gen, "poison backlog"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.WaitSettled(ctx); err != nil {
			t.Fatalf("not settled after the release: %v: %+v", err, e.Status())
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if got := log.Committed(); got != 20 {
			t.Fatalf("committed %d after the release, want 20", got)
		}
	})
	if rel.Unprocessed != 14 || rel.FirstSeq != 7 || rel.LastSeq != 20 {
		t.Fatalf("released %+v, want 14 unprocessed items, seqs 7-20", rel)
	}
	checkOperatorLoss(t, m.ReadOnly(), engine.ReleasedReason+"poison backlog")
	// The engine's observer recorded the release (a direct caller: no
	// console), before its effect: its CONTROL row precedes the DROPPED
	// row of what it released.
	all := rows(t, m.ReadOnly())
	var controls []store.Control
	for _, e := range all {
		if e.Kind == store.KindControl {
			c, err := store.ControlOf(e)
			if err != nil {
				t.Fatal(err)
			}
			c.At = time.Time{}
			controls = append(controls, c)
		}
	}
	want := store.Control{Feed: "input", Group: "g", Action: store.ControlRelease, Who: engine.DefaultOperator, Reason: "poison backlog",
		Before: 6, After: 20, Released: 14}
	if len(controls) != 1 || controls[0] != want {
		t.Fatalf("CONTROL rows %+v, want one, of the release %+v", controls, want)
	}
	ctl := slices.IndexFunc(all, func(e store.Entry) bool { return e.Kind == store.KindControl })
	if drop := find(t, all, "p", store.KindDropped, 1); ctl > drop {
		t.Errorf("the CONTROL row at %d, the DROPPED row at %d: want the release recorded before its effect", ctl, drop)
	}
}

// checkOperatorLoss checks the recording of a run whose operator took seqs
// 7-20 from group g's queue (Release, Seek) with reason (the engine's
// prefix and the operator's): p's stream holds the inputs it processed
// (1-6), then one DROPPED row of the 14 items with the reason; the last
// COMMIT is at 20; replay is identical, complete and not lossless, with
// that loss; explain is complete and says lost.
func checkOperatorLoss(t *testing.T, r store.Reader, reason string) {
	t.Helper()
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
	if dropped.N != 14 || !strings.Contains(dropped.Detail, reason) || commit.Seq != 20 {
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
	wantLoss := replayer.Loss{Kind: replayer.LossDropped, Feed: "input", Count: 14, First: 7, Last: 20, Reason: reason}
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

// echoRun records, in a new store.Memory, an engine whose group g's one
// processor p echoes each item of feed "input" (a memsource log of
// "1".."20", closed) and waits in item 6 until the gate opens; it starts
// the engine (inside the caller's synctest bubble) and returns it, its
// recorder, the log, the gate and the store.
func echoRun(t *testing.T) (*engine.Engine, *recorder.Recorder, *memsource.Log, *testutil.Gate, *store.Memory) {
	t.Helper()
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
	m := store.NewMemory()
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
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, rec, log, gate, m
}

// A release or a forward seek that takes only items the group processed,
// which still held the commit because its processing checkpoint
// (Engine.Hold) had not made them durable, writes no DROPPED row (their
// rows stand), but it is a loss the run's status counts (released, not
// lossless): what applied them may never be saved. The recording says so
// too: the action's CONTROL row carries what it took (released and
// processed), replay is identical and complete but not lossless, naming
// the action, and explain says lost, with the CONTROL row among its
// losses and no line lost (issue 27).
func TestAReleaseOfProcessedItemsIsRecordedAsTheLossTheStatusCounts(t *testing.T) {
	for _, action := range []string{store.ControlRelease, store.ControlSeek} {
		t.Run(action, func(t *testing.T) {
			var m *store.Memory
			var lossless bool
			var released int64
			synctest.Test(t, func(t *testing.T) {
				log := memsource.NewLog()
				for i := 1; i <= 20; i++ {
					log.Append(strconv.Itoa(i))
				}
				log.Close()
				m = store.NewMemory()
				rec, err := recorder.New(m, recorder.Options{Clock: core.NewStepClock(t0, time.Second),
					Apps: map[string]string{"p": "echo"}, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				e, err := engine.New(engine.Config{
					Clock:    core.NewStepClock(e0, time.Millisecond),
					Feeds:    []engine.FeedConfig{{Name: "input", Source: log.Source(), QueueSize: 32}},
					Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"input"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: echo()}}}},
					Observer: rec.Observer(),
					Logger:   slog.New(slog.DiscardHandler),
				})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.Hold("input", "g"); err != nil { // never made durable: every item holds the commit
					t.Fatal(err)
				}
				ctx := context.Background()
				if err := e.Start(ctx); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // p processed 1-20
				if err := e.Fence("g"); err != nil {
					t.Fatal(err)
				}
				var gen int64
				for _, s := range e.Status().Feeds[0].Subscribers {
					gen = s.Generation
				}
				if action == store.ControlRelease {
					_, err = e.Release("input", "g", gen, "state lost")
				} else {
					_, err = e.Seek("input", "g", gen, engine.SeekTarget{Latest: true}, engine.SeekOptions{Reason: "state lost"})
				}
				if err != nil {
					t.Fatal(err)
				}
				st := e.Status()
				lossless, released = st.Lossless, st.Feeds[0].Released
				if err := e.Stop(ctx); err != nil {
					t.Fatal(err)
				}
				if err := rec.Close(); err != nil {
					t.Fatal(err)
				}
			})
			if lossless || released != 20 {
				t.Fatalf("the run's status: lossless %v, released %d; want not lossless, 20 released", lossless, released)
			}
			r := m.ReadOnly()
			var controls []store.Control
			for _, e := range rows(t, r) {
				switch e.Kind {
				case store.KindDropped:
					t.Errorf("DROPPED row %+v: want none, the items were processed", e)
				case store.KindControl:
					c, err := store.ControlOf(e)
					if err != nil {
						t.Fatal(err)
					}
					controls = append(controls, c)
				}
			}
			type took struct {
				Action              string
				Released, Processed int64
			}
			if len(controls) != 1 {
				t.Fatalf("CONTROL rows %+v, want one", controls)
			}
			if got, want := (took{controls[0].Action, controls[0].Released, controls[0].Processed}), (took{action, 20, 20}); got != want {
				t.Errorf("CONTROL row took %+v, want %+v", got, want)
			}
			apps := []core.App{{Name: "echo", New: func(map[string]string) (core.Processor, error) { return echo(), nil }, Decode: recorder.JSON.Decode}}
			rep, err := replayer.Replay(context.Background(), r, apps, replayer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			type verdict struct{ Identical, Complete, Lossless bool }
			if got, want := (verdict{rep.Identical, rep.Complete, rep.Lossless}), (verdict{true, true, false}); got != want {
				t.Errorf("replay %+v, want %+v (the run said not lossless): problems %v", got, want, rep.Problems)
			}
			wantHold := []replayer.ReleasedHold{{Feed: "input", Group: "g", Action: action, Who: engine.DefaultOperator, Reason: "state lost", Released: 20, Processed: 20}}
			if !slices.Equal(rep.Released, wantHold) {
				t.Errorf("replay released %+v, want %+v", rep.Released, wantHold)
			}
			f, err := incident.Explain([]incident.Recording{{File: "run", Reader: r}}, incident.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !f.Complete || !f.Lost {
				t.Errorf("explain: complete %v, lost %v; want complete and lost (the run said not lossless)", f.Complete, f.Lost)
			}
			var kinds []string
			for _, l := range f.Losses {
				kinds = append(kinds, fmt.Sprintf("%s %d", l.Kind, l.Count))
			}
			if want := []string{incident.LossReleasedHeld + " 20"}; !slices.Equal(kinds, want) {
				t.Errorf("explain's losses %q, want %q", kinds, want)
			}
			for _, a := range f.Answers {
				if len(a.Lost) > 0 {
					t.Errorf("explain names lines lost %+v: want none, every item's rows stand", a.Lost)
				}
			}
		})
	}
}
