package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"

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

// keyedLog is the tests' re-readable log of several keys (a topic's
// partitions): entries in one order, a key's n-th entry at its offset n;
// the commit and each group's progress kept per key. Safe for concurrent
// use.
type keyedLog struct {
	mu        sync.Mutex
	entries   []keyedEntry
	committed map[string]int64
	groups    map[string]map[string]int64 // group, key: offset completed
}

type keyedEntry struct {
	key  string
	off  int64
	item string
}

// newKeyedLog holds items named key then offset ("a1", "b1", "a2" ...).
func newKeyedLog(items ...string) *keyedLog {
	l := &keyedLog{committed: map[string]int64{}, groups: map[string]map[string]int64{}}
	n := map[string]int64{}
	for _, it := range items {
		k := it[:1]
		n[k]++
		l.entries = append(l.entries, keyedEntry{k, n[k], it})
	}
	return l
}

// state is the commit and each group's progress of each key, as
// "k=committed g=progress ...", keys and groups in order.
func (l *keyedLog) state() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l.committed)) {
		fmt.Fprintf(&b, "%s=%d", k, l.committed[k])
		for _, g := range slices.Sorted(maps.Keys(l.groups)) {
			fmt.Fprintf(&b, " %s=%d", g, l.groups[g][k])
		}
		b.WriteString("; ")
	}
	return b.String()
}

// keyedSource reads a keyedLog from each key's commit, telling the feed
// each group's progress (Intake.SkipCompleted); its committer is a
// GroupCommitter and a Rewinder moving one key back per Rewind. Used by
// one engine at a time: everything but the log is the Run goroutine's.
type keyedSource struct {
	log      *keyedLog
	read     map[string]int64 // per key, the offset published up to
	scan     int              // the first entry not looked at
	pending  map[string]int64
	gpending map[string]map[string]int64
}

func (l *keyedLog) source() *keyedSource {
	return &keyedSource{log: l, read: map[string]int64{}, pending: map[string]int64{}, gpending: map[string]map[string]int64{}}
}

func (s *keyedSource) Run(ctx context.Context, in *engine.Intake) error {
	l := s.log
	l.mu.Lock()
	in.SetEpoch(1)
	maps.Copy(s.read, l.committed)
	maps.Copy(s.pending, l.committed)
	for g, ks := range l.groups {
		for k, off := range ks {
			if off > l.committed[k] {
				in.SkipCompleted(g, 1, core.Position{Key: k, Offset: off})
			}
		}
	}
	l.mu.Unlock()
	in.SetCommitter(keyedCommitter{s})
	t := time.NewTicker(200 * time.Microsecond)
	defer t.Stop()
	for {
		if _, err := in.PollAcks(); err != nil {
			return err
		}
		for s.scan < len(l.entries) {
			e := l.entries[s.scan]
			if e.off > s.read[e.key] {
				if !in.TryPublish(e.item, core.Position{Key: e.key, Offset: e.off}) {
					break
				}
				s.read[e.key] = e.off
			}
			s.scan++
		}
		if s.scan == len(l.entries) {
			in.SetState(engine.StateCaughtUp, "")
		} else {
			in.SetState(engine.StateBehind, "")
		}
		select {
		case <-ctx.Done():
			_, err := in.PollAcks()
			return err
		case <-t.C:
		}
	}
}

func (s *keyedSource) DefaultPolicy() engine.Policy { return engine.Pause() }

type keyedCommitter struct{ *keyedSource }

func (c keyedCommitter) Acknowledged(_, _ int64, pos core.Position) {
	c.pending[pos.Key] = max(c.pending[pos.Key], pos.Offset)
}

func (c keyedCommitter) GroupAcknowledged(group string, cm engine.Commit) {
	if c.gpending[group] == nil {
		c.gpending[group] = map[string]int64{}
	}
	c.gpending[group][cm.Position.Key] = max(c.gpending[group][cm.Position.Key], cm.Position.Offset)
}

func (c keyedCommitter) Commit() error {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, off := range c.pending {
		l.committed[k] = max(l.committed[k], off)
	}
	for g, ks := range c.gpending {
		if l.groups[g] == nil {
			l.groups[g] = map[string]int64{}
		}
		for k, off := range ks {
			l.groups[g][k] = max(l.groups[g][k], off)
		}
	}
	return nil
}

// Rewind moves r.To's key back: its commit to r.To (or lower), the other
// groups' progress kept, r.Group's at r.To, then reads the key again from
// the entry after r.To.
func (c keyedCommitter) Rewind(r engine.Rewind) (core.Position, error) {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	k, to := r.To.Position.Key, r.To.Position.Offset
	through := core.Position{Key: k, Offset: c.read[k]}
	base := max(l.committed[k], c.pending[k])
	for _, h := range append(slices.Clone(r.Others), r.Group) {
		if l.groups[h] == nil {
			l.groups[h] = map[string]int64{}
		}
		if c.gpending[h] == nil {
			c.gpending[h] = map[string]int64{}
		}
	}
	for _, h := range r.Others {
		l.groups[h][k] = max(l.groups[h][k], c.gpending[h][k], base)
		c.gpending[h][k] = l.groups[h][k]
	}
	l.groups[r.Group][k], c.gpending[r.Group][k] = to, to
	l.committed[k] = min(base, to)
	c.pending[k], c.read[k] = l.committed[k], to
	for i, e := range l.entries {
		if e.key == k && e.off == to+1 {
			c.scan = min(c.scan, i)
			break
		}
	}
	return through, nil
}

