package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
)

// twoGroups is an engine config of one positioned feed "in" (its source
// given) and the groups fast and slow, each of one processor of h.
func twoGroups(src engine.Source, fast, slow *holdBack) engine.Config {
	return twoGroupsHonouring(src, fast, slow, true)
}

// twoGroupsHonouring is twoGroups whose feed honours Intake.SkipCompleted
// or not (FeedConfig.SkipCompleted).
func twoGroupsHonouring(src engine.Source, fast, slow *holdBack, honour bool) engine.Config {
	g := func(name string, h *holdBack) engine.GroupConfig {
		p, _ := h.processor()()
		return engine.GroupConfig{Name: name, Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: name + "-p", Processor: p}}}
	}
	return engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "in", Source: src, Policy: engine.Pause(), QueueSize: 64, SkipCompleted: honour}},
		Groups:       []engine.GroupConfig{g("fast", fast), g("slow", slow)},
		DrainTimeout: time.Second,
	}
}

// TestARestartDoesNotHandAGroupWhatItCompleted (per-group progress): the
// feed commits at its slowest group, and a GroupCommitter keeps each
// group's own completed prefix with that commit; at a restart the fast
// group is not handed again what it completed (counted, alreadyCompleted),
// the slow group gets everything it had not completed.
func TestARestartDoesNotHandAGroupWhatItCompleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
		log.Close()
		fast, slow := newHoldBack(), newHoldBack(4)
		e, err := engine.New(twoGroups(log.GroupSource(), fast, slow))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// Stop: slow's item 4 sees the cancellation and fails; it is not
		// dispatched.
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := fast.seen(), []any{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
			t.Fatalf("run 1: fast handled %v, want %v", got, want)
		}
		if got, want := slow.seen(), []any{1, 2, 3}; !slices.Equal(got, want) {
			t.Fatalf("run 1: slow handled %v, want %v", got, want)
		}
		if c, f, s := log.Committed(), log.Completed("fast"), log.Completed("slow"); c != 3 || f != 10 || s > 3 {
			t.Fatalf("run 1 committed %d, fast's progress %d, slow's %d: want 3, 10, at most 3", c, f, s)
		}

		fast2, slow2 := newHoldBack(), newHoldBack()
		e2, err := engine.New(twoGroups(log.GroupSource(), fast2, slow2))
		if err != nil {
			t.Fatal(err)
		}
		st, err := e2.RunSettled(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := fast2.seen(); len(got) != 0 {
			t.Fatalf("run 2: fast handled %v again, want nothing (it completed all 10)", got)
		}
		if got, want := slow2.seen(), []any{4, 5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
			t.Fatalf("run 2: slow handled %v, want %v", got, want)
		}
		if got, want := subscriber(t, st.Feeds[0], "fast/in").AlreadyCompleted, int64(7); got != want {
			t.Fatalf("run 2: fast's alreadyCompleted %d, want %d", got, want)
		}
		if got := subscriber(t, st.Feeds[0], "slow/in").AlreadyCompleted; got != 0 {
			t.Fatalf("run 2: slow's alreadyCompleted %d, want 0", got)
		}
		if !st.Feeds[0].GroupProgress || !st.Lossless || log.Committed() != 10 {
			t.Fatalf("run 2: groupProgress %v, lossless %v, committed %d: want true, true, 10",
				st.Feeds[0].GroupProgress, st.Lossless, log.Committed())
		}
	})
}

