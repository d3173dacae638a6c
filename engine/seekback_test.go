package engine_test

import (
	"strconv"

	"context"
	"errors"
	"github.com/blackbox-audit/blackbox/core"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
)

// backRig is a log of items 1-10 read by a GroupSource into feed "in"
// (honouring per-group progress) of the groups fast and slow (holdBack
// processors, slow holding back its items held), run in a synctest
// bubble: the source polls on the bubble's clock (tick advances it).
type backRig struct {
	log        *memsource.Log
	fast, slow *holdBack
	e          *engine.Engine
	f          *engine.Feed
	held       []any // slow's items still held back
}

// release lets slow handle held item it.
func (r *backRig) release(it any) {
	r.held = slices.DeleteFunc(r.held, func(x any) bool { return x == it })
	r.slow.release(it)
}

func newBackRig(t *testing.T, slowHeld ...any) *backRig {
	t.Helper()
	r := &backRig{log: memsource.NewLog(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), fast: newHoldBack(), slow: newHoldBack(slowHeld...),
		held: slowHeld}
	r.log.Close()
	e, err := engine.New(twoGroups(r.log.GroupSource(), r.fast, r.slow))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.e, r.f = e, e.Feed("in")
	t.Cleanup(func() {
		for _, it := range slices.Clone(r.held) {
			r.release(it)
		}
		_ = e.Stop(context.Background())
	})
	r.tick()
	return r
}

// tick lets the source poll and publish (its duty cycle, on the bubble's
// clock), then waits for the groups to be done with what they can take.
func (r *backRig) tick() {
	time.Sleep(time.Millisecond)
	synctest.Wait()
}

// gen is the generation of group's live queue.
func (r *backRig) gen(t *testing.T, group string) int64 {
	t.Helper()
	return queueOf(t, r.f.Status(), group, false).Generation
}

// fenceAndSeek fences group and seeks it to seq (a dry run first, which
// must plan what the seek does).
func (r *backRig) fenceAndSeek(t *testing.T, group string, seq int64) engine.SeekPlan {
	t.Helper()
	if err := r.e.Fence(group); err != nil {
		t.Fatal(err)
	}
	gen := r.gen(t, group)
	dry, err := r.e.Seek("in", group, gen, engine.SeekTarget{Seq: seq}, engine.SeekOptions{DryRun: true, Reason: "replay"})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	p, err := r.e.Seek("in", group, gen, engine.SeekTarget{Seq: seq}, engine.SeekOptions{Reason: "replay"})
	if err != nil {
		t.Fatalf("seek: %v", err)
	}
	dry.Replacement, dry.DryRun = p.Replacement, false
	if dry != p {
		t.Fatalf("the dry run planned %+v, the seek did %+v", dry, p)
	}
	return p
}

// TestABackwardsSeekReDeliversTheRangeToThatGroupOnly (Seek, backwards):
// after a seek back to seq 4 and an explicit resume, the source reads
// items 5-10 again and the feed hands them to the sought group only,
// under new seqs; the other group is handed nothing again (its COMPLETED
// marks), nothing is lost, and the feed's commit ends where it was.
func TestABackwardsSeekReDeliversTheRangeToThatGroupOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBackRig(t)
		all := []any{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		if got := r.fast.seen(); !slices.Equal(got, all) {
			t.Fatalf("fast handled %v before the seek, want %v", got, all)
		}
		p := r.fenceAndSeek(t, "fast", 4)
		want := engine.SeekPlan{Feed: "in", Group: "fast", Generation: p.Generation, Replacement: p.Replacement,
			Before: 10, After: 4, Done: 10, Redelivery: true, FirstSeq: 5, LastSeq: 10, Redelivered: 6, Reason: "replay"}
		if p != want || p.Replacement == 0 {
			t.Fatalf("plan %+v, want %+v", p, want)
		}
		if err := r.e.Resume("in", "fast", p.Replacement); err != nil {
			t.Fatal(err)
		}
		r.tick()
		r.tick()
		if got, want := r.fast.seen(), append(slices.Clone(all), 5, 6, 7, 8, 9, 10); !slices.Equal(got, want) {
			t.Fatalf("fast handled %v, want %v", got, want)
		}
		if got := r.slow.seen(); !slices.Equal(got, all) {
			t.Fatalf("slow handled %v, want %v (once each)", got, all)
		}
		st := r.f.Status()
		if got := subscriber(t, st, "slow/in").AlreadyCompleted; got != 6 {
			t.Fatalf("slow's alreadyCompleted %d, want 6 (the items read again, not handed to it)", got)
		}
		if st.Released != 0 || st.Sequence != 16 {
			t.Fatalf("released %d, seq %d: want 0, 16 (six items under new seqs)", st.Released, st.Sequence)
		}
		if c, f, s := r.log.Committed(), r.log.Completed("fast"), r.log.Completed("slow"); c != 10 || f != 10 || s != 10 {
			t.Fatalf("committed %d, fast's progress %d, slow's %d: want 10, 10, 10", c, f, s)
		}
	})
}

