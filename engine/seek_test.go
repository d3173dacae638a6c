package engine_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// seekRig is a feed "in" of two groups: g, gated, and h, open; g processed
// 1 to done of items 1-10 (h all of them) and is fenced. A positioned feed
// (a committer): it pauses while g is fenced.
type seekRig struct {
	e    *engine.Engine
	f    *engine.Feed
	c    *committer
	log  *journalLog
	gate *turnstile
}

func newSeekRig(t *testing.T, done int) *seekRig {
	t.Helper()
	r := &seekRig{log: &journalLog{}, gate: newTurnstile(false)}
	r.e = start(t, engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 32}},
		Groups: []engine.GroupConfig{
			{Name: "g", Feeds: []string{"in"}, Processors: procs("g", r.gate)},
			{Name: "h", Feeds: []string{"in"}, Processors: procs("h", newTurnstile(true))}},
		Observer: events(r.log)})
	t.Cleanup(r.gate.openUp)
	r.f = r.e.Feed("in")
	r.c = &committer{}
	r.f.Intake().SetCommitter(r.c)
	r.gate.let(done - 1)
	publish(t, r.f, 1, 10)
	synctest.Wait() // g processed 1 to done-1 and waits in done (or took all)
	if err := r.e.Fence("g"); err != nil {
		t.Fatal(err)
	}
	r.gate.let(1) // done completes; fenced, g takes nothing more
	synctest.Wait()
	return r
}

// gen is g's live queue's generation.
func (r *seekRig) gen(t *testing.T) int64 {
	t.Helper()
	return queueOf(t, r.f.Status(), "g", false).Generation
}

// gEvents is what g's processors and streams were told, in order.
func (r *seekRig) gEvents() []string {
	var out []string
	for _, ev := range r.log.all() {
		if strings.HasPrefix(ev, "g:") {
			out = append(out, ev)
		}
	}
	return out
}

// seekState is what a seek may change, as the status and the committer
// show it.
type seekState struct {
	Queues              string // g's queues: generation, removed
	Released, Committed int64
	Lossless            bool
	GEvents             int
}

func (r *seekRig) state(t *testing.T) seekState {
	t.Helper()
	st := r.f.Status()
	var queues []string
	for _, s := range st.Subscribers {
		if strings.HasPrefix(s.Queue, "g/") {
			queues = append(queues, fmt.Sprintf("%d %v", s.Generation, s.Removed))
		}
	}
	return seekState{Queues: strings.Join(queues, ", "), Released: st.Released,
		Committed: committedAfterPoll(t, r.f, r.c), Lossless: st.Lossless, GEvents: len(r.gEvents())}
}

// A seek is a compare-and-swap on the generation of the group's live
// queue, and refused unless the move is one the engine can make: a stale
// generation (spent by an earlier seek, naming no queue, a removed
// queue's), a group not fenced, a backwards seek, a target within what
// the queue holds or past the feed's last sequence, an unknown name: each
// is refused with its error, dry run or not, and changes nothing.
func TestASeekWithAStaleGenerationIsRefusedAndChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup runs before the reading of the state; it returns the
		// generation the seek names (gen: g's live queue's now).
		setup func(t *testing.T, r *seekRig, gen int64) int64
		done  int // g processed 1 to done before it was fenced; 0: 6
		group string
		to    engine.SeekTarget
		want  error
	}{
		{"a generation an earlier seek spent", func(t *testing.T, r *seekRig, gen int64) int64 {
			if _, err := r.e.Seek("in", "g", gen, engine.SeekTarget{Latest: true}, engine.SeekOptions{Reason: "first operator"}); err != nil {
				t.Fatal(err)
			}
			return gen
		}, 0, "g", engine.SeekTarget{Latest: true}, engine.ErrGeneration},
		{"a generation naming no queue", func(_ *testing.T, _ *seekRig, gen int64) int64 { return gen + 1000 }, 0, "g",
			engine.SeekTarget{Latest: true}, engine.ErrGeneration},
		{"another group's generation", func(t *testing.T, r *seekRig, _ int64) int64 {
			return queueOf(t, r.f.Status(), "h", false).Generation
		}, 0, "g", engine.SeekTarget{Latest: true}, engine.ErrGeneration},
		{"a removed queue's generation", func(t *testing.T, r *seekRig, gen int64) int64 {
			if err := r.e.Unsubscribe("g", "in"); err != nil {
				t.Fatal(err)
			}
			return gen
		}, 0, "g", engine.SeekTarget{Latest: true}, engine.ErrGeneration},
		{"a group not fenced", func(t *testing.T, r *seekRig, gen int64) int64 {
			if err := r.e.Unfence("g"); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // g takes 7 and waits in it
			return gen
		}, 0, "g", engine.SeekTarget{Latest: true}, engine.ErrNotFenced},
		{"backwards", nil, 0, "g", engine.SeekTarget{Seq: 5}, engine.ErrSeekUnsupported},
		{"backwards from a queue that holds nothing", nil, 10, "g", engine.SeekTarget{Seq: 5}, engine.ErrSeekUnsupported},
		{"within what the queue holds", nil, 0, "g", engine.SeekTarget{Seq: 8}, engine.ErrSeekUnsupported},
		{"to the group's position while the queue holds items", nil, 0, "g", engine.SeekTarget{Seq: 6}, engine.ErrSeekUnsupported},
		{"past the feed's last sequence", nil, 0, "g", engine.SeekTarget{Seq: 11}, engine.ErrSeekUnsupported},
		{"an unknown group", nil, 0, "nobody", engine.SeekTarget{Latest: true}, engine.ErrUnknown},
	} {
		for _, dry := range []bool{true, false} {
			name := tc.name
			if dry {
				name += ", dry run"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := newSeekRig(t, cmp.Or(tc.done, 6))
					gen := r.gen(t)
					if tc.setup != nil {
						gen = tc.setup(t, r, gen)
					}
					synctest.Wait()
					before := r.state(t)
					plan, err := r.e.Seek("in", tc.group, gen, tc.to, engine.SeekOptions{DryRun: dry, Reason: "second operator"})
					if !errors.Is(err, tc.want) {
						t.Fatalf("Seek: got %v (plan %+v), want %v", err, plan, tc.want)
					}
					if plan != (engine.SeekPlan{}) {
						t.Errorf("plan %+v with the refusal: want none", plan)
					}
					synctest.Wait()
					if after := r.state(t); after != before {
						t.Errorf("state after the refused seek\n%+v\nwant it unchanged\n%+v", after, before)
					}
				})
			})
		}
	}
}