// TestAFeedThatDoesNotHonourSkipCompletedDeliversAgain (per-group
// progress): a feed not configured to honour it (FeedConfig.SkipCompleted
// false, what a recording run needs) ignores Intake.SkipCompleted: a
// restart hands the fast group again what the slow one had not completed,
// and its status says it keeps no group's progress.
func TestAFeedThatDoesNotHonourSkipCompletedDeliversAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog(1, 2, 3, 4, 5)
		log.Close()
		fast, slow := newHoldBack(), newHoldBack(3)
		e, err := engine.New(twoGroupsHonouring(log.GroupSource(), fast, slow, false))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c, f := log.Committed(), log.Completed("fast"); c != 2 || f != 5 {
			t.Fatalf("run 1 committed %d, fast's progress %d: want 2, 5 (kept whether honoured or not)", c, f)
		}
		fast2, slow2 := newHoldBack(), newHoldBack()
		st, err := engine.New(twoGroupsHonouring(log.GroupSource(), fast2, slow2, false))
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.RunSettled(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := []any{3, 4, 5}; !slices.Equal(fast2.seen(), want) || !slices.Equal(slow2.seen(), want) {
			t.Fatalf("run 2: fast handled %v, slow %v, want %v each", fast2.seen(), slow2.seen(), want)
		}
		if got.Feeds[0].GroupProgress || subscriber(t, got.Feeds[0], "fast/in").AlreadyCompleted != 0 {
			t.Fatalf("run 2: groupProgress %v, fast's alreadyCompleted %d: want false, 0",
				got.Feeds[0].GroupProgress, subscriber(t, got.Feeds[0], "fast/in").AlreadyCompleted)
		}
	})
}

// single is the config of one positioned feed "in" (no source) and one
// group "g" of one processor of h.
func single(h *holdBack) engine.Config {
	cfg := twoGroups(nil, h, h)
	cfg.Groups = cfg.Groups[:1]
	cfg.Groups[0].Name = "g"
	return cfg
}

// withBystander is cfg with one more group, "other", taking feed "in" and
// completing every item at once: a feed of several groups, whose
// progress the feed tells a GroupCommitter.
func withBystander(cfg engine.Config) engine.Config {
	p, _ := newHoldBack().processor()()
	cfg.Groups = append(slices.Clone(cfg.Groups), engine.GroupConfig{Name: "other", Feeds: []string{"in"},
		Processors: []engine.ProcessorConfig{{Name: "other-p", Processor: p}}})
	return cfg
}

// TestAFeedOfOneGroupTellsNoGroupProgress (per-group progress, cost): with
// one group the group's completed prefix never passes the feed's commit,
// so the feed does not read it: a GroupCommitter is told nothing, and the
// commit moves as with a plain Committer.
func TestAFeedOfOneGroupTellsNoGroupProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack()
		e := start(t, single(h))
		f := e.Feed("in")
		c := &progressCommitter{}
		f.Intake().SetCommitter(c)
		publishAll(t, f, 1, 5)
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		told := len(c.groups)
		c.mu.Unlock()
		if told != 0 {
			t.Fatalf("told %d groups' progress, want none (one group)", told)
		}
		if got := c.Committed(); got != 5 {
			t.Fatalf("committed through %d, want 5", got)
		}
	})
}

// progressCommitter is a GroupCommitter recording what it is told.
type progressCommitter struct {
	committer
	mu     sync.Mutex
	groups map[string]int64
}

func (c *progressCommitter) GroupAcknowledged(group string, cm engine.Commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = map[string]int64{}
	}
	c.groups[group] = cm.Position.Offset
}

func (c *progressCommitter) told(group string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[group]
}

