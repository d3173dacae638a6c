package engine_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

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
	st, err := eng.RunSettled(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fs := st.Feeds[0]
	if got, want := fs.Losses, map[string]int64{"oversized": 2, "unread": 1}; !gocmp.Equal(got, want) {
		t.Errorf("losses: %s", gocmp.Diff(want, got))
	}
	if fs.Lossless || st.Lossless {
		t.Errorf("lossless: feed %v, run %v; want false after a reported loss", fs.Lossless, st.Lossless)
	}
}

// steps is a source that publishes push items and reports losses in the
// order given, then ends.
type steps []any // a string item, or an engine.Loss

func (s steps) Run(ctx context.Context, in *engine.Intake) error {
	for _, st := range s {
		if l, ok := st.(engine.Loss); ok {
			in.AddLoss(l)
			continue
		}
		if err := in.Publish(ctx, st); err != nil {
			return err
		}
	}
	in.SetBounded(true)
	in.SetState(engine.StateEndOfStream, "")
	return nil
}

// TestASourceLossReachesEveryStreamWhereItHappened: a loss the source
// reports between two items (Intake.AddLoss) is told to every processor
// stream of every group of the feed (Observer.Lost: a group of one worker,
// each worker of a group of three by key and of two in any order) after the
// items published before it and
// before the items published after it, with the feed sequence of the last
// item before it; a loss after the last item comes before the end. It is
// counted apart from the queues' drops. (A loss was only counted: no stream
// was told, so no recording held it.)
func TestASourceLossReachesEveryStreamWhereItHappened(t *testing.T) {
	over := engine.Loss{Reason: "oversized", Items: 1, Epoch: 5, From: 8, To: 68, Detail: "in.txt"}
	unread := engine.Loss{Reason: "unread", Epoch: 5, From: 90}
	src := steps{"a1", "b2", over, "c3", "a4", "b5", unread}
	var mu sync.Mutex
	log := map[string][]string{}
	note := func(proc, what string) {
		mu.Lock()
		log[proc] = append(log[proc], what)
		mu.Unlock()
	}
	nop := func() (core.Processor, error) {
		return core.ProcessorFunc(func(*core.Cycle, any) error { return nil }), nil
	}
	obs := engine.Observer{
		Received: func(proc string, in *engine.Input) { note(proc, fmt.Sprintf("%d %v", in.Seq, in.Item)) },
		Lost: func(group string, l engine.SourceLoss) {
			for _, p := range l.Processors {
				note(p, fmt.Sprintf("lost %s after %d (%s %d-%d)", l.Reason, l.Seq, l.Feed, l.From, l.To))
			}
		},
	}
	eng, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: src, Policy: engine.BlockWithDeadline(time.Minute), QueueSize: 16}},
		Groups: []engine.GroupConfig{
			{Name: "one", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p",
				Processor: core.ProcessorFunc(func(*core.Cycle, any) error { return nil })}}},
			{Name: "many", Feeds: []string{"in"}, Workers: 3, Key: func(it any) string { return it.(string)[:1] },
				Processors: []engine.ProcessorConfig{{Name: "q", New: nop}}},
			{Name: "any", Feeds: []string{"in"}, Workers: 2, Order: engine.OrderNone,
				Processors: []engine.ProcessorConfig{{Name: "r", New: nop}}},
		},
		Observer: obs,
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.RunSettled(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	lostOver, lostUnread := "lost oversized after 2 (in 8-68)", "lost unread after 5 (in 90-0)"
	if d := gocmp.Diff([]string{"1 a1", "2 b2", lostOver, "3 c3", "4 a4", "5 b5", lostUnread}, log["p"]); d != "" {
		t.Errorf("stream p (-want +got):\n%s", d)
	}
	// Each worker handles the items of its keys; both losses are in its
	// stream, each after the items of seq up to its Seq and before the
	// later ones: the stream's entries in increasing order of seq, a loss
	// counting half a seq after its Seq.
	var streams []string
	for w := range 3 {
		streams = append(streams, core.WorkerStream("q", w))
	}
	for w := range 2 {
		streams = append(streams, core.WorkerStream("r", w))
	}
	for _, name := range streams {
		at := func(e string) float64 {
			switch e {
			case lostOver:
				return 2.5
			case lostUnread:
				return 5.5
			}
			var seq float64
			fmt.Sscan(e, &seq)
			return seq
		}
		got := log[name]
		if !slices.IsSortedFunc(got, func(a, b string) int { return cmp.Compare(at(a), at(b)) }) ||
			!slices.Contains(got, lostOver) || !slices.Contains(got, lostUnread) {
			t.Errorf("stream %s: %q, want both losses among its items in seq order", name, got)
		}
	}
	fs := st.Feeds[0]
	if fs.Dropped != 0 || !gocmp.Equal(fs.Losses, map[string]int64{"oversized": 1, "unread": 1}) || fs.Lossless {
		t.Errorf("status: dropped %d, losses %v, lossless %v; want 0, one of each, false", fs.Dropped, fs.Losses, fs.Lossless)
	}
}
