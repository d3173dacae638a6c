package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
)

// A Kafka feed is ready while its broker answers, and unreachable (503,
// the feed and the run) once the broker is stopped: the source's Ping is
// the window's probe.
func TestReadyzIsUnreachableWhileTheBrokerIsStopped(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ks, err := kafkasource.New(kafkasource.Options{Brokers: cluster.ListenAddrs(), Topics: []string{"events"}, Group: "g",
		CommitTimeout: 200 * time.Millisecond}) // its last commit, at the stop, cannot be made: short
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	echo := core.ProcessorFunc(func(c *core.Cycle, ev any) error { c.Emit("out", ev); return nil })
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "input", Source: ks, QueueSize: 64}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"input"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: echo}}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := console.New(console.Config{Engine: e, Status: func(io.Writer) error { return nil },
		Probes: map[string]console.Probe{"input": ks.Ping}, ProbeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	caughtUp := e.When(func(st engine.Status) bool { return st.Feeds[0].State == engine.StateCaughtUp })
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Its last commit cannot be made, the broker is gone: its result
		// is not this test's, and the stop is bounded short.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Stop(ctx)
	}()
	select {
	case <-caughtUp: // the group joined, the partition read to its end: the client is up
	case <-time.After(30 * time.Second):
		t.Fatalf("not caught up within 30s: %+v", e.Status().Feeds[0])
	}
	w.Beat()
	readyz := func() (int, console.Readiness) {
		rw := httptest.NewRecorder()
		w.ServeHTTP(rw, httptest.NewRequest(http.MethodGet, console.PathReadyz, nil))
		var rd console.Readiness
		if err := json.Unmarshal(rw.Body.Bytes(), &rd); err != nil {
			t.Fatal(err)
		}
		return rw.Code, rd
	}
	if code, rd := readyz(); code != http.StatusOK || rd.State != console.StateRunning {
		t.Fatalf("readyz with the broker up: %d %+v", code, rd)
	}
	cluster.Close()
	code, rd := readyz()
	if code != http.StatusServiceUnavailable || rd.State != console.StateUnreachable || len(rd.Feeds) != 1 || rd.Feeds[0].State != console.StateUnreachable {
		t.Errorf("readyz with the broker stopped: %d %+v, want 503 unreachable", code, rd)
	}
}
