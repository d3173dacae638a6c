package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
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
		Logger:   testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if st, err := e.RunSettled(ctx, time.Millisecond); err != nil || !st.Lossless {
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
