package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// countingRewinder is a Rewinder that counts its Rewinds (each returns the
// position of item through) and fails them with fail when set.
type countingRewinder struct {
	committer
	mu      sync.Mutex
	rewinds int
	through int64
	fail    error
}

func (c *countingRewinder) Rewind(engine.Rewind) (core.Position, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rewinds++
	if c.fail != nil {
		return core.Position{}, c.fail
	}
	return core.Position{Offset: c.through}, nil
}

func (c *countingRewinder) rewound() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rewinds
}

// actLog is what an Observer's Acted and Dropped hooks saw, in order: the
// actions told, each with the Rewinds the source had made then.
type actLog struct {
	mu      sync.Mutex
	src     *countingRewinder
	acts    []engine.OperatorAction
	order   []string
	rewinds []int // the source's Rewinds when each action was told
	fail    error
	during  func() // if not nil, called by Acted after it logged the action
}

func (l *actLog) observer() engine.Observer {
	return engine.Observer{
		Acted: func(a engine.OperatorAction) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.fail != nil {
				return l.fail
			}
			l.acts = append(l.acts, a)
			l.order = append(l.order, "acted")
			l.rewinds = append(l.rewinds, l.src.rewound())
			if l.during != nil {
				l.during()
			}
			return nil
		},
		Dropped: func(_ string, d engine.Drop) {
			l.mu.Lock()
			l.order = append(l.order, fmt.Sprintf("dropped %d-%d", d.FirstSeq, d.LastSeq))
			l.mu.Unlock()
		},
	}
}

func (l *actLog) snapshot() ([]engine.OperatorAction, []string, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acts), slices.Clone(l.order), slices.Clone(l.rewinds)
}

// actRig is feed "in" of a Rewinder committer (items 1-10 published by
// the test through its Intake, acknowledged by a poll) read by group g,
// whose turnstile lets through the first done items only; the engine's
// observer is an actLog.
type actRig struct {
	e   *engine.Engine
	f   *engine.Feed
	src *countingRewinder
	log *actLog
	ts  *turnstile
}

func newActRig(t *testing.T, done int) *actRig {
	t.Helper()
	return newActRigOf(t, done, 10)
}

// newActRigOf is newActRig of items 1-n.
func newActRigOf(t *testing.T, done, n int) *actRig {
	t.Helper()
	r := &actRig{src: &countingRewinder{through: int64(n)}, ts: newTurnstile(false)}
	r.log = &actLog{src: r.src}
	r.ts.let(done)
	r.e = startAllowing(t, engine.Config{
		Feeds:      []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: max(32, n)}},
		Groups:     []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", r.ts)}},
		Observer:   r.log.observer(),
		TimerClock: core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Second),
	}, errCannotWrite) // a Rewind failed on purpose fails the source
	t.Cleanup(r.ts.openUp)
	r.f = r.e.Feed("in")
	r.f.Intake().SetCommitter(r.src)
	publish(t, r.f, 1, n)
	synctest.Wait()
	if _, err := r.f.Intake().PollAcks(); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Fence("g"); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *actRig) gen(t *testing.T) int64 {
	t.Helper()
	return queueOf(t, r.f.Status(), "g", false).Generation
}

