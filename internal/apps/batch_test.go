package apps_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// savedOffset is the offset of the ledger state file at path; 0 when
// there is no file yet, or a directory took its place (nothing is saved
// there).
func savedOffset(t *testing.T, path string) int64 {
	t.Helper()
	if fi, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.IsDir()) {
		return 0
	}
	return readState(t, path).Offset
}

// stateChecker is a feed's committer that checks, at every commit, that
// each line up to the committed offset is in the saved state of the
// worker that handles it (its state file's offset is at or past the
// line's): the source never commits what a crash could lose.
type stateChecker struct {
	t        *testing.T
	paths    []string // the state file of each worker
	workerOf []int    // the worker of the line at offset i+1

	mu        sync.Mutex
	acked     int64
	committed int64
	problems  []string
}

func (c *stateChecker) Acknowledged(_, _ int64, pos core.Position) {
	c.mu.Lock()
	c.acked = max(c.acked, pos.Offset)
	c.mu.Unlock()
}

func (c *stateChecker) Commit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	saved := make([]int64, len(c.paths))
	for w, p := range c.paths {
		saved[w] = savedOffset(c.t, p)
	}
	for o := c.committed + 1; o <= c.acked; o++ {
		if w := c.workerOf[o-1]; saved[w] < o {
			c.problems = append(c.problems, fmt.Sprintf("offset %d committed, but worker %d saved only through %d", o, w, saved[w]))
		}
	}
	c.committed = c.acked
	return nil
}

func (c *stateChecker) result() (int64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed, c.problems
}

// stepSource publishes its lines (line i at offset i) as far as the test
// allows (more), and polls acknowledgements when asked (poll) or woken
// by the feed; nothing on a clock.
type stepSource struct {
	lines []string
	check *stateChecker
	more  chan int
	poll  chan chan struct{}
}

func (s *stepSource) DefaultPolicy() engine.Policy { return engine.Pause() }

func (s *stepSource) Run(ctx context.Context, in *engine.Intake) error {
	in.SetCommitter(s.check)
	next, allowed := 0, 0
	for {
		if _, err := in.PollAcks(); err != nil {
			return err
		}
		for next < allowed && in.TryPublish(s.lines[next], core.Position{Offset: int64(next + 1)}) {
			next++
		}
		select {
		case <-ctx.Done():
			return nil
		case n := <-s.more:
			allowed += n
		case done := <-s.poll:
			if _, err := in.PollAcks(); err != nil {
				return err
			}
			close(done)
		case <-in.Ready():
		}
	}
}

// batchRun is a ledger on an engine: feed "in" (a stepSource), group "g"
// of the ledger on workers, key-ordered, each worker with the state file
// core.WorkerStream(state, w) (state itself for one worker), its commits
// checked by a stateChecker.
type batchRun struct {
	e     *engine.Engine
	src   *stepSource
	check *stateChecker
}

func startBatchRun(t *testing.T, workers int, every string, interval time.Duration, lines []string) *batchRun {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state.json")
	check := &stateChecker{t: t}
	for _, l := range lines {
		check.workerOf = append(check.workerOf, engine.WorkerOf(apps.Key(l), max(workers, 1)))
	}
	build := func(w int) (core.Processor, error) {
		path := state
		if workers > 1 {
			path = core.WorkerStream(state, w)
		}
		check.paths = append(check.paths, path)
		return apps.LedgerApp().Build(map[string]string{apps.OptionState: path, apps.OptionStateEvery: every, apps.OptionStateInterval: interval.String()})
	}
	pc := engine.ProcessorConfig{Name: "ledger"}
	built := 0
	if workers > 1 {
		pc.New = func() (core.Processor, error) { built++; return build(built - 1) }
	} else {
		p, err := build(0)
		if err != nil {
			t.Fatal(err)
		}
		pc.Processor = p
	}
	src := &stepSource{lines: lines, check: check, more: make(chan int), poll: make(chan chan struct{})}
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 64}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: workers, Key: apps.Key, Processors: []engine.ProcessorConfig{pc}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &batchRun{e: e, src: src, check: check}
}

