package engine_test

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// TestCommittedReportsEachCommitAfterItsItemsWereDispatched: the Committed
// hook reports the positions the source committed, in order, each after
// the item it covers was dispatched, and the last one is the log's
// committed offset.
func TestCommittedReportsEachCommitAfterItsItemsWereDispatched(t *testing.T) {
	items := make([]any, 50)
	for i := range items {
		items[i] = i
	}
	log := memsource.NewLog(items...)
	log.Close()
	var mu sync.Mutex
	var dispatched int64
	var commits []engine.Commit
	var early []engine.Commit
	obs := engine.Observer{
		AfterDispatch: func(_ string, in *engine.Input) {
			mu.Lock()
			dispatched = max(dispatched, in.Seq)
			mu.Unlock()
		},
		Committed: func(feed string, c engine.Commit) {
			mu.Lock()
			defer mu.Unlock()
			if feed != "in" {
				t.Errorf("Committed feed %q, want in", feed)
			}
			if c.Seq > dispatched {
				early = append(early, c)
			}
			commits = append(commits, c)
		},
	}
	p := core.ProcessorFunc(func(*core.Cycle, any) error { return nil })
	e, err := engine.New(engine.Config{
		Feeds:    []engine.FeedConfig{{Name: "in", Source: log.Source(), QueueSize: 4}},
		Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", p)}},
		Observer: obs,
		Logger:   testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if st, err := e.RunSettled(ctx); err != nil || !st.Lossless {
		t.Fatalf("run: %v, lossless %v", err, st.Lossless)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Errorf("commits reported before their item was dispatched: %+v", early)
	}
	if len(commits) == 0 {
		t.Fatal("no commit reported")
	}
	for i := 1; i < len(commits); i++ {
		if commits[i].Seq <= commits[i-1].Seq || commits[i].Position.Offset <= commits[i-1].Position.Offset {
			t.Errorf("commit %d %+v does not follow %+v", i, commits[i], commits[i-1])
		}
	}
	last := commits[len(commits)-1]
	if want := (engine.Commit{Seq: 50, Epoch: 1, Position: core.Position{Offset: log.Committed()}}); last != want || log.Committed() != 50 {
		t.Errorf("last commit %+v, want %+v (log committed %d)", last, want, log.Committed())
	}
}

// fencingCommitter commits, per key, the highest position it was told,
// except for the keys it fences: their acknowledgements are dropped and
// nothing of them is ever committed (a Kafka partition revoked while its
// items were queued). It reports what it made durable
// (engine.CommitReporter).
type fencingCommitter struct {
	mu        sync.Mutex
	fenced    map[string]bool
	acked     map[string]int64
	committed map[string]int64
}

func (c *fencingCommitter) Acknowledged(_, _ int64, pos core.Position) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fenced[pos.Key] {
		c.acked[pos.Key] = max(c.acked[pos.Key], pos.Offset)
	}
}

func (c *fencingCommitter) Commit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, off := range c.acked {
		c.committed[k] = off
	}
	return nil
}

func (c *fencingCommitter) Durable(cm engine.Commit) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed[cm.Position.Key], !c.fenced[cm.Position.Key]
}

// TestCommittedReportsOnlyWhatTheCommitterMadeDurable: a committer that
// fences one key's acknowledgements (and says so, engine.CommitReporter)
// gets no Committed report for that key, while the other key's commits are
// reported up to the position it made durable: a COMMIT row never claims
// a position the source did not commit.
func TestCommittedReportsOnlyWhatTheCommitterMadeDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		got := map[string]int64{}
		obs := engine.Observer{Committed: func(_ string, c engine.Commit) {
			mu.Lock()
			got[c.Position.Key] = max(got[c.Position.Key], c.Position.Offset)
			mu.Unlock()
		}}
		e := start(t, engine.Config{Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
			Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", newTurnstile(true))}},
			Observer: obs})
		f := e.Feed("in")
		c := &fencingCommitter{fenced: map[string]bool{"t/1": true}, acked: map[string]int64{}, committed: map[string]int64{}}
		f.Intake().SetCommitter(c)
		for i := range 20 {
			key := "t/" + strconv.Itoa(i%2)
			if !f.Intake().TryPublish(i, core.Position{Key: key, Offset: int64(i/2 + 1)}) {
				t.Fatalf("item %d refused", i)
			}
		}
		synctest.Wait()
		if _, err := f.Intake().PollAcks(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := map[string]int64{"t/0": 10}; !maps.Equal(got, want) {
			t.Errorf("committed positions reported %v, want %v (t/1 was fenced: nothing of it committed)", got, want)
		}
	})
}