// TestEverySeekIsToldToTheObserverBeforeItTakesEffect (Seek, recorded by
// the engine): a seek that is not a dry run is told to Observer.Acted
// once, with the operator (SeekOptions.Who, DefaultOperator when none),
// the reason (NoReason when none), the instant (SeekOptions.At, else the
// TimerClock) and the group's completed prefix before and after; before
// its effect: a forward seek's Drop comes after it, a backwards seek's
// Rewind is asked after it. A dry run is told nothing.
func TestEverySeekIsToldToTheObserverBeforeItTakesEffect(t *testing.T) {
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, c := range []struct {
		name      string
		done      int // items g completes before the seek
		to        engine.SeekTarget
		opts      engine.SeekOptions
		want      engine.OperatorAction // Seek and At not compared
		wantAt    time.Time             // zero: the TimerClock's
		wantOrder []string
	}{
		{name: "forward over unprocessed items", done: 3, to: engine.SeekTarget{Latest: true},
			opts: engine.SeekOptions{Reason: "poison", Who: "alice", At: at},
			want: engine.OperatorAction{Action: engine.ActionSeek, Feed: "in", Group: "g", Who: "alice", Reason: "poison", Before: 3, After: 10, Unprocessed: 7},
			// item 4 is being handled at the seek: 5-10 are dropped in the queue, 4 by its handler's stale completion
			wantAt: at, wantOrder: []string{"acted", "dropped 4-10"}},
		{name: "forward, nothing held", done: 10, to: engine.SeekTarget{Latest: true},
			opts:      engine.SeekOptions{Reason: "nothing"},
			want:      engine.OperatorAction{Action: engine.ActionSeek, Feed: "in", Group: "g", Who: engine.DefaultOperator, Reason: "nothing", Before: 10, After: 10},
			wantOrder: []string{"acted"}},
		{name: "backwards", done: 10, to: engine.SeekTarget{Seq: 4},
			opts:   engine.SeekOptions{Who: "bob", At: at},
			want:   engine.OperatorAction{Action: engine.ActionSeek, Feed: "in", Group: "g", Who: "bob", Reason: engine.NoReason, Before: 10, After: 4},
			wantAt: at, wantOrder: []string{"acted"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newActRig(t, c.done)
				gen := r.gen(t)
				dry := c.opts
				dry.DryRun = true
				if _, err := r.e.Seek("in", "g", gen, c.to, dry); err != nil {
					t.Fatal(err)
				}
				if acts, _, _ := r.log.snapshot(); len(acts) != 0 {
					t.Fatalf("a dry run told %+v, want nothing", acts)
				}
				p, err := r.e.Seek("in", "g", gen, c.to, c.opts)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.e.Resume("in", "g", p.Replacement); err != nil {
					t.Fatal(err)
				}
				r.ts.openUp() // the item being handled at a forward seek ends: the group reports the Drop
				synctest.Wait()
				if _, err := r.f.Intake().PollAcks(); err != nil {
					t.Fatal(err)
				}
				acts, order, rewinds := r.log.snapshot()
				if len(acts) != 1 {
					t.Fatalf("told %d actions, want 1: %+v", len(acts), acts)
				}
				got := acts[0]
				if c.wantAt.IsZero() && got.At.IsZero() || !c.wantAt.IsZero() && !got.At.Equal(c.wantAt) {
					t.Errorf("at %v, want %v (zero: the TimerClock's)", got.At, c.wantAt)
				}
				if got.Seek.Before != p.Before || got.Seek.After != p.After || got.Seek.Redelivery != p.Redelivery {
					t.Errorf("told the plan %+v, the seek did %+v", got.Seek, p)
				}
				if p.Done != c.want.Before || p.Recorded() != c.want.After {
					t.Errorf("the seek's plan says done %d, recorded %d: want the told positions %d, %d", p.Done, p.Recorded(), c.want.Before, c.want.After)
				}
				got.At, got.Seek = time.Time{}, engine.SeekPlan{}
				if got != c.want {
					t.Errorf("told %+v, want %+v", got, c.want)
				}
				if !slices.Equal(order, c.wantOrder) {
					t.Errorf("hooks %q, want %q", order, c.wantOrder)
				}
				if wantRewinds := map[bool]int{true: 1, false: 0}[p.Redelivery]; rewinds[0] != 0 || r.src.rewound() != wantRewinds {
					t.Errorf("the source's rewinds: %d when told, %d after its poll: want 0, %d", rewinds[0], r.src.rewound(), wantRewinds)
				}
			})
		})
	}
}

// errCannotWrite is the tests' observer failing to record.
var errCannotWrite = errors.New("test: cannot write")

// TestASeekTheObserverCannotRecordIsRefusedAndChangesNothing (Seek,
// recorded by the engine): when Observer.Acted fails, the seek is refused
// (ErrNotRecorded wrapping the observer's error), forward or backwards:
// the generation stays live, nothing is dropped, the source is asked no
// Rewind; once the observer records again, the same seek is done.
func TestASeekTheObserverCannotRecordIsRefusedAndChangesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		done int
		to   engine.SeekTarget
	}{
		{"forward", 3, engine.SeekTarget{Latest: true}},
		{"backwards", 10, engine.SeekTarget{Seq: 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newActRig(t, c.done)
				gen := r.gen(t)
				r.log.mu.Lock()
				r.log.fail = errCannotWrite
				r.log.mu.Unlock()
				_, err := r.e.Seek("in", "g", gen, c.to, engine.SeekOptions{Reason: "x"})
				if !errors.Is(err, engine.ErrNotRecorded) || !errors.Is(err, errCannotWrite) {
					t.Fatalf("got %v, want ErrNotRecorded wrapping the observer's error", err)
				}
				synctest.Wait()
				if _, err := r.f.Intake().PollAcks(); err != nil {
					t.Fatal(err)
				}
				st := r.f.Status()
				if q := queueOf(t, st, "g", false); q.Generation != gen || q.Released != 0 || q.MoveBack != "" {
					t.Fatalf("queue %+v after the refusal: want generation %d live, nothing released, no move back", q, gen)
				}
				if _, order, _ := r.log.snapshot(); len(order) != 0 || r.src.rewound() != 0 {
					t.Fatalf("hooks %q, rewinds %d after the refusal: want none", order, r.src.rewound())
				}
				r.log.mu.Lock()
				r.log.fail = nil
				r.log.mu.Unlock()
				if _, err := r.e.Seek("in", "g", gen, c.to, engine.SeekOptions{Reason: "x"}); err != nil {
					t.Fatalf("the same seek once the observer records: %v", err)
				}
			})
		})
	}
}

