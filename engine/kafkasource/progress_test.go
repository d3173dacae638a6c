package kafkasource_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// progressEngine starts an engine whose feed "kafka" (honouring
// Intake.SkipCompleted) is read by the groups fast and slow.
func progressEngine(t *testing.T, src *kafkasource.Source, fast, slow core.Processor) *engine.Engine {
	t.Helper()
	g := func(name string, p core.Processor) engine.GroupConfig {
		return engine.GroupConfig{Name: name, Feeds: []string{"kafka"}, Processors: []engine.ProcessorConfig{{Name: name + "-p", Processor: p}}}
	}
	eng, err := engine.New(engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "kafka", Source: src, QueueSize: 64, SkipCompleted: true}},
		Groups:       []engine.GroupConfig{g("fast", fast), g("slow", slow)},
		DrainTimeout: 100 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return eng
}

// metadata reads the group's commit metadata of partition 0 of topic.
func metadata(t *testing.T, c *kfake.Cluster, group string) string {
	t.Helper()
	adm, done := admin(t, c)
	defer done()
	os, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := os.Lookup(topic, 0)
	return o.Metadata
}

// TestARestartDoesNotHandAGroupTheRecordsItCompleted (per-group progress,
// Kafka): the commit of a partition is the slowest group's, and its
// metadata carries the progress of the group ahead of it; a restart
// reads from the commit, hands the slow group every record after it and
// the fast group none of those it completed (counted: alreadyCompleted).
func TestARestartDoesNotHandAGroupTheRecordsItCompleted(t *testing.T) {
	c := newCluster(t, 1)
	hwm := produce(t, c, 20, 1)
	var fast1, slow1 atomic.Int64
	src := newSource(t, c, "gprogress", nil)
	eng := progressEngine(t, src, core.ProcessorFunc(func(*core.Cycle, any) error {
		fast1.Add(1)
		return nil
	}), core.ProcessorFunc(func(cy *core.Cycle, ev any) error {
		if ev.(*kafkasource.Record).Offset == 5 {
			<-cy.Context().Done() // held until the stop: never completed
			return cy.Context().Err()
		}
		slow1.Add(1)
		return nil
	}))
	testutil.PollUntil(t, time.Minute, "fast handled 20, slow 5, committed at 5 with fast's progress at 20", func() bool {
		return fast1.Load() == 20 && slow1.Load() == 5 && committed(t, c, "gprogress")[0] == 5 &&
			strings.HasSuffix(metadata(t, c, "gprogress"), " groups=fast=20")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng.Stop(ctx)
	src.Close()
	if got := committed(t, c, "gprogress")[0]; got != 5 {
		t.Fatalf("run 1 committed %d, want 5 (slow's record 5 was not completed)", got)
	}

	var fast2, slow2 atomic.Int64
	src2 := newSource(t, c, "gprogress", nil)
	eng2 := progressEngine(t, src2, core.ProcessorFunc(func(*core.Cycle, any) error {
		fast2.Add(1)
		return nil
	}), core.ProcessorFunc(func(*core.Cycle, any) error {
		slow2.Add(1)
		return nil
	}))
	t.Cleanup(func() { eng2.Stop(context.Background()) })
	testutil.PollUntil(t, time.Minute, "everything committed", func() bool {
		return allCommitted(src2, hwm) && slow2.Load() == 15
	})
	if got := fast2.Load(); got != 0 {
		t.Errorf("the restart handed fast %d records, want none (it completed all 20)", got)
	}
	var completed []int64
	for _, ss := range eng2.Status().Feeds[0].Subscribers {
		completed = append(completed, ss.AlreadyCompleted)
	}
	if len(completed) != 2 || completed[0] != 15 || completed[1] != 0 || !eng2.Status().Feeds[0].GroupProgress {
		t.Errorf("alreadyCompleted %v, want [15 0]; groupProgress %v", completed, eng2.Status().Feeds[0].GroupProgress)
	}
}
