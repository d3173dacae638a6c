package orders_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/examples/orders"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// Record a live run of the orders app over a few lines (pushed by an
// in-memory source), printing each output as the live sink receives it,
// then replay the recording.
func Example() {
	app := orders.App()
	p, err := app.Build(map[string]string{orders.OptionLimit: "50.00"})
	if err != nil {
		panic(err)
	}
	rec := store.NewMemory()
	ctx := context.Background()
	run, err := recorder.Start(ctx, recorder.RunConfig{
		Store: rec,
		Feed: engine.FeedConfig{Name: "input", QueueSize: 8, Policy: engine.BlockWithDeadline(time.Second),
			Source: memsource.NewList("o1,alice,40.00", "o2,alice,30.00", "o3,bob,x")},
		Processors: []recorder.Processor{{Name: "orders", App: app, Processor: p}},
		Clock:      core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Second),
		Sink: core.SinkFunc(func(processor, sink string, out any) error {
			b, err := json.Marshal(out)
			fmt.Printf("%s %s\n", sink, b)
			return err
		}),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	if _, err := run.Engine().WaitSettled(ctx); err != nil {
		panic(err)
	}
	// The windows' timers (1h, on the system clock) are still pending:
	// stopping drops them, and the recording holds no TIMER row.
	if stopErr, recErr := run.Stop(ctx); stopErr != nil || recErr != nil {
		panic(fmt.Sprint(stopErr, recErr))
	}
	rec.Close()

	rep, err := replayer.Replay(ctx, rec, []core.App{app},
		replayer.Options{AppOptions: map[string]map[string]string{"orders": {orders.OptionLimit: "50.00"}}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("replay: identical %v, complete %v, lossless %v\n", rep.Identical, rep.Complete, rep.Lossless)
	// Output:
	// totals {"order":"o1","customer":"alice","amount":"40.00","window":"40.00"}
	// totals {"order":"o2","customer":"alice","amount":"30.00","window":"70.00"}
	// alerts {"kind":"over-limit","customer":"alice","order":"o2","window":"70.00","limit":"50.00"}
	// alerts {"kind":"rejected","line":"o3,bob,x","reason":"amount \"x\": want a decimal such as 12.50"}
	// replay: identical true, complete true, lossless true
}