// TestAMoveBackIsPendingUntilTheSourceAppliesIt (Seek, backwards): Seek
// returns before the source applied the move back; until its next poll
// the group's live queue says MoveBackPending and the feed is not
// settled (resumed, its queue drained); once applied, neither.
func TestAMoveBackIsPendingUntilTheSourceAppliesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newActRig(t, 10)
		p, err := r.e.Seek("in", "g", r.gen(t), engine.SeekTarget{Seq: 4}, engine.SeekOptions{Reason: "again"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.e.Resume("in", "g", p.Replacement); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		st := r.f.Status()
		if q := queueOf(t, st, "g", false); q.MoveBack != engine.MoveBackPending || st.Settled || r.src.rewound() != 0 {
			t.Fatalf("before the source's poll: moveBack %q, settled %v, rewinds %d: want %q, false, 0", q.MoveBack, st.Settled, r.src.rewound(), engine.MoveBackPending)
		}
		if _, err := r.f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		st = r.f.Status()
		if q := queueOf(t, st, "g", false); q.MoveBack != "" || !st.Settled || r.src.rewound() != 1 {
			t.Fatalf("after it: moveBack %q, settled %v, rewinds %d, stalled %v: want none, true, 1", q.MoveBack, st.Settled, r.src.rewound(), st.Stalled)
		}
	})
}

// TestAMoveBackTheSourceFailsToApplyIsInTheStatus (Seek, backwards): a
// Rewind that fails fails the poll (its error wrapped) and stays in the
// status: the group's queue says MoveBackFailed, the feed is stalled with
// the source's error and not settled.
func TestAMoveBackTheSourceFailsToApplyIsInTheStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newActRig(t, 10)
		r.src.mu.Lock()
		r.src.fail = errCannotWrite
		r.src.mu.Unlock()
		p, err := r.e.Seek("in", "g", r.gen(t), engine.SeekTarget{Seq: 4}, engine.SeekOptions{Reason: "again"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.e.Resume("in", "g", p.Replacement); err != nil {
			t.Fatal(err)
		}
		if _, err := r.f.Intake().PollAcks(); !errors.Is(err, errCannotWrite) {
			t.Fatalf("the poll: %v, want the Rewind's error", err)
		}
		st := r.f.Status()
		q := queueOf(t, st, "g", false)
		want := "the source failed to move group g back to seq 4: " + errCannotWrite.Error()
		if q.MoveBack != engine.MoveBackFailed || st.Stalled == nil || *st.Stalled != want || st.Settled {
			t.Fatalf("moveBack %q, stalled %v, settled %v: want %q, %q, false", q.MoveBack, st.Stalled, st.Settled, engine.MoveBackFailed, want)
		}
	})
}

// TestEveryReleaseIsToldToTheObserverBeforeItTakesEffect (Release,
// recorded by the engine): a release is told to Observer.Acted once, with
// the operator (ReleaseOptions.Who; Release: DefaultOperator), the reason,
// the instant and the queue's completed prefix before and where the
// commit moves after (Released.Before and After), before its effect: its
// Drop comes after it.
func TestEveryReleaseIsToldToTheObserverBeforeItTakesEffect(t *testing.T) {
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, c := range []struct {
		name    string
		release func(e *engine.Engine, gen int64) (engine.Released, error)
		want    engine.OperatorAction // At not compared
	}{
		{"ReleaseWith", func(e *engine.Engine, gen int64) (engine.Released, error) {
			return e.ReleaseWith("in", "g", gen, engine.ReleaseOptions{Reason: "poison", Who: "alice", At: at})
		}, engine.OperatorAction{Action: engine.ActionRelease, Feed: "in", Group: "g", Who: "alice", Reason: "poison", Before: 3, After: 10, Unprocessed: 7}},
		{"Release", func(e *engine.Engine, gen int64) (engine.Released, error) {
			return e.Release("in", "g", gen, "")
		}, engine.OperatorAction{Action: engine.ActionRelease, Feed: "in", Group: "g", Who: engine.DefaultOperator, Reason: engine.NoReason, Before: 3, After: 10, Unprocessed: 7}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newActRig(t, 3)
				rel, err := c.release(r.e, r.gen(t))
				if err != nil {
					t.Fatal(err)
				}
				r.ts.openUp() // the item being handled at the release ends: the group reports the Drop
				synctest.Wait()
				acts, order, _ := r.log.snapshot()
				if len(acts) != 1 {
					t.Fatalf("told %d actions, want 1: %+v", len(acts), acts)
				}
				got := acts[0]
				if got.At.IsZero() || c.name == "ReleaseWith" && !got.At.Equal(at) {
					t.Errorf("at %v, want the options' (%v) or the TimerClock's", got.At, at)
				}
				got.At = time.Time{}
				if got != c.want || rel.Before != got.Before || rel.After != got.After {
					t.Errorf("told %+v (released %+v), want %+v, the release's positions", got, rel, c.want)
				}
				if want := []string{"acted", "dropped 4-10"}; !slices.Equal(order, want) {
					t.Errorf("hooks %q, want %q", order, want)
				}
			})
		})
	}
}