// keyedRig is a keyedLog read into feed "in" of the groups fast and slow.
func keyedRig(t *testing.T, l *keyedLog) (*engine.Engine, *holdBack, *holdBack) {
	t.Helper()
	fast, slow := newHoldBack(), newHoldBack()
	e, err := engine.New(twoGroups(l.source(), fast, slow))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	time.Sleep(time.Millisecond)
	synctest.Wait()
	return e, fast, slow
}

// TestABackwardsSeekOverSeveralKeysMovesEachKeyBackToItsLastItemAtTheTarget
// (Seek, backwards, several keys): fast is moved back to seq 4 (b2): the
// source is asked to move key a back to a2 (its last item at or before
// seq 4) and key b to b2, each durable before anything is read again (the
// other group's progress kept), and the feed hands fast a3 b3 a4 b4 again,
// slow nothing; a restart before the resume hands fast those four and slow
// nothing.
func TestABackwardsSeekOverSeveralKeysMovesEachKeyBackToItsLastItemAtTheTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := []string{"a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"}
		l := newKeyedLog(all...)
		e, fast, slow := keyedRig(t, l)
		anys := func(s ...string) []any {
			var out []any
			for _, x := range s {
				out = append(out, x)
			}
			return out
		}
		if got := fast.seen(); !slices.Equal(got, anys(all...)) {
			t.Fatalf("fast handled %v before the seek, want %v", got, all)
		}
		if err := e.Fence("fast"); err != nil {
			t.Fatal(err)
		}
		f := e.Feed("in")
		gen := queueOf(t, f.Status(), "fast", false).Generation
		dry, err := e.Seek("in", "fast", gen, engine.SeekTarget{Seq: 4}, engine.SeekOptions{DryRun: true, Reason: "x"})
		if err != nil {
			t.Fatalf("dry run: %v", err)
		}
		p, err := e.Seek("in", "fast", gen, engine.SeekTarget{Seq: 4}, engine.SeekOptions{Reason: "x"})
		if err != nil {
			t.Fatalf("seek: %v", err)
		}
		dry.Replacement, dry.DryRun = p.Replacement, false
		if dry != p || p.FirstSeq != 5 || p.LastSeq != 8 || p.Redelivered != 4 {
			t.Fatalf("plan %+v (dry run %+v): want seqs 5-8 read again", p, dry)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got, want := l.state(), "a=2 fast=2 slow=4; b=2 fast=2 slow=4; "; got != want {
			t.Fatalf("after the seek: %q, want %q (each key moved back, slow's progress kept)", got, want)
		}
		if err := e.Resume("in", "fast", p.Replacement); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got, want := fast.seen(), anys(append(slices.Clone(all), "a3", "b3", "a4", "b4")...); !slices.Equal(got, want) {
			t.Fatalf("fast handled %v, want %v", got, want)
		}
		if got := slow.seen(); !slices.Equal(got, anys(all...)) {
			t.Fatalf("slow handled %v, want each item once", got)
		}
		if got, want := l.state(), "a=4 fast=4 slow=4; b=4 fast=4 slow=4; "; got != want {
			t.Fatalf("at the end: %q, want %q", got, want)
		}
	})
}

// TestARestartAfterABackwardsSeekOverSeveralKeysHandsEachKeyAgain (Seek,
// backwards, several keys): killed after the move back, before the
// resume, a restart hands fast every item after each key's target and
// slow nothing.
func TestARestartAfterABackwardsSeekOverSeveralKeysHandsEachKeyAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newKeyedLog("a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4")
		e, _, _ := keyedRig(t, l)
		if err := e.Fence("fast"); err != nil {
			t.Fatal(err)
		}
		gen := queueOf(t, e.Feed("in").Status(), "fast", false).Generation
		if _, err := e.Seek("in", "fast", gen, engine.SeekTarget{Seq: 3}, engine.SeekOptions{Reason: "x"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, fast, slow := keyedRig(t, l)
		if got, want := fast.seen(), []any{"b2", "a3", "b3", "a4", "b4"}; !slices.Equal(got, want) {
			t.Fatalf("the restart handed fast %v, want %v (a after a2, b after b1)", got, want)
		}
		if got := slow.seen(); len(got) != 0 {
			t.Fatalf("the restart handed slow %v, want nothing", got)
		}
	})
}

// TestABackwardsSeekOverAKeyWhoseStandIsUnknownIsRefused (Seek, backwards,
// several keys): the items after seq 2 (a2) are of key b too, whose first
// item (b1, seq 3) is after it: where b stood at the target is not known:
// refused (ErrSeekUnsupported), changing nothing.
func TestABackwardsSeekOverAKeyWhoseStandIsUnknownIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newKeyedLog("a1", "a2", "b1", "a3")
		e, fast, _ := keyedRig(t, l)
		if err := e.Fence("fast"); err != nil {
			t.Fatal(err)
		}
		gen := queueOf(t, e.Feed("in").Status(), "fast", false).Generation
		before := l.state()
		for _, dry := range []bool{true, false} {
			if _, err := e.Seek("in", "fast", gen, engine.SeekTarget{Seq: 2}, engine.SeekOptions{DryRun: dry, Reason: "x"}); !errors.Is(err, engine.ErrSeekUnsupported) {
				t.Fatalf("dry run %t: %v, want ErrSeekUnsupported", dry, err)
			}
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := queueOf(t, e.Feed("in").Status(), "fast", false).Generation; got != gen {
			t.Fatalf("generation %d after the refusal, want %d", got, gen)
		}
		if got := l.state(); got != before {
			t.Fatalf("state %q after the refusal, want %q", got, before)
		}
		if got := len(fast.seen()); got != 4 {
			t.Fatalf("fast handled %d items, want 4", got)
		}
	})
}