// TestTheMoveBackIsDurableBeforeAnyReDelivery (Seek, backwards): the
// source lowers its commit to the target, keeping the other group's
// progress, before the feed takes any item again, and nothing is handed
// until an explicit resume; a restart then (a kill after the seek) hands
// the sought group every item after the target and the other nothing.
func TestTheMoveBackIsDurableBeforeAnyReDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBackRig(t)
		r.fenceAndSeek(t, "fast", 4)
		r.tick() // the source applies the rewind; fast is fenced: nothing handed
		if c, f, s := r.log.Committed(), r.log.Completed("fast"), r.log.Completed("slow"); c != 4 || f != 4 || s != 10 {
			t.Fatalf("after the seek: committed %d, fast's progress %d, slow's %d: want 4, 4, 10", c, f, s)
		}
		if got := len(r.fast.seen()); got != 10 {
			t.Fatalf("fast handled %d items before the resume, want 10", got)
		}
		if err := r.e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		fast2, slow2 := newHoldBack(), newHoldBack()
		e2, err := engine.New(twoGroups(r.log.GroupSource(), fast2, slow2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e2.RunSettled(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := fast2.seen(), []any{5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
			t.Fatalf("the restart handed fast %v, want %v", got, want)
		}
		if got := slow2.seen(); len(got) != 0 {
			t.Fatalf("the restart handed slow %v, want nothing", got)
		}
	})
}

// TestABackwardsSeekWithASlowerGroupKeepsItsItems (Seek, backwards): a
// move back past the commit of a slower group (slow holds item 3) lowers
// nothing below the commit: slow still gets 3-10 once, fast 6-10 again.
func TestABackwardsSeekWithASlowerGroupKeepsItsItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBackRig(t, 3)
		p := r.fenceAndSeek(t, "fast", 5)
		if err := r.e.Resume("in", "fast", p.Replacement); err != nil {
			t.Fatal(err)
		}
		r.tick()
		if c := r.log.Committed(); c != 2 {
			t.Fatalf("committed %d while slow holds 3, want 2", c)
		}
		r.release(3)
		r.tick()
		r.tick()
		if got, want := r.fast.seen(), []any{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
			t.Fatalf("fast handled %v, want %v", got, want)
		}
		if got, want := r.slow.seen(), []any{1, 2, 4, 5, 6, 7, 8, 9, 10, 3}; !slices.Equal(sorted(got), sorted(want)) || len(got) != len(want) {
			t.Fatalf("slow handled %v, want each of 1-10 once", got)
		}
		if c := r.log.Committed(); c != 10 {
			t.Fatalf("committed %d at the end, want 10", c)
		}
	})
}

// TestABackwardsSeekTheSourceCannotServeIsRefusedAndChangesNothing (Seek,
// backwards): refused with ErrSeekUnsupported, the generation still live
// and nothing handed: a source that is no Rewinder, a queue holding an
// item its group has not completed, a target whose position the feed does
// not know (seq 0), a second move back before the source applied the
// first.
func TestABackwardsSeekTheSourceCannotServeIsRefusedAndChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) error
	}{
		{"no rewinder", func(t *testing.T) error {
			r := newSeekRig(t, 10) // a committer of the test's: no Rewinder
			_, err := r.e.Seek("in", "g", r.gen(t), engine.SeekTarget{Seq: 4}, engine.SeekOptions{Reason: "x"})
			if got := r.gen(t); err == nil && got == 0 {
				t.Fatal("no queue")
			}
			return err
		}},
		{"unprocessed held", func(t *testing.T) error {
			r := newBackRig(t, 7)
			if err := r.e.Fence("slow"); err != nil {
				t.Fatal(err)
			}
			gen := r.gen(t, "slow")
			_, err := r.e.Seek("in", "slow", gen, engine.SeekTarget{Seq: 2}, engine.SeekOptions{Reason: "x"})
			if r.gen(t, "slow") != gen {
				t.Fatal("the refused seek replaced the queue")
			}
			return err
		}},
		{"position unknown", func(t *testing.T) error {
			r := newBackRig(t)
			if err := r.e.Fence("fast"); err != nil {
				t.Fatal(err)
			}
			_, err := r.e.Seek("in", "fast", r.gen(t, "fast"), engine.SeekTarget{Seq: 0}, engine.SeekOptions{Reason: "x"})
			return err
		}},
		{"pending", func(t *testing.T) error {
			r := newBackRig(t)
			r.fenceAndSeek(t, "fast", 4) // not applied: no tick
			if err := r.e.Fence("slow"); err != nil {
				t.Fatal(err)
			}
			_, err := r.e.Seek("in", "slow", r.gen(t, "slow"), engine.SeekTarget{Seq: 3}, engine.SeekOptions{Reason: "x"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if err := tc.run(t); !errors.Is(err, engine.ErrSeekUnsupported) {
					t.Fatalf("got %v, want ErrSeekUnsupported", err)
				}
			})
		})
	}
}

