package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// TestMetaHoldsTheOptionsEachStreamWasBuiltWith: META's appOptions names
// every stream of a processor (each worker's) with the options its app was
// built with, but those the app says are Live; a processor given no
// Options is recorded without them (unknown), one given empty ones with
// none. (The app's key is the deprecated App.Key: still read, for a
// release, when KeyFor is not set.)
func TestMetaHoldsTheOptionsEachStreamWasBuiltWith(t *testing.T) {
	app := core.App{Name: "count", Live: []string{"state"}, Key: func(any) string { return "k" },
		New: func(map[string]string) (core.Processor, error) {
			return core.ProcessorFunc(func(*core.Cycle, any) error { return nil }), nil
		}}
	built := map[string]string{"scope": "key", "state": "/var/count.state"}
	for _, tc := range []struct {
		name    string
		workers int
		options map[string]string
		want    map[string]map[string]string
	}{
		{"one worker", 1, built, map[string]map[string]string{"count": {"scope": "key"}}},
		{"two workers", 2, built, map[string]map[string]string{"count#w0": {"scope": "key"}, "count#w1": {"scope": "key"}}},
		{"none", 1, map[string]string{}, map[string]map[string]string{"count": {}}},
		{"not told", 1, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			p := recorder.Processor{Name: "count", App: app, Options: tc.options}
			if tc.workers > 1 {
				p.New = func() (core.Processor, error) { return app.New(tc.options) }
			} else {
				p.Processor, _ = app.New(tc.options)
			}
			run, err := recorder.Start(context.Background(), recorder.RunConfig{
				Store:      w,
				Logger:     slog.New(slog.DiscardHandler),
				Feed:       engine.FeedConfig{Name: "in", Source: memsource.NewList("a"), Policy: engine.Pause(), QueueSize: 8},
				Processors: []recorder.Processor{p},
				Workers:    tc.workers,
				Order:      engine.OrderKey,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := run.Wait(context.Background(), recorder.WaitConfig{}); err != nil {
				t.Fatal(err)
			}
			if _, err := run.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			m, err := store.DecodeMeta(w.rows()[0])
			if err != nil {
				t.Fatal(err)
			}
			if !maps.EqualFunc(m.AppOptions, tc.want, maps.Equal) || (m.AppOptions == nil) != (tc.want == nil) {
				t.Errorf("META appOptions %v, want %v", m.AppOptions, tc.want)
			}
		})
	}
}

// TestStartResolvesTheKeyFromTheOptions: Start takes the key of
// key-ordered workers from the app's KeyFor of the processor's Options; an
// empty Order on several workers is key-ordered when the app has a key; an
// app that cannot be split with its options (core.ErrNoSplit) is refused on
// several workers in any order, before anything is written.
func TestStartResolvesTheKeyFromTheOptions(t *testing.T) {
	var seen []string // the keys asked for, in order
	app := core.App{Name: "split",
		KeyFor: func(o map[string]string) (func(any) string, error) {
			if o["scope"] == "all" {
				return nil, fmt.Errorf("%w: one total", core.ErrNoSplit)
			}
			return func(item any) string { seen = append(seen, item.(string)); return item.(string) }, nil
		},
		New: func(map[string]string) (core.Processor, error) {
			return core.ProcessorFunc(func(*core.Cycle, any) error { return nil }), nil
		}}
	for _, tc := range []struct {
		name    string
		options map[string]string
		order   engine.Order
		refused bool
		keyed   bool // the engine asked the key of the items
	}{
		{"key, empty order", map[string]string{"scope": "key"}, "", false, true},
		{"key, order none", map[string]string{"scope": "key"}, engine.OrderNone, false, false},
		{"all, empty order", map[string]string{"scope": "all"}, "", true, false},
		{"all, order none", map[string]string{"scope": "all"}, engine.OrderNone, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			w := &fakeWriter{}
			run, err := recorder.Start(context.Background(), recorder.RunConfig{
				Store:  w,
				Logger: slog.New(slog.DiscardHandler),
				Feed:   engine.FeedConfig{Name: "in", Source: memsource.NewList("a", "b"), Policy: engine.Pause(), QueueSize: 8},
				Processors: []recorder.Processor{{Name: "split", App: app, Options: tc.options,
					New: func() (core.Processor, error) { return app.New(tc.options) }}},
				Workers: 2,
				Order:   tc.order,
			})
			if tc.refused {
				if !errors.Is(err, recorder.ErrUsage) || !errors.Is(err, core.ErrNoSplit) {
					t.Fatalf("Start = %v, want ErrUsage wrapping core.ErrNoSplit", err)
				}
				if len(w.rows()) != 0 {
					t.Errorf("a refused run wrote %d rows", len(w.rows()))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := run.Wait(context.Background(), recorder.WaitConfig{}); err != nil {
				t.Fatal(err)
			}
			if _, err := run.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if keyed := len(seen) > 0; keyed != tc.keyed {
				t.Errorf("the items were keyed: %v (%q), want %v", keyed, seen, tc.keyed)
			}
		})
	}
}
