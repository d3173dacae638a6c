package replayer_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// upper is a small app: it emits each line in upper case, with the time it
// read from the engine clock.
func upper() core.Processor {
	return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Emit("out", map[string]any{"line": strings.ToUpper(ev.(string)), "at": c.Now()})
		return nil
	})
}

// recordUpper records a run of upper over lines into a new in-memory
// recording.
func recordUpper(lines ...any) *store.Memory {
	m := store.NewMemory()
	rec, err := recorder.New(m, recorder.Options{
		Clock: core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Second),
		Apps:  map[string]string{"upper": "upper"},
	})
	if err != nil {
		panic(err)
	}
	e, err := engine.New(engine.Config{
		Clock: core.NewStepClock(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), time.Millisecond),
		Feeds: []engine.FeedConfig{{Name: "in", Source: memsource.NewList(lines...),
			Policy: engine.BlockWithDeadline(time.Second), QueueSize: 8}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: "upper", Processor: upper()}}}},
		Observer: rec.Observer(),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = e.Start(ctx)
	_, _ = e.WaitSettled(ctx)
	_ = e.Stop(ctx)
	if err := rec.Close(); err != nil {
		panic(err)
	}
	return m.ReadOnly()
}

// Replay a recording with the app it was recorded with: identical. The
// recorded clock readings are played back, so the "at" of each output
// matches too.
func ExampleReplay() {
	m := recordUpper("a", "b")
	apps := []core.App{{
		Name:   "upper",
		New:    func(map[string]string) (core.Processor, error) { return upper(), nil },
		Decode: recorder.JSON.Decode,
	}}
	rep, err := replayer.Replay(context.Background(), m, apps, replayer.Options{})
	if err != nil {
		panic(err)
	}
	_ = rep.WriteText(os.Stdout)
	// Output:
	// replay: identical, complete, lossless
	// processor "upper" (app "upper"): 2 inputs replayed, 2 outputs compared, identical
}

// A changed app is a divergence at the first input whose outputs differ.
func ExampleReplay_divergence() {
	m := recordUpper("a", "b")
	apps := []core.App{{
		Name: "upper",
		New: func(map[string]string) (core.Processor, error) {
			return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				c.Emit("out", map[string]any{"line": ev.(string), "at": c.Now()}) // no longer upper case
				return nil
			}), nil
		},
		Decode: recorder.JSON.Decode,
	}}
	rep, err := replayer.Replay(context.Background(), m, apps, replayer.Options{})
	if err != nil {
		panic(err)
	}
	d := rep.Processors[0].First
	fmt.Println("identical:", rep.Identical)
	fmt.Printf("first divergence: %s at index %d, input %s\n", d.Kind, d.Index, d.Input)
	fmt.Println("want:", d.Want[0])
	fmt.Println("got: ", d.Got[0])
	// Output:
	// identical: false
	// first divergence: output at index 2, input "a"
	// want: out: {"at":"2031-01-01T00:00:00Z","line":"A"}
	// got:  out: {"at":"2031-01-01T00:00:00Z","line":"a"}
}

// Diff two runs of the same input, ignoring the clock readings in the
// outputs.
func ExampleDiff() {
	a, b := recordUpper("a", "b", "c"), recordUpper("a", "b")
	rep, err := replayer.Diff(context.Background(), []store.Reader{a}, []store.Reader{b},
		replayer.DiffOptions{Ignore: []string{"at"}})
	if err != nil {
		panic(err)
	}
	_ = rep.WriteText(os.Stdout)
	// Output:
	// diff: DIFFERENT
	//   why: processor "upper" differs: 1 only in A
	// processor "upper": 3 inputs in A, 2 inputs in B, 2 common: 1 only in A, 0 only in B, 0 different, 0 processed twice, 0 with duplicate outputs
	//   only in A: feed "in" seq 3 (run 1): "c"
}