// TestOldTokensAndGenerationsAfterABackwardsSeekAreRefused (Seek,
// backwards): the seek spends the generation: a resume, release or seek
// naming the old one is refused (ErrGeneration) and resumes nothing.
func TestOldTokensAndGenerationsAfterABackwardsSeekAreRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBackRig(t)
		p := r.fenceAndSeek(t, "fast", 4)
		if err := r.e.Resume("in", "fast", p.Generation); !errors.Is(err, engine.ErrGeneration) {
			t.Fatalf("resume of the old generation: %v, want ErrGeneration", err)
		}
		if _, err := r.e.Seek("in", "fast", p.Generation, engine.SeekTarget{Seq: 2}, engine.SeekOptions{Reason: "x"}); !errors.Is(err, engine.ErrGeneration) {
			t.Fatalf("seek of the old generation: %v, want ErrGeneration", err)
		}
		r.tick()
		if got := len(r.fast.seen()); got != 10 {
			t.Fatalf("fast handled %d items, want 10 (still fenced)", got)
		}
	})
}

// rewinder is the tests' committer that is also a Rewinder (it never
// rewinds): what a feed whose source can move back costs at each poll.
type rewinder struct{ committer }

func (*rewinder) Rewind(engine.Rewind) (core.Position, error) { return core.Position{}, nil }

// BenchmarkTryPublishPauseRewinder is BenchmarkTryPublishPauseCommitted
// (its floor) with a committer that is a Rewinder: the feed keeps the
// positions of the last 4096 acknowledged items for a backwards seek's
// target. Metric: ns/op (one item published and acknowledged).
func BenchmarkTryPublishPauseRewinder(b *testing.B) {
	for _, rw := range []bool{false, true} {
		b.Run("rewinder="+strconv.FormatBool(rw), func(b *testing.B) {
			_, f := benchEngine(b, engine.Pause())
			if rw {
				f.Intake().SetCommitter(&rewinder{})
			} else {
				f.Intake().SetCommitter(&committer{})
			}
			publishPositioned(b, f)
		})
	}
}

// errNoSlot is the refusal of the tests' checkingRewinder.
var errNoSlot = errors.New("test: no slot for the group's progress")

// checkingRewinder is a Rewinder that refuses every backwards seek before
// it is made (RewindChecker) and counts the Rewinds it is asked for.
type checkingRewinder struct {
	committer
	checked, rewinds int
}

func (c *checkingRewinder) CheckRewind(engine.Rewind) error { c.checked++; return errNoSlot }
func (c *checkingRewinder) Rewind(engine.Rewind) (core.Position, error) {
	c.rewinds++
	return core.Position{}, nil
}

// TestABackwardsSeekItsSourceRefusesBeforehandChangesNothing (Seek,
// backwards, RewindChecker): a source that says it could not apply the
// move back refuses it, dry run or not: ErrSeekUnsupported wrapping the
// source's error, the generation still live, no Rewind asked for.
func TestABackwardsSeekItsSourceRefusesBeforehandChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, engine.Config{
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 32}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("g", newTurnstile(true))}}})
		f := e.Feed("in")
		c := &checkingRewinder{}
		f.Intake().SetCommitter(c)
		publish(t, f, 1, 10)
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		if err := e.Fence("g"); err != nil {
			t.Fatal(err)
		}
		gen := queueOf(t, f.Status(), "g", false).Generation
		for _, dry := range []bool{true, false} {
			_, err := e.Seek("in", "g", gen, engine.SeekTarget{Seq: 4}, engine.SeekOptions{DryRun: dry, Reason: "x"})
			if !errors.Is(err, engine.ErrSeekUnsupported) || !errors.Is(err, errNoSlot) {
				t.Fatalf("dry run %t: got %v, want ErrSeekUnsupported wrapping the source's refusal", dry, err)
			}
		}
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		if got := queueOf(t, f.Status(), "g", false).Generation; got != gen {
			t.Fatalf("generation %d after the refusals, want %d (live still)", got, gen)
		}
		if c.checked != 2 || c.rewinds != 0 {
			t.Fatalf("checked %d times, %d rewinds: want 2 and 0", c.checked, c.rewinds)
		}
	})
}