// publish lets the source publish n more lines, then waits for every
// goroutine of the bubble to block (the lines handled).
func (r *batchRun) publish(t *testing.T, n int) {
	t.Helper()
	r.src.more <- n
	synctest.Wait()
}

// committed has the source poll its acknowledgements and returns the
// committed offset.
// breakWorker0State puts a directory in the place of worker 0's state
// file (the file set aside), so that its saves fail, and checks that
// worker 0 gets one of lines 5-8, the lines published next.
func (r *batchRun) breakWorker0State(t *testing.T) (path string) {
	t.Helper()
	path = r.check.paths[0] // worker 0's file
	if err := os.Rename(path, path+".aside"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.check.workerOf[4:8], 0) {
		t.Fatalf("worker 0 gets none of lines 5-8 (%v): its saves would not fail", r.check.workerOf[4:8])
	}
	return path
}

func (r *batchRun) committed(t *testing.T) int64 {
	t.Helper()
	done := make(chan struct{})
	r.src.poll <- done
	<-done
	c, _ := r.check.result()
	return c
}

func (r *batchRun) stop(t *testing.T) {
	t.Helper()
	if err := r.e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, problems := r.check.result(); len(problems) > 0 {
		t.Errorf("commits ahead of the saved state:\n%v", problems)
	}
}

func ledgerLines(n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = "acct-" + strconv.Itoa(i%5) + "," + strconv.Itoa(i+1)
	}
	return lines
}

// A ledger saving every 3 deliveries writes its state once the third
// completes, not at each delivery, and the source commits nothing the saved
// state does not hold: after 5 lines the file holds 3 and the commit stops
// before the third (the mark taken in its completion does not count it).
func TestTheLedgerSavesOnceABatchIsFullNotAtEveryDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startBatchRun(t, 1, "3", time.Hour, ledgerLines(10))
		r.publish(t, 5)
		if got := savedOffset(t, r.check.paths[0]); got != 3 {
			t.Errorf("after 5 lines the state file holds offset %d, want 3 (one batch of 3)", got)
		}
		if got := r.committed(t); got != 2 {
			t.Errorf("committed %d, want 2", got)
		}
		r.publish(t, 1)
		if got, c := savedOffset(t, r.check.paths[0]), r.committed(t); got != 6 || c != 5 {
			t.Errorf("after 6 lines: saved offset %d, committed %d; want 6, 5", got, c)
		}
		r.stop(t)
	})
}

// Lines that stop arriving leave no batch unsaved: within the interval
// the ledger saves what completed (no more lines needed) and the source
// commits all of it.
func TestAnIdleLedgerSavesItsPendingBatchWithinTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startBatchRun(t, 1, "1000", 100*time.Millisecond, ledgerLines(10))
		r.publish(t, 5)
		if got, c := savedOffset(t, r.check.paths[0]), r.committed(t); got != 0 || c != 0 {
			t.Fatalf("before the interval: saved offset %d, committed %d; want 0, 0 (the batch is not full)", got, c)
		}
		testutil.Advance(100 * time.Millisecond) // the bubble's clock: the interval passes
		if got, c := savedOffset(t, r.check.paths[0]), r.committed(t); got != 5 || c != 5 {
			t.Errorf("one interval later: saved offset %d, committed %d; want 5, 5", got, c)
		}
		r.stop(t)
	})
}

// A clean stop saves the batch in progress, and the engine's last commit
// carries it.
func TestTheLedgerSavesWhatItHoldsWhenTheEngineStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startBatchRun(t, 1, "1000", time.Hour, ledgerLines(10))
		r.publish(t, 5)
		r.stop(t)
		c, _ := r.check.result()
		if got := savedOffset(t, r.check.paths[0]); got != 5 || c != 5 {
			t.Errorf("after Stop: saved offset %d, committed %d; want 5, 5", got, c)
		}
		want := apps.LedgerState{Balances: map[string]int64{"acct-0": 1, "acct-1": 2, "acct-2": 3, "acct-3": 4, "acct-4": 5}, Applied: 5, Offset: 5}
		if got := readState(t, r.check.paths[0]); !equalState(got, want) {
			t.Errorf("saved state %+v, want %+v", got, want)
		}
	})
}