// TestAReleaseTheObserverCannotRecordIsRefusedAndReleasesNothing
// (Release, recorded by the engine): when Observer.Acted fails, the
// release is refused (ErrNotRecorded wrapping the observer's error): the
// generation stays live, nothing is released or dropped; once the
// observer records again, the same release is done.
func TestAReleaseTheObserverCannotRecordIsRefusedAndReleasesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newActRig(t, 3)
		gen := r.gen(t)
		r.log.mu.Lock()
		r.log.fail = errCannotWrite
		r.log.mu.Unlock()
		_, err := r.e.Release("in", "g", gen, "x")
		if !errors.Is(err, engine.ErrNotRecorded) || !errors.Is(err, errCannotWrite) {
			t.Fatalf("got %v, want ErrNotRecorded wrapping the observer's error", err)
		}
		synctest.Wait()
		if q := queueOf(t, r.f.Status(), "g", false); q.Generation != gen || q.Released != 0 {
			t.Fatalf("queue %+v after the refusal: want generation %d live, nothing released", q, gen)
		}
		if _, order, _ := r.log.snapshot(); len(order) != 0 {
			t.Fatalf("hooks %q after the refusal: want none", order)
		}
		r.log.mu.Lock()
		r.log.fail = nil
		r.log.mu.Unlock()
		if rel, err := r.e.Release("in", "g", gen, "x"); err != nil || rel.Unprocessed != 7 {
			t.Fatalf("the same release once the observer records: %+v, %v: want 7 unprocessed items released", rel, err)
		}
	})
}

// TestAReleaseOrSeekOfProcessedItemsIsRecordedAsTheLossTheStatusCounts
// (Release, Seek: issue 27): a release or a forward seek of a queue that
// holds only items its group processed, still holding the commit because
// its processing checkpoint had not made them durable, is told to
// Observer.Acted with what it takes (Processed, no Unprocessed), as the
// status counts it (released, not lossless) and with no Drop (their rows
// stand): the record of the action is the only one of that loss, so it
// must say it.
func TestAReleaseOrSeekOfProcessedItemsIsRecordedAsTheLossTheStatusCounts(t *testing.T) {
	for _, c := range []struct {
		name string
		act  func(e *engine.Engine, gen int64) (unprocessed, processed int64, err error)
	}{
		{"release", func(e *engine.Engine, gen int64) (int64, int64, error) {
			rel, err := e.Release("in", "g", gen, "state lost")
			return rel.Unprocessed, rel.Processed, err
		}},
		{"seek", func(e *engine.Engine, gen int64) (int64, int64, error) {
			p, err := e.Seek("in", "g", gen, engine.SeekTarget{Latest: true}, engine.SeekOptions{Reason: "state lost"})
			return p.Unprocessed, p.Processed, err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &actLog{src: &countingRewinder{}}
				e := start(t, engine.Config{
					Feeds:    []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 8}},
					Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", newTurnstile(true))}},
					Observer: log.observer()})
				f, _, cp := heldFeed(t, e)
				publish(t, f, 1, 3)
				synctest.Wait()
				m3 := cp.Mark()
				publish(t, f, 4, 5) // processed, not durable: they hold the commit
				synctest.Wait()
				if err := cp.DurableThrough(m3); err != nil {
					t.Fatal(err)
				}
				if err := e.Fence("g"); err != nil {
					t.Fatal(err)
				}
				unprocessed, processed, err := c.act(e, queueOf(t, f.Status(), "g", false).Generation)
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				acts, order, _ := log.snapshot()
				if len(acts) != 1 {
					t.Fatalf("told %d actions, want 1: %+v", len(acts), acts)
				}
				type counts struct{ Unprocessed, Processed, Released int64 }
				st := f.Status()
				for _, x := range []struct {
					what      string
					got, want counts
				}{
					{"told Observer.Acted", counts{acts[0].Unprocessed, acts[0].Processed, acts[0].Unprocessed + acts[0].Processed}, counts{0, 2, 2}},
					{"returned", counts{unprocessed, processed, unprocessed + processed}, counts{0, 2, 2}},
					{"the status counted", counts{Released: st.Released}, counts{Released: 2}},
				} {
					if x.got != x.want {
						t.Errorf("%s %+v, want %+v", x.what, x.got, x.want)
					}
				}
				if st.Lossless {
					t.Error("the status says lossless, want not: the operator released what the checkpoint had not made durable")
				}
				if want := []string{"acted"}; !slices.Equal(order, want) {
					t.Errorf("hooks %q, want %q: no Drop of processed items", order, want)
				}
			})
		})
	}
}