// A dry run returns the plan and changes nothing (the generation, the
// released count, the commit, what the group was told); the real seek
// then does what the plan said: its plan is the dry run's, with the
// replacement queue's generation.
func TestADryRunChangesNothingAndItsPlanIsWhatTheSeekDoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		done int // g processed 1 to done
		to   engine.SeekTarget
		want engine.SeekPlan // without Generation and Replacement
	}{
		{"latest, over what the queue holds", 6, engine.SeekTarget{Latest: true},
			engine.SeekPlan{Feed: "in", Group: "g", Before: 6, After: 10, Done: 6, Loss: true, Unprocessed: 4, FirstSeq: 7, LastSeq: 10, Reason: "bad batch"}},
		{"to the last item the queue holds", 6, engine.SeekTarget{Seq: 10},
			engine.SeekPlan{Feed: "in", Group: "g", Before: 6, After: 10, Done: 6, Loss: true, Unprocessed: 4, FirstSeq: 7, LastSeq: 10, Reason: "bad batch"}},
		{"one item held", 9, engine.SeekTarget{Latest: true},
			engine.SeekPlan{Feed: "in", Group: "g", Before: 9, After: 10, Done: 9, Loss: true, Unprocessed: 1, FirstSeq: 10, LastSeq: 10, Reason: "bad batch"}},
		{"nothing held: no move, a new generation", 10, engine.SeekTarget{Seq: 10},
			engine.SeekPlan{Feed: "in", Group: "g", Before: 10, After: 10, Done: 10, Reason: "bad batch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newSeekRig(t, tc.done)
				gen := r.gen(t)
				before := r.state(t)
				dry, err := r.e.Seek("in", "g", gen, tc.to, engine.SeekOptions{DryRun: true, Reason: "bad batch"})
				if err != nil {
					t.Fatalf("dry run: %v", err)
				}
				synctest.Wait()
				if after := r.state(t); after != before {
					t.Errorf("state after the dry run\n%+v\nwant it unchanged\n%+v", after, before)
				}
				want := tc.want
				want.Generation, want.DryRun = gen, true
				if dry != want {
					t.Errorf("dry run's plan\n%+v\nwant\n%+v", dry, want)
				}
				real, err := r.e.Seek("in", "g", gen, tc.to, engine.SeekOptions{Reason: "bad batch"})
				if err != nil {
					t.Fatalf("seek: %v", err)
				}
				if real.Replacement == 0 || real.Replacement == gen || real.Replacement != r.gen(t) {
					t.Errorf("replacement %d: want a new generation, the live queue's (%d)", real.Replacement, r.gen(t))
				}
				dry.DryRun, dry.Replacement = false, real.Replacement
				if real != dry {
					t.Errorf("the seek's plan\n%+v\nwant the dry run's\n%+v", real, dry)
				}
			})
		})
	}
}