func equalState(a, b apps.LedgerState) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Over many lines, in batches of 7 with a short interval, on one worker
// and on three (each saving a state of its own, the commit spanning all
// three): no commit passes a line its worker did not save, and at the end
// every line is saved once and committed.
func TestNoCommitPassesALineItsWorkerDidNotSave(t *testing.T) {
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 300
				r := startBatchRun(t, workers, "7", time.Millisecond, ledgerLines(n))
				for range n / 10 {
					r.publish(t, 10)
					r.committed(t)
				}
				r.stop(t)
				var applied int64
				for _, p := range r.check.paths {
					applied += readState(t, p).Applied
				}
				if c, _ := r.check.result(); c != n || applied != n {
					t.Errorf("committed %d, applied %d; want %d each", c, applied, n)
				}
			})
		})
	}
}

// The batch options: state-every a positive integer, state-interval a
// positive duration; anything else is an option error.
func TestTheLedgerRefusesABadBatchOption(t *testing.T) {
	tests := []struct {
		key, value string
		ok         bool
	}{
		{apps.OptionStateEvery, "1", true},
		{apps.OptionStateEvery, "500", true},
		{apps.OptionStateEvery, "0", false},
		{apps.OptionStateEvery, "-3", false},
		{apps.OptionStateEvery, "x", false},
		{apps.OptionStateInterval, "250ms", true},
		{apps.OptionStateInterval, "0s", false},
		{apps.OptionStateInterval, "-1s", false},
		{apps.OptionStateInterval, "100", false},
	}
	for _, tt := range tests {
		_, err := apps.LedgerApp().Build(map[string]string{tt.key: tt.value})
		if got := err == nil; got != tt.ok || (err != nil && !errors.Is(err, core.ErrOption)) {
			t.Errorf("%s=%s: error %v, want ok %v (or core.ErrOption)", tt.key, tt.value, err, tt.ok)
		}
	}
}

// failFirst is a sink whose first n writes fail.
type failFirst struct{ n int }

func (s *failFirst) Write(_, _ string, _ any) error {
	if s.n > 0 {
		s.n--
		return errors.New("sink down")
	}
	return nil
}

// A try that failed after a posting (its output could not be written) is
// taken back when the line is tried again: a transfer retried once applies
// both its postings once, and the saved state holds them once.
func TestARetriedLineIsAppliedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	l := newLedger(t, apps.LedgerOptions{StatePath: path})
	h := core.NewHost("p", l, core.NewStepClock(t0, time.Millisecond), core.WithSink(&failFirst{n: 2}))
	d := &core.Delivery{Feed: "input", Sequence: 1, Epoch: 1, Position: core.Position{Offset: 9}}
	if tr := h.Handle(d, "a,7"); tr.Err == nil {
		t.Fatal("the first try did not fail")
	}
	if tr := h.Handle(d, "transfer,a,b,3"); tr.Err == nil { // as a retry of another line would be
		t.Fatal("the second try did not fail")
	}
	retry := *d
	retry.Attempt = 2
	if _, err := handle(t, h, &retry, "transfer,a,b,3"); err != nil {
		t.Fatal(err)
	}
	want := apps.LedgerState{Balances: map[string]int64{"a": -3, "b": 3}, Applied: 2, Epoch: 1, Offset: 9}
	if got := readState(t, path); !equalState(got, want) {
		t.Errorf("saved state %+v, want %+v", got, want)
	}
	if got := l.State(); !equalState(got, want) {
		t.Errorf("state %+v, want %+v", got, want)
	}
}

