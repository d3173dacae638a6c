package filesource

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
)

// unstartedFeed is a feed of an engine that is never started: a source run
// by hand publishes into it.
func unstartedFeed(t *testing.T, src engine.Source) *engine.Feed {
	t.Helper()
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 16}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: &rec{}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.Feed("in")
}

// The pointer file is locked for as long as a source runs: a second source
// on the same pointer fails at once with ErrLocked naming the pointer file;
// once the first run stopped (its final commits made), the pointer is free.
func TestASecondSourceOnALockedPointerFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 0, 3))
		p := &rec{}
		src1, lg := newSource(t, path, Options{})
		r := startSource(t, src1, lg, setup{procs: []*rec{p}})
		r.settle(3, p)

		src2, _ := newSource(t, path, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a bound, never reached by a refusal
		defer cancel()
		err := src2.Run(ctx, unstartedFeed(t, src2))
		var fe *FileError
		if !errors.Is(err, ErrLocked) || !errors.As(err, &fe) || fe.Path != src2.PointerPath() {
			t.Fatalf("second run on %s: %v, want ErrLocked naming the pointer file", src2.PointerPath(), err)
		}
		if got := readPointer(t, src1.PointerPath()); got.Offset != 3*lineLen {
			t.Fatalf("pointer %+v after the refused run", got)
		}

		r.stop()
		appendFile(t, path, numbered("line", 3, 5))
		p2 := &rec{}
		r2 := startSource(t, src2, &logs{}, setup{procs: []*rec{p2}})
		r2.settle(2, p2)
		r2.stop()
		if got, _ := p2.got(); len(got) != 2 || got[0] != linesOf("line", 3, 4)[0] {
			t.Fatalf("the run after the first stopped got %q", got)
		}
	})
}
