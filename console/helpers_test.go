package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// t0 is the window's manual clock's start.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The operators of the tests' token files.
const (
	aliceToken = "alice-0123456789abcdef"
	bobToken   = "bob-0123456789abcdef"
)

// testRun is a recorded run with its window: feed "input" (a memsource log
// of "1".."20", closed) to group g's processor p, which echoes each item and
// waits in item 1 until gate opens: it completes nothing before.
type testRun struct {
	e     *engine.Engine
	rec   *recorder.Recorder
	m     *store.Memory
	log   *memsource.Log
	gate  *testutil.Gate
	clock *manualClock
	w     *console.Window
}

// startRun starts a testRun (inside the caller's synctest bubble); feed
// adjusts the feed's configuration, cfg the window's.
func startRun(t *testing.T, feed func(*engine.FeedConfig), cfg func(*console.Config)) *testRun {
	t.Helper()
	r := &testRun{log: memsource.NewLog(), gate: testutil.NewGate(t), m: store.NewMemory(), clock: &manualClock{now: t0}}
	for i := 1; i <= 20; i++ {
		r.log.Append(strconv.Itoa(i))
	}
	r.log.Close()
	p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		if ev == "1" {
			r.gate.Wait()
		}
		c.Emit("out", ev)
		return nil
	})
	var err error
	r.rec, err = recorder.New(r.m, recorder.Options{Clock: core.NewStepClock(t0, time.Second),
		Apps: map[string]string{"p": "echo"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	fc := engine.FeedConfig{Name: "input", Source: r.log.Source(), QueueSize: 32}
	if feed != nil {
		feed(&fc)
	}
	r.e, err = engine.New(engine.Config{
		Feeds:    []engine.FeedConfig{fc},
		Groups:   []engine.GroupConfig{{Name: "g", Feeds: []string{"input"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: p}}}},
		Observer: r.rec.Observer(),
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	wc := console.Config{Engine: r.e, Clock: r.clock, Audit: r.rec,
		Status: func(w io.Writer) error { return json.NewEncoder(w).Encode(r.e.Status()) },
		Tokens: console.Tokens{{Name: "alice", Secret: aliceToken}, {Name: "bob", Secret: bobToken}}}
	if cfg != nil {
		cfg(&wc)
	}
	if r.w, err = console.New(wc); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.gate.Open()
		r.e.Stop(context.Background())
		r.rec.Close()
	})
	return r
}

// get serves GET path and returns the status and the body.
func (r *testRun) get(t *testing.T, path string) (int, string) {
	t.Helper()
	rw := httptest.NewRecorder()
	r.w.ServeHTTP(rw, httptest.NewRequest(http.MethodGet, path, nil))
	return rw.Code, rw.Body.String()
}

// post serves a control action with token ("" for none) and returns the
// status and the answer.
func (r *testRun) post(t *testing.T, token string, action console.Action, req console.Request) (int, console.Answer) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	hr := httptest.NewRequest(http.MethodPost, console.PathControl+string(action), bytes.NewReader(body))
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	rw := httptest.NewRecorder()
	r.w.ServeHTTP(rw, hr)
	var ans console.Answer
	if rw.Code != http.StatusNotFound || strings.HasPrefix(rw.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rw.Body.Bytes(), &ans); err != nil {
			t.Fatalf("%s: answer %q: %v", action, rw.Body.String(), err)
		}
	}
	return rw.Code, ans
}

// binding is the run's binding of g to input.
func (r *testRun) binding(t *testing.T) console.Binding {
	t.Helper()
	code, body := r.get(t, console.PathBindings)
	var bs []console.Binding
	if err := json.Unmarshal([]byte(body), &bs); code != http.StatusOK || err != nil || len(bs) != 1 {
		t.Fatalf("bindings: %d %q (%v): want one binding", code, body, err)
	}
	return bs[0]
}

// controls reads the CONTROL rows of the recording.
func (r *testRun) controls(t *testing.T) []store.Control {
	t.Helper()
	var out []store.Control
	for e, err := range r.m.ReadOnly().Rows() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != store.KindControl {
			continue
		}
		c, err := store.ControlOf(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}