// A worker that gets no line holds back no commit: with every line of one
// account (one worker of four busy), the idle workers release fresh marks
// every interval, and the lines are committed once the busy worker saved
// them.
func TestAWorkerWithNoLinesHoldsBackNoCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lines := make([]string, 10)
		for i := range lines {
			lines[i] = "acct-0," + strconv.Itoa(i+1)
		}
		r := startBatchRun(t, 4, "1000", 100*time.Millisecond, lines)
		r.publish(t, 10)
		testutil.Advance(100 * time.Millisecond) // the bubble's clock: the interval passes
		if c := r.committed(t); c != 10 {
			t.Errorf("committed %d, want 10", c)
		}
		r.stop(t)
	})
}

// A batched save that keeps failing (a directory took the state file's
// place) is tried SaveTries times, one interval apart, then reported
// (core.Checkpoint.Fail): the engine's group fails, Engine.Err naming
// the state file (an *apps.StateError), where the run used to wait forever
// for a commit that could not come; nothing the saved state does not hold
// is committed, not even by Stop, which returns the error too. On several
// workers, one worker's failing file fails the group.
func TestALedgerWhoseStateCannotBeSavedFailsItsGroupAfterItsTries(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const interval = 100 * time.Millisecond
				lines := ledgerLines(10)
				r := startBatchRun(t, workers, "1000", interval, lines)
				r.publish(t, 4)
				testutil.Advance(interval) // the bubble's clock: the interval's save
				if c := r.committed(t); c != 4 {
					t.Fatalf("committed %d before the fault, want 4", c)
				}
				path := r.breakWorker0State(t)
				r.publish(t, 4)
				for try := 1; try < apps.SaveTries; try++ {
					testutil.Advance(interval)
					if err := r.e.Err(); err != nil {
						t.Fatalf("the group failed after %d tries, want %d: %v", try, apps.SaveTries, err)
					}
				}
				testutil.Advance(interval)
				err := r.e.Err()
				var se *apps.StateError
				if !errors.Is(err, engine.ErrNotDurable) || !errors.As(err, &se) || se.Path != path || se.Tries != apps.SaveTries {
					t.Fatalf("Err after %d failed saves: %v; want an engine.ErrNotDurable wrapping an *apps.StateError of %s, %d tries", apps.SaveTries, err, path, apps.SaveTries)
				}
				if c := r.committed(t); c != 4 {
					t.Errorf("committed %d after the failed saves, want 4: what the state holds", c)
				}
				if err := r.e.Stop(context.Background()); !errors.Is(err, engine.ErrNotDurable) || !errors.Is(err, apps.ErrStateNotSaved) {
					t.Errorf("Stop: %v, want the failed group and the last save's error", err)
				}
				if c, problems := r.check.result(); c != 4 || len(problems) > 0 {
					t.Errorf("after Stop: committed %d, want 4; commits ahead of the saved state: %v", c, problems)
				}
			})
		})
	}
}

// A save that fails once (a directory in the state file's place for one
// try) is tried again at the next interval: once the fault is gone the
// state holds every line and the commit reaches it, nothing is reported,
// and the deliveries completed meanwhile do not fail (a save's failure is
// not theirs: the run stays lossless).
func TestALedgerSaveThatFailsOnceIsTriedAgainAndNoDeliveryFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		r := startBatchRun(t, 1, "1000", interval, ledgerLines(10))
		path := r.check.paths[0]
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		r.publish(t, 4)
		testutil.Advance(interval) // the first save fails
		if c := r.committed(t); c != 0 {
			t.Fatalf("committed %d with no save made, want 0", c)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		r.publish(t, 4) // their completions run after the failed save
		testutil.Advance(interval)
		if c, got := r.committed(t), savedOffset(t, path); c != 8 || got != 8 {
			t.Errorf("after the fault: committed %d, saved offset %d; want 8, 8", c, got)
		}
		fs := r.e.Status().Feeds[0]
		if err := r.e.Err(); err != nil || fs.CompletionFailures != 0 || !fs.Lossless {
			t.Errorf("Err %v, completion failures %d, lossless %v; want nil, 0, true", err, fs.CompletionFailures, fs.Lossless)
		}
		r.stop(t)
	})
}

