package engine

import (
	"context"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
)

// sourceFunc is a Source from a function.
type sourceFunc func(ctx context.Context, f *Feed) error

func (s sourceFunc) Run(ctx context.Context, in *Intake) error { return s(ctx, in.f) }

// TestAGroupSeesWhetherItsSourceIsBehind: the hint that keeps a group
// awake between a source's batches follows the feed's state, and is off
// once the source's Run has returned.
func TestAGroupSeesWhetherItsSourceIsBehind(t *testing.T) {
	behind, release := make(chan struct{}), make(chan struct{})
	src := sourceFunc(func(ctx context.Context, f *Feed) error {
		f.Intake().SetState(StateBehind, "")
		close(behind)
		<-release
		return nil
	})
	e, err := New(Config{
		Feeds:  []FeedConfig{{Name: "in", Source: src, Policy: Pause(), QueueSize: 8}, {Name: "push", Policy: Pause(), QueueSize: 8}},
		Groups: []GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []ProcessorConfig{{Name: "p", Processor: core.ProcessorFunc(func(*core.Cycle, any) error { return nil })}}}, {Name: "h", Feeds: []string{"push"}, Processors: []ProcessorConfig{{Name: "q", Processor: core.ProcessorFunc(func(*core.Cycle, any) error { return nil })}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	g, h := e.groups[0], e.groups[1]
	if g.sourceBehind() || h.sourceBehind() {
		t.Fatal("behind before the sources ran")
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	// The source's own SetState runs on its goroutine: the table starts once
	// it has, or it could land after any row and undo that row's state.
	<-behind
	f := e.Feed("in")
	for _, tc := range []struct {
		state FeedState
		want  bool
	}{
		{StateBehind, true},
		{StateCaughtUp, false},
		{StateBehind, true},
		{StateEndOfStream, false},
		{StateBehind, true},
	} {
		f.Intake().SetState(tc.state, "")
		if got := g.sourceBehind(); got != tc.want {
			t.Errorf("after SetState(%s): sourceBehind = %v, want %v", tc.state, got, tc.want)
		}
		if h.sourceBehind() {
			t.Errorf("after SetState(%s) of another feed: a group of a push feed sees its source behind", tc.state)
		}
	}
	close(release)
	e.srcWG.Wait()
	if g.sourceBehind() {
		t.Error("sourceBehind after the source's Run returned in state BEHIND")
	}
}