// TestAGroupsProgressIsNeverToldPastWhatItCompleted (per-group progress,
// crash safety): what a GroupCommitter is told of a group is the end of
// its contiguous completed prefix, never past an item the group has not
// completed: not past an item held by a worker while later ones complete,
// not past what its processing checkpoint made durable, not past the
// backlog of a queue it was unsubscribed from, even once it is subscribed
// again, and not past an item published before it was subscribed.
func TestAGroupsProgressIsNeverToldPastWhatItCompleted(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T) (told, want int64)
	}{
		{"a worker holds item 3, 4 and 5 complete", func(t *testing.T) (int64, int64) {
			h := newHoldBack(3)
			e := start(t, withBystander(parallel(nil, 2, 0, h)))
			f := e.Feed("in")
			c := &progressCommitter{}
			f.Intake().SetCommitter(c)
			publishAll(t, f, 1, 5)
			synctest.Wait()
			if _, err := f.Intake().PollAcks(); err != nil {
				t.Fatal(err)
			}
			told := c.told("g")
			h.release(3)
			return told, 2
		}},
		{"a checkpoint made 2 of 5 durable", func(t *testing.T) (int64, int64) {
			h := newHoldBack()
			e := start(t, withBystander(single(h)))
			f := e.Feed("in")
			c := &progressCommitter{}
			f.Intake().SetCommitter(c)
			cp, err := e.Hold("in", "g")
			if err != nil {
				t.Fatal(err)
			}
			publishAll(t, f, 1, 2)
			synctest.Wait()
			m := cp.Mark()
			publishAll(t, f, 3, 5)
			synctest.Wait()
			if err := cp.DurableThrough(m); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Intake().PollAcks(); err != nil {
				t.Fatal(err)
			}
			told := c.told("g")
			cp.Release()
			return told, 2
		}},
		{"unsubscribed with 3 queued, subscribed again, 4 and 5 complete", func(t *testing.T) (int64, int64) {
			h := newHoldBack(2)
			e := start(t, withBystander(single(h)))
			f := e.Feed("in")
			c := &progressCommitter{}
			f.Intake().SetCommitter(c)
			publishAll(t, f, 1, 3)
			synctest.Wait()
			if err := e.Unsubscribe("g", "in"); err != nil {
				t.Fatal(err)
			}
			h.release(2)
			synctest.Wait()
			if err := e.Subscribe("g", "in"); err != nil {
				t.Fatal(err)
			}
			publishAll(t, f, 4, 5)
			synctest.Wait()
			if _, err := f.Intake().PollAcks(); err != nil {
				t.Fatal(err)
			}
			if got := h.seen(); !slices.Equal(got, []any{1, 2, 4, 5}) {
				t.Fatalf("handled %v, want 1, 2, 4, 5 (3 stays in the removed queue)", got)
			}
			return c.told("g"), 2
		}},
		{"subscribed after 1 and 2 were published, a slow group holds 1", func(t *testing.T) (int64, int64) {
			fast, slow := newHoldBack(), newHoldBack(1)
			e := start(t, twoGroups(nil, fast, slow))
			f := e.Feed("in")
			c := &progressCommitter{}
			f.Intake().SetCommitter(c)
			if err := e.Unsubscribe("fast", "in"); err != nil {
				t.Fatal(err)
			}
			publishAll(t, f, 1, 2)
			if err := e.Subscribe("fast", "in"); err != nil {
				t.Fatal(err)
			}
			publishAll(t, f, 3, 4)
			synctest.Wait()
			if _, err := f.Intake().PollAcks(); err != nil {
				t.Fatal(err)
			}
			if got := fast.seen(); !slices.Equal(got, []any{3, 4}) {
				t.Fatalf("fast handled %v, want 3 and 4", got)
			}
			told := c.told("fast")
			slow.release(1)
			return told, 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if got, want := func() (int64, int64) { return tt.run(t) }(); got != want {
					t.Fatalf("told the group's progress through %d, want %d", got, want)
				}
			})
		})
	}
}

// TestAPushFeedKeepsNoGroupProgress (per-group progress): a feed whose
// committer is not a GroupCommitter, or that has none, says so in its
// status (groupProgress false): a restart re-delivers to every group what
// the slowest had not completed.
func TestAPushFeedKeepsNoGroupProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack()
		cfg := single(h)
		cfg.Feeds[0].SkipCompleted = true
		e := start(t, cfg)
		if e.Status().Feeds[0].GroupProgress {
			t.Fatal("a feed without a committer says it keeps each group's progress")
		}
		e.Feed("in").Intake().SetCommitter(&committer{})
		if e.Status().Feeds[0].GroupProgress {
			t.Fatal("a feed whose committer is no GroupCommitter says it keeps each group's progress")
		}
		e.Feed("in").Intake().SetCommitter(&progressCommitter{})
		if !e.Status().Feeds[0].GroupProgress {
			t.Fatal("a feed whose committer is a GroupCommitter says it keeps no group's progress")
		}
	})
}

