package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// collected is one output as a collector received it.
type collected struct {
	processor string
	value     any
}

// TestOutputsToTwoSinksAreRoutedLiveBySinkName: a processor emitting to
// sinks "a" and "b" (and a second processor emitting to "a") is routed by
// the sink name Cycle.Emit was given into two collectors, each in emit
// order, with the emitting processor's name, and each output reaches its
// collector before Emit returns.
func TestOutputsToTwoSinksAreRoutedLiveBySinkName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		collectors := map[string]*[]collected{"a": {}, "b": {}}
		route := core.SinkFunc(func(processor, sink string, out any) error {
			c, ok := collectors[sink]
			if !ok {
				return fmt.Errorf("no collector for sink %q", sink)
			}
			*c = append(*c, collected{processor, out})
			return nil
		})
		// emit emits out to sink and checks that it is already there.
		emit := func(c *core.Cycle, sink string, out any) {
			c.Emit(sink, out)
			if got := *collectors[sink]; len(got) == 0 || got[len(got)-1].value != out {
				t.Errorf("after Emit(%q, %v) the collector holds %v: not delivered live", sink, out, got)
			}
		}
		split := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			s := ev.(string)
			emit(c, "a", s+"1")
			emit(c, "b", s+"2")
			emit(c, "a", s+"3")
			return nil
		})
		echo := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			emit(c, "a", ev)
			return nil
		})
		e, err := engine.New(engine.Config{
			Feeds: []engine.FeedConfig{{Name: "in", Source: memsource.NewList("x", "y"),
				Policy: engine.Pause(), QueueSize: 16}},
			Groups: []engine.GroupConfig{{Name: "main", Feeds: []string{"in"},
				Processors: procs("split", split, "echo", echo)}},
			Sink:   route,
			Logger: testutil.Logger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.RunSettled(context.Background())
		if err != nil || !st.Settled || !st.Lossless {
			t.Fatalf("RunSettled: settled %v, lossless %v, err %v", st.Settled, st.Lossless, err)
		}
		want := map[string][]collected{
			"a": {{"split", "x1"}, {"split", "x3"}, {"echo", "x"}, {"split", "y1"}, {"split", "y3"}, {"echo", "y"}},
			"b": {{"split", "x2"}, {"split", "y2"}},
		}
		for sink, w := range want {
			if got := *collectors[sink]; !slices.Equal(got, w) {
				t.Errorf("sink %q got %v, want %v", sink, got, w)
			}
		}
	})
}
