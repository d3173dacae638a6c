package engine_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// lossSource reports its losses, then ends.
type lossSource struct{ losses []engine.Loss }

func (s lossSource) Run(_ context.Context, in *engine.Intake) error {
	for _, l := range s.losses {
		in.AddLoss(l)
	}
	in.SetBounded(true)
	in.SetState(engine.StateEndOfStream, "")
	return nil
}

func TestALossASourceReportsMakesItsFeedLossyCountedByReason(t *testing.T) {
	src := lossSource{losses: []engine.Loss{
		{Reason: "oversized", Items: 1, From: 10, To: 20000},
		{Reason: "unread", From: 40, Detail: "in.txt-0001"},
		{Reason: "oversized", Items: 1, From: 30000, To: 50000},
	}}
	eng, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, Policy: engine.Pause(), QueueSize: 4}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: core.ProcessorFunc(func(*core.Cycle, any) error { return nil })}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.RunSettled(t.Context(), 1e6)
	if err != nil {
		t.Fatal(err)
	}
	fs := st.Feeds[0]
	if got, want := fs.Losses, map[string]int64{"oversized": 2, "unread": 1}; !cmp.Equal(got, want) {
		t.Errorf("losses: %s", cmp.Diff(want, got))
	}
	if fs.Lossless || st.Lossless {
		t.Errorf("lossless: feed %v, run %v; want false after a reported loss", fs.Lossless, st.Lossless)
	}
}
