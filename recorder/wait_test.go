package recorder_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

var errSourceBroke = errors.New("test: the source broke")

// failingSource publishes its items, then ends with errSourceBroke. Its
// default policy pauses.
type failingSource struct{ items []any }

func (failingSource) DefaultPolicy() engine.Policy { return engine.Pause() }

func (s failingSource) Run(ctx context.Context, in *engine.Intake) error {
	in.SetState(engine.StateCaughtUp, "")
	for _, it := range s.items {
		if err := in.Publish(ctx, it); err != nil {
			return err
		}
	}
	return errSourceBroke
}

// startCounted starts a recorded run of src whose processor counts the
// items it handled. The feed's policy is src's default, else pause.
func startCounted(t *testing.T, src engine.Source) (*recorder.Run, *atomic.Int64) {
	return startCountedTo(t, src, &fakeWriter{})
}

// startCountedTo is startCounted recording to w.
func startCountedTo(t *testing.T, src engine.Source, w store.Writer) (*recorder.Run, *atomic.Int64) {
	t.Helper()
	var pol engine.Policy
	if _, ok := src.(engine.PolicySource); !ok {
		pol = engine.Pause()
	}
	var n atomic.Int64
	proc := core.ProcessorFunc(func(*core.Cycle, any) error { n.Add(1); return nil })
	app := core.App{Name: "count", New: func(map[string]string) (core.Processor, error) { return proc, nil }}
	run, err := recorder.Start(context.Background(), recorder.RunConfig{
		Store:      w,
		Logger:     slog.New(slog.DiscardHandler),
		Feed:       engine.FeedConfig{Name: "in", Source: src, Policy: pol, QueueSize: 8},
		Processors: []recorder.Processor{{Name: "count", App: app, Processor: proc}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return run, &n
}

// TestWaitEndsWhenTheRunSettlesOrTheSourceFails: without Follow, Wait
// returns once a bounded source's items are all processed (nil), and
// returns the error a failing source ended with. Start's wrapper of the
// source keeps its default policy (the failing source's feed sets none).
func TestWaitEndsWhenTheRunSettlesOrTheSourceFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  engine.Source
		want error
	}{
		{"bounded", memsource.NewList(1, 2, 3), nil},
		{"failing", failingSource{[]any{1, 2, 3}}, errSourceBroke},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, n := startCounted(t, tc.src)
			err := run.Wait(context.Background(), recorder.WaitConfig{})
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Errorf("Wait = %v, want %v", err, tc.want)
			}
			if _, recErr := run.Stop(context.Background()); recErr != nil {
				t.Fatal(recErr)
			}
			if tc.want == nil && n.Load() != 3 {
				t.Errorf("processed %d items before Wait returned, want 3", n.Load())
			}
			if tc.want == nil && !run.Engine().Status().Settled {
				t.Error("Wait returned nil on a run not settled")
			}
		})
	}
}

// TestWaitWithFollowOutlastsASettledRunUntilStop: with Follow, a settled
// run goes on (Wait does not return) until Stop is closed, or ctx is done.
func TestWaitWithFollowOutlastsASettledRunUntilStop(t *testing.T) {
	for _, by := range []string{"stop", "ctx"} {
		t.Run(by, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				items := make(chan any, 2)
				items <- 1
				items <- 2
				run, n := startCounted(t, memsource.NewChan(items))
				stop := make(chan struct{})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- run.Wait(ctx, recorder.WaitConfig{Follow: true, Stop: stop}) }()
				synctest.Wait()
				if !run.Engine().Status().Settled || n.Load() != 2 {
					t.Fatalf("settled %v after %d items, want settled after 2", run.Engine().Status().Settled, n.Load())
				}
				select {
				case err := <-done:
					t.Fatalf("Wait returned %v on a settled run with Follow", err)
				default:
				}
				if by == "stop" {
					close(stop)
				} else {
					cancel()
				}
				if err := <-done; err != nil {
					t.Errorf("Wait = %v, want nil", err)
				}
				if _, recErr := run.Stop(context.Background()); recErr != nil {
					t.Fatal(recErr)
				}
			})
		})
	}
}

// TestWaitWithFollowEndsWhenTheRecordingFails: a group that fails (the
// recorder cannot write its inputs: Engine.Err) ends Wait even with
// Follow, the run unsettled and its source still running.
func TestWaitWithFollowEndsWhenTheRecordingFails(t *testing.T) {
	errWrite := errors.New("test: write failed")
	w := &fakeWriter{fail: func(rows []store.Entry) error {
		for _, e := range rows {
			if e.Kind == store.KindInline {
				return errWrite
			}
		}
		return nil
	}}
	items := make(chan any, 1)
	items <- 1
	run, _ := startCountedTo(t, memsource.NewChan(items), w)
	if err := run.Wait(context.Background(), recorder.WaitConfig{Follow: true}); err != nil {
		t.Errorf("Wait = %v, want nil (the source did not fail)", err)
	}
	if !errors.Is(run.Engine().Err(), errWrite) {
		t.Errorf("Engine.Err = %v, want the write's failure", run.Engine().Err())
	}
	if _, recErr := run.Stop(context.Background()); !errors.Is(recErr, errWrite) {
		t.Errorf("Stop's recorder error = %v, want the write's failure", recErr)
	}
}

// behindSource says it is behind (it has more to publish) and publishes
// nothing until it is stopped: a run of it never settles.
type behindSource struct{}

func (behindSource) Run(ctx context.Context, in *engine.Intake) error {
	in.SetState(engine.StateBehind, "")
	<-ctx.Done()
	return nil
}

// TestWaitEndsWhenTheRunIsKilled: a kill ends Wait, with Follow or without
// (a killed run never settles: here it would not have settled anyway),
// with nil: the source did not fail; Stop then ends the run without a
// drain and the END rows say it was killed.
func TestWaitEndsWhenTheRunIsKilled(t *testing.T) {
	for _, follow := range []bool{false, true} {
		t.Run(map[bool]string{false: "settling", true: "follow"}[follow], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fakeWriter{}
				run, _ := startCountedTo(t, behindSource{}, w)
				done := make(chan error, 1)
				go func() { done <- run.Wait(context.Background(), recorder.WaitConfig{Follow: follow}) }()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("Wait returned %v before the kill", err)
				default:
				}
				if err := run.Engine().Kill("operator"); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Errorf("Wait = %v, want nil", err)
				}
				if _, recErr := run.Stop(context.Background()); recErr != nil {
					t.Fatal(recErr)
				}
				if ends := endsOf(t, w.rows()); ends["count"].Killed != "operator" {
					t.Errorf("END rows %+v, want killed: operator", ends)
				}
			})
		})
	}
}
