package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
)

// A bounded job: a list of lines, one processor that emits each line upper
// cased, a sink that prints the outputs, run until settled.
func ExampleEngine_RunSettled() {
	upper := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Emit("out", strings.ToUpper(ev.(string)))
		return nil
	})
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "lines", Source: memsource.NewList("a", "b", "c"),
			Policy: engine.BlockWithDeadline(time.Second), QueueSize: 16}},
		Groups: []engine.GroupConfig{{Name: "main", Feeds: []string{"lines"},
			Processors: []engine.ProcessorConfig{{Name: "upper", Processor: upper}}}},
		Sink: core.SinkFunc(func(processor, sink string, out any) error {
			fmt.Println(processor, sink, out)
			return nil
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := e.RunSettled(context.Background())
	fmt.Println("settled:", st.Settled, "lossless:", st.Lossless, "err:", err)
	// Output:
	// upper out A
	// upper out B
	// upper out C
	// settled: true lossless: true err: <nil>
}

// Delivery.AlreadyApplied is how a stateful processor skips an item its
// saved state already holds after a restart re-delivers it.
func ExampleDelivery_AlreadyApplied() {
	saved := core.Position{Offset: 120} // saved with the state, epoch 7
	for _, d := range []core.Delivery{
		{Feed: "input", Epoch: 7, Position: core.Position{Offset: 100}},
		{Feed: "input", Epoch: 7, Position: core.Position{Offset: 140}},
		{Feed: "input", Epoch: 8, Position: core.Position{Offset: 100}}, // the input was replaced
	} {
		fmt.Println(d.Position.Offset, d.Epoch, d.AlreadyApplied(7, saved))
	}
	// Output:
	// 100 7 true
	// 140 7 false
	// 100 8 false
}

// New rejects a configuration with a *ConfigError naming the feed, group
// and key at fault: here a feed that says no overload policy.
func ExampleConfigError() {
	_, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "lines", Source: memsource.NewList("a"), QueueSize: 16}},
		Groups: []engine.GroupConfig{{Name: "main", Feeds: []string{"lines"},
			Processors: []engine.ProcessorConfig{{Name: "p", Processor: core.ProcessorFunc(func(*core.Cycle, any) error { return nil })}}}},
	})
	var ce *engine.ConfigError
	if errors.As(err, &ce) {
		fmt.Printf("feed %q key %q, a config error: %v\n", ce.Feed, ce.Key, errors.Is(err, engine.ErrConfig))
	}
	// Output:
	// feed "lines" key "policy", a config error: true
}