// A ledger saving every line (SaveEvery 1: the save is in each delivery's
// completion, the hold released) whose save keeps failing tries it
// SaveTries times, one interval apart, then fails its group
// (core.Checkpoint.Fail with an *apps.StateError naming the file): the
// delivery does not count, so nothing the state file lacks is committed,
// not even by Stop. Its completion used to return the save's error to the
// engine, which skipped it after its retries and committed the line: a
// restart from the state file never applied it, and said lossless (torture
// seed 1796193496913655314, the statedir fault).
func TestALedgerSavingEveryLineWhoseSaveKeepsFailingFailsItsGroupAndCommitsNothingTheStateLacks(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const interval = 100 * time.Millisecond
				r := startBatchRun(t, workers, "1", interval, ledgerLines(10))
				r.publish(t, 4)
				if c := r.committed(t); c != 4 {
					t.Fatalf("committed %d before the fault, want 4", c)
				}
				path := r.breakWorker0State(t)
				r.publish(t, 4)
				for try := 1; try < apps.SaveTries; try++ {
					if err := r.e.Err(); err != nil {
						t.Fatalf("the group failed after %d tries, want %d: %v", try, apps.SaveTries, err)
					}
					testutil.Advance(interval) // the bubble's clock: the next try
				}
				err := r.e.Err()
				var se *apps.StateError
				if !errors.Is(err, engine.ErrNotDurable) || !errors.As(err, &se) || se.Path != path || se.Tries != apps.SaveTries {
					t.Fatalf("Err after %d failed saves: %v; want an engine.ErrNotDurable wrapping an *apps.StateError of %s, %d tries", apps.SaveTries, err, path, apps.SaveTries)
				}
				c := r.committed(t)
				if workers == 1 && c != 4 {
					t.Errorf("committed %d after the failed saves, want 4: what the state holds", c)
				}
				if err := r.e.Stop(context.Background()); !errors.Is(err, engine.ErrNotDurable) || !errors.Is(err, apps.ErrStateNotSaved) {
					t.Errorf("Stop: %v, want the failed group and the last save's error", err)
				}
				if after, problems := r.check.result(); after != c || len(problems) > 0 {
					t.Errorf("after Stop: committed %d, want %d; commits ahead of the saved state: %v", after, c, problems)
				}
				if fs := r.e.Status().Feeds[0]; fs.CompletionFailures != 0 || fs.Lossless {
					t.Errorf("completion failures %d, lossless %v; want 0 (none skipped), false (the group failed)", fs.CompletionFailures, fs.Lossless)
				}
			})
		})
	}
}

// A ledger saving every line whose save fails once (a directory in the
// state file's place for one try) tries it again an interval later: once
// the fault is gone the state holds the line and it is committed, nothing
// is reported, and no completion fails (the run stays lossless).
func TestALedgerSavingEveryLineTriesAFailedSaveAgainAndNoDeliveryFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		r := startBatchRun(t, 1, "1", interval, ledgerLines(10))
		path := r.check.paths[0]
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		r.publish(t, 1) // its save fails: the next try is an interval later
		if c := r.committed(t); c != 0 {
			t.Fatalf("committed %d with no save made, want 0", c)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		testutil.Advance(interval)
		r.publish(t, 3)
		if c, got := r.committed(t), savedOffset(t, path); c != 4 || got != 4 {
			t.Errorf("after the fault: committed %d, saved offset %d; want 4, 4", c, got)
		}
		fs := r.e.Status().Feeds[0]
		if err := r.e.Err(); err != nil || fs.CompletionFailures != 0 || !fs.Lossless {
			t.Errorf("Err %v, completion failures %d, lossless %v; want nil, 0, true", err, fs.CompletionFailures, fs.Lossless)
		}
		r.stop(t)
	})
}