// TestARestartTellsTheGroupsStreamsWhatItDidNotHandAgain (per-group
// progress, on the record): the items a restart does not hand a group,
// completed in an earlier run, are told to its streams
// (Observer.AlreadyCompleted) as one run of consecutive sequences of one
// position space, naming its processors, and the slow group is told
// nothing; every sequence of the feed is then either handed to a group or
// told to it.
func TestARestartTellsTheGroupsStreamsWhatItDidNotHandAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memsource.NewLog(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
		log.Close()
		fast, slow := newHoldBack(), newHoldBack(4)
		e, err := engine.New(twoGroups(log.GroupSource(), fast, slow))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}

		var mu sync.Mutex
		var got []engine.Completed
		cfg := twoGroups(log.GroupSource(), newHoldBack(), newHoldBack())
		cfg.Observer.AlreadyCompleted = func(group string, c engine.Completed) {
			mu.Lock()
			defer mu.Unlock()
			if group != c.Group {
				t.Errorf("AlreadyCompleted(%q, %+v): the group is not the run's", group, c)
			}
			got = append(got, c)
		}
		e2, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e2.RunSettled(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []engine.Completed{{Feed: "in", Group: "fast", Processors: []string{"fast-p"},
			First: engine.Commit{Seq: 1, Epoch: 1, Position: core.Position{Offset: 4}},
			Last:  engine.Commit{Seq: 7, Epoch: 1, Position: core.Position{Offset: 10}}}}
		if !slices.EqualFunc(got, want, func(a, b engine.Completed) bool {
			return a.Feed == b.Feed && a.Group == b.Group && slices.Equal(a.Processors, b.Processors) && a.First == b.First && a.Last == b.Last
		}) {
			t.Fatalf("AlreadyCompleted told %+v, want %+v", got, want)
		}
		if n := got[0].Count(); n != 7 {
			t.Fatalf("Count %d, want 7", n)
		}
	})
}

// TestAGroupIsHandedAgainWhatItsMarksCannotName (per-group progress, on
// the record): an item completed in an earlier run is not handed again
// only where the queue can name it to the group's streams (a mark of its
// own, or one it extends); with the marks full (maxMarks pending, the
// group busy) the item is handed again, a re-delivery, never a skip the
// streams would not be told of.
func TestAGroupIsHandedAgainWhatItsMarksCannotName(t *testing.T) {
	defer engine.SetMaxMarks(1)()
	synctest.Test(t, func(t *testing.T) {
		h := newHoldBack(2)
		var mu sync.Mutex
		var told []engine.Completed
		cfg := single(h)
		cfg.Observer.AlreadyCompleted = func(_ string, c engine.Completed) {
			mu.Lock()
			told = append(told, c)
			mu.Unlock()
		}
		e := start(t, cfg)
		in := e.Feed("in").Intake()
		in.SetEpoch(1)
		in.SkipCompleted("g", 1, core.Position{Key: "a", Offset: 10}) // g completed key a through offset 10
		publish := func(item int, key string, off int64) {
			if !in.TryPublish(item, core.Position{Key: key, Offset: off}) {
				t.Fatalf("publish of %d refused", item)
			}
			synctest.Wait()
		}
		publish(2, "b", 1) // seq 1: handed, held by g's processor
		publish(1, "a", 1) // seq 2: completed, a mark of its own
		publish(3, "b", 2) // seq 3: handed
		publish(4, "a", 2) // seq 4: completed, but the one mark pending is at another queue position
		h.release(2)
		synctest.Wait()
		if got, want := h.seen(), []any{2, 3, 4}; !slices.Equal(got, want) {
			t.Fatalf("g handled %v, want %v (4 handed again: the marks were full)", got, want)
		}
		st := e.Status()
		mu.Lock()
		defer mu.Unlock()
		want := engine.Commit{Seq: 2, Epoch: 1, Position: core.Position{Key: "a", Offset: 1}}
		if len(told) != 1 || told[0].First != want || told[0].Last != want {
			t.Fatalf("told %+v, want the one item of seq 2", told)
		}
		if got := subscriber(t, st.Feeds[0], "g/in").AlreadyCompleted; got != 1 {
			t.Fatalf("alreadyCompleted %d, want 1", got)
		}
	})
}
