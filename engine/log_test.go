package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// jsonLogs is a JSON slog handler's output, read line by line. Safe for
// concurrent use.
type jsonLogs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *jsonLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// with returns the records whose message holds sub, decoded.
func (l *jsonLogs) with(t *testing.T, sub string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if msg, _ := m["msg"].(string); strings.Contains(msg, sub) {
			delete(m, "time")
			delete(m, "level")
			delete(m, "msg")
			out = append(out, m)
		}
	}
	return out
}

// A warning that concerns an item carries its feed, its group, its seq
// and, for an item with a source position, that position (the recording's
// key and offset) as attributes: a positioned item a processor failed, a
// pushed item a full queue dropped.
func TestAnItemsWarningCarriesItsFeedGroupSeqAndPosition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &jsonLogs{}
		gate := newTurnstile(false)
		failing := core.ProcessorFunc(func(*core.Cycle, any) error { return errors.New("bad line") })
		e := start(t, engine.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil)),
			Feeds: []engine.FeedConfig{
				{Name: "lines", Policy: engine.Pause(), QueueSize: 8},
				{Name: "pushed", Policy: engine.DropAfterSpin(0), QueueSize: 1},
			},
			Groups: []engine.GroupConfig{
				{Name: "parse", Feeds: []string{"lines"}, Processors: procs("parser", failing)},
				{Name: "slow", Feeds: []string{"pushed"}, Processors: procs("held", gate)},
			}})
		lines := e.Feed("lines")
		lines.Intake().SetCommitter(&committer{})
		if !lines.Intake().TryPublish("x", core.Position{Key: "orders/3", Offset: 41}) {
			t.Fatal("line not taken")
		}
		pushed := e.Feed("pushed")
		for i := 1; i <= 3; i++ { // 1 held in the processor, 2 queued, 3 dropped
			if err := pushed.Publish(context.Background(), i); err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				testutil.WhenBlocked(t, "item 1 taken", func() bool { return gate.enteredCount() == 1 })
			}
		}
		synctest.Wait()
		gate.openUp()
		for _, tc := range []struct {
			msg  string
			want string
		}{
			{`processor "parser" failed 1 times`, `{"feed":"lines","group":"parse","position":{"key":"orders/3","offset":41},"seq":1}`},
			{"queue slow/pushed: first drop", `{"feed":"pushed","group":"slow","seq":3}`},
		} {
			got := logs.with(t, tc.msg)
			if len(got) != 1 {
				t.Errorf("%d records %q, want 1:\n%s", len(got), tc.msg, logs.b.String())
				continue
			}
			if b, _ := json.Marshal(got[0]); string(b) != tc.want {
				t.Errorf("%q: attributes %s, want %s", tc.msg, b, tc.want)
			}
		}
	})
}

// A stall's warning carries its item's attributes too: the held item of
// a worker past StallAfter, with its source position.
func TestAStallsWarningCarriesItsItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &jsonLogs{}
		h := newHoldBack(2)
		defer h.release(2)
		e := start(t, engine.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil)), DrainTimeout: time.Second,
			Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 64}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 2, StallAfter: time.Second,
				Key:        func(item any) string { return fmt.Sprint(item) },
				Processors: []engine.ProcessorConfig{{Name: "p", New: h.processor()}}}}})
		f := e.Feed("in")
		f.Intake().SetCommitter(&committer{})
		publishAll(t, f, 1, 2)
		testutil.Advance(2 * time.Second)
		got := logs.with(t, `group "g" stalled`)
		want := `{"feed":"in","group":"g","position":{"key":"","offset":2},"seq":2}`
		if len(got) != 1 {
			t.Fatalf("%d stall warnings, want 1:\n%s", len(got), logs.b.String())
		}
		if b, _ := json.Marshal(got[0]); string(b) != want {
			t.Errorf("attributes %s, want %s", b, want)
		}
	})
}
