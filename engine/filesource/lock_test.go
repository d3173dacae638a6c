package filesource

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// handOver feeds nothing: it hands the Intake the engine gives it to the
// test (through got) and waits for the stop, so that a test can drive a
// source's Run, or its parts, by hand on its own goroutine. It keeps the
// default policy of the source it stands for.
type handOver struct {
	policy engine.Policy
	got    chan *engine.Intake
}

func (h *handOver) DefaultPolicy() engine.Policy { return h.policy }

func (h *handOver) Run(ctx context.Context, in *engine.Intake) error {
	h.got <- in
	<-ctx.Done()
	return nil
}

// intakeFor returns the Intake of feed "in" of a running engine whose
// source only hands it over (handOver, with src's default policy), for a
// test to pass to src.Run itself. The engine stops at the test's end.
func intakeFor(t *testing.T, src *Source, queueSize int, logger *slog.Logger) *engine.Intake {
	t.Helper()
	h := &handOver{policy: src.DefaultPolicy(), got: make(chan *engine.Intake, 1)}
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: h, QueueSize: queueSize}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: &rec{}}}}},
		Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return <-h.got
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
		err := src2.Run(ctx, intakeFor(t, src2, 16, nil))
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
		r2 := startSource(t, src2, &testutil.Logs{}, setup{procs: []*rec{p2}})
		r2.settle(2, p2)
		r2.stop()
		if got, _ := p2.got(); len(got) != 2 || got[0] != linesOf("line", 3, 4)[0] {
			t.Fatalf("the run after the first stopped got %q", got)
		}
	})
}