// A forward seek skips what the queue holds as a recorded loss of the
// group: one DROPPED per run of skipped seqs with the operator's reason
// (before the next item the group takes), counted as released (the feed
// is not lossless), and the commit moves past them at once; after Resume
// the group goes on with the next item published.
func TestAForwardSeekRecordsTheSkippedItemsAsALossAndTheCommitMovesPastThem(t *testing.T) {
	type outcome struct {
		CommittedBefore, CommittedAfter, Released int64
		Lossless                                  bool
	}
	for _, tc := range []struct {
		name string
		to   engine.SeekTarget
	}{
		{"latest", engine.SeekTarget{Latest: true}},
		{"to seq 10", engine.SeekTarget{Seq: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newSeekRig(t, 6)
				var got outcome
				got.CommittedBefore = committedAfterPoll(t, r.f, r.c)
				p, err := r.e.Seek("in", "g", r.gen(t), tc.to, engine.SeekOptions{Reason: "poisoned batch"})
				if err != nil {
					t.Fatal(err)
				}
				got.CommittedAfter = committedAfterPoll(t, r.f, r.c)
				st := r.f.Status()
				got.Released, got.Lossless = st.Released, st.Lossless
				if want := (outcome{CommittedBefore: 6, CommittedAfter: 10, Released: 4}); got != want {
					t.Errorf("got  %+v\nwant %+v", got, want)
				}
				if err := r.e.Resume("in", "g", p.Replacement); err != nil {
					t.Fatal(err)
				}
				r.gate.openUp()
				publish(t, r.f, 11, 11)
				synctest.Wait()
				want := []string{"g: 1", "g: 2", "g: 3", "g: 4", "g: 5", "g: 6",
					"g: dropped 4 seqs 7-10 at 10: " + engine.SkippedReason + "poisoned batch", "g: 11"}
				if got := r.gEvents(); !slices.Equal(got, want) {
					t.Errorf("g's events\n%q\nwant\n%q", got, want)
				}
				if got := committedAfterPoll(t, r.f, r.c); got != 11 {
					t.Errorf("committed %d after the resume, want 11", got)
				}
			})
		})
	}
}

// A seek replaces the queue by one of a new generation: the completion of
// an item being handled at the seek is refused and counted (staleTokens;
// the item counts once, as skipped), and so is every later seek, release
// or resume naming the old generation.
func TestOldTokensAfterASeekAreRefused(t *testing.T) {
	type outcome struct {
		Unprocessed, Processed int64
		Stale, Committed       int64
	}
	for _, tc := range []struct {
		name    string
		workers int
		want    outcome
	}{
		{"one worker", 1, outcome{Unprocessed: 3, Stale: 1, Committed: 5}},
		{"two workers", 2, outcome{Unprocessed: 1, Processed: 2, Stale: 1, Committed: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, f, c, h, gen := heldAtThree(t, tc.workers)
				if err := e.Fence("g"); err != nil {
					t.Fatal(err)
				}
				dry, err := e.Seek("in", "g", gen, engine.SeekTarget{Latest: true}, engine.SeekOptions{DryRun: true, Reason: "skip"})
				if err != nil {
					t.Fatal(err)
				}
				p, err := e.Seek("in", "g", gen, engine.SeekTarget{Latest: true}, engine.SeekOptions{Reason: "skip"})
				if err != nil {
					t.Fatal(err)
				}
				if dry.DryRun, dry.Replacement = false, p.Replacement; dry != p {
					t.Errorf("the seek's plan\n%+v\nwant the dry run's\n%+v", p, dry)
				}
				h.release(3)
				synctest.Wait() // item 3 completes, after the seek
				got := outcome{Unprocessed: p.Unprocessed, Processed: p.Processed,
					Stale: e.Status().Groups[0].StaleTokens, Committed: committedAfterPoll(t, f, c)}
				if got != tc.want {
					t.Errorf("got  %+v\nwant %+v", got, tc.want)
				}
				for what, err := range map[string]error{
					"seek": func() error {
						_, err := e.Seek("in", "g", gen, engine.SeekTarget{Latest: true}, engine.SeekOptions{})
						return err
					}(),
					"release": func() error { _, err := e.Release("in", "g", gen, "again"); return err }(),
					"resume":  e.Resume("in", "g", gen),
				} {
					if !errors.Is(err, engine.ErrGeneration) {
						t.Errorf("%s naming the old generation: %v, want ErrGeneration", what, err)
					}
				}
			})
		})
	}
}

// After a seek the group stays fenced: a positioned feed takes nothing
// for it and it is given nothing until an explicit Resume naming the new
// generation (a Resume naming the old one is refused and resumes
// nothing).
func TestNoDeliveryUntilResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSeekRig(t, 6)
		old := r.gen(t)
		p, err := r.e.Seek("in", "g", old, engine.SeekTarget{Latest: true}, engine.SeekOptions{Reason: "skip"})
		if err != nil {
			t.Fatal(err)
		}
		r.gate.openUp()
		synctest.Wait()
		if r.f.Intake().TryPublish(11, core.Position{Offset: 11}) {
			t.Fatal("item 11 taken after the seek, before a resume: want the feed paused")
		}
		if err := r.e.Resume("in", "g", old); !errors.Is(err, engine.ErrGeneration) {
			t.Fatalf("Resume naming the old generation: %v, want ErrGeneration", err)
		}
		synctest.Wait()
		if r.f.Intake().TryPublish(11, core.Position{Offset: 11}) {
			t.Fatal("item 11 taken after a refused resume: want the feed paused")
		}
		before := len(r.gEvents())
		if err := r.e.Resume("in", "g", p.Replacement); err != nil {
			t.Fatal(err)
		}
		publish(t, r.f, 11, 12)
		synctest.Wait()
		if got, want := r.gEvents()[before:], []string{"g: 11", "g: 12"}; !slices.Equal(got, want) {
			t.Errorf("g's events after the resume %q, want %q", got, want)
		}
	})
}