// TestAReleaseTakesWhatItsRecordSaid (Release, issue 27): the item being
// handled when a release is recorded, counted unprocessed by the record,
// completes between the record (Observer.Acted) and the release: it is
// released as the record said, unprocessed (a Drop after its rows), so
// that the record, the release's counts, its Drops and the status agree.
func TestAReleaseTakesWhatItsRecordSaid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newActRig(t, 3) // 1-3 processed, 4 being handled, 5-10 queued
		r.log.during = func() {
			r.ts.let(1) // 4 completes while the release is recorded
			synctest.Wait()
		}
		rel, err := r.e.Release("in", "g", r.gen(t), "poison")
		if err != nil {
			t.Fatal(err)
		}
		r.log.during = nil
		synctest.Wait()
		acts, order, _ := r.log.snapshot()
		if len(acts) != 1 {
			t.Fatalf("told %d actions, want 1", len(acts))
		}
		type counts struct{ Unprocessed, Processed, Released int64 }
		told := counts{acts[0].Unprocessed, acts[0].Processed, acts[0].Unprocessed + acts[0].Processed}
		for _, x := range []struct {
			what string
			got  counts
		}{
			{"returned", counts{rel.Unprocessed, rel.Processed, rel.Unprocessed + rel.Processed}},
			{"the status counted", counts{Released: r.f.Status().Released}},
		} {
			want := told
			if x.what == "the status counted" {
				want = counts{Released: told.Released}
			}
			if x.got != want {
				t.Errorf("%s %+v, want what Observer.Acted was told: %+v", x.what, x.got, want)
			}
		}
		if want := (counts{7, 0, 7}); told != want {
			t.Errorf("told %+v, want %+v", told, want)
		}
		if want := []string{"acted", "dropped 4-10"}; !slices.Equal(order, want) {
			t.Errorf("hooks %q, want %q", order, want)
		}
	})
}

// TestASeekNeverRecordsAsDoneAnItemItSkips (Seek, torture seed
// 1796302536346970954): item 4, being handled when a forward seek is
// asked, completes while the seek plans (a goroutine racing it): the
// group's completed prefix the seek records (OperatorAction.Before, the
// CONTROL row's) is read from the same counts as the items it skips, so
// it never says done an item a Drop says skipped. The queue is long (its
// plan reads every item it holds) so that the completion often lands
// within the plan; each round may complete it before, during or after.
func TestASeekNeverRecordsAsDoneAnItemItSkips(t *testing.T) {
	const n = 1 << 15
	for round := range 20 {
		synctest.Test(t, func(t *testing.T) {
			r := newActRigOf(t, 3, n) // 1-3 processed, 4 being handled, 5-n queued
			go r.ts.let(1)
			if _, err := r.e.Seek("in", "g", r.gen(t), engine.SeekTarget{Latest: true}, engine.SeekOptions{Reason: "x"}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			acts, order, _ := r.log.snapshot()
			if len(acts) != 1 {
				t.Fatalf("told %d actions, want 1", len(acts))
			}
			for _, o := range order[1:] {
				var first, last int64
				if _, err := fmt.Sscanf(o, "dropped %d-%d", &first, &last); err != nil {
					t.Fatalf("hook %q: %v", o, err)
				}
				if first <= acts[0].Before {
					t.Fatalf("round %d: the seek recorded the group done through %d and skipped seqs %d-%d", round, acts[0].Before, first, last)
				}
			}
		})
	}
}
