package cli

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// --log-format json writes each warning as one JSON object with the run's
// keys first: run (the recording), feed and group (the engine's); an
// engine's warning about an item has its own feed and group in their
// place, then its seq and position; the Kafka source's own group attribute
// (a consumer group) is kafka_group. Below Warn nothing is written, as in
// text.
func TestJSONLogsCarryTheRunsKeys(t *testing.T) {
	o := opsConfig{logFormat: logJSON}
	item := []any{slog.String(engine.LogFeed, feedName), slog.String(engine.LogGroup, groupName), slog.Int64(engine.LogSeq, 3),
		slog.Group(engine.LogPosition, slog.String("key", "orders/2"), slog.Int64("offset", 120))}
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
		want string
	}{
		{"below warn", func(l *slog.Logger) { l.Info("not a warning") }, ""},
		{"a warning", func(l *slog.Logger) { l.Warn("stop: x", "err", "disk full") },
			`{"level":"WARN","msg":"stop: x","run":"rec.csv","feed":"input","group":"main","err":"disk full"}`},
		{"the engine's, of an item", func(l *slog.Logger) { l.Warn(`blackbox engine: feed "input" seq 3: failed`, item...) },
			`{"level":"WARN","msg":"blackbox engine: feed \"input\" seq 3: failed","run":"rec.csv","feed":"input","group":"main","seq":3,"position":{"key":"orders/2","offset":120}}`},
		{"the kafka source's", func(l *slog.Logger) {
			o.kafkaLogger(l).Warn("kafkasource: commit failed", "group", "consumers", "err", "broker down")
		}, `{"level":"WARN","msg":"kafkasource: commit failed","run":"rec.csv","feed":"input","group":"main","kafka_group":"consumers","err":"broker down"}`},
		{"the kafka source's, With", func(l *slog.Logger) {
			o.kafkaLogger(l).With("group", "consumers").Warn("kafkasource: lost", "partition", "orders/2")
		}, `{"level":"WARN","msg":"kafkasource: lost","run":"rec.csv","feed":"input","group":"main","kafka_group":"consumers","partition":"orders/2"}`},
	} {
		var b bytes.Buffer
		tc.log(o.logger(&b, "blackbox", "rec.csv"))
		got := regexp.MustCompile(`"time":"[^"]*",`).ReplaceAllString(b.String(), "")
		if want := tc.want + "\n"; tc.want == "" && got != "" || tc.want != "" && got != want {
			t.Errorf("%s: %s want %s", tc.name, got, tc.want)
		}
	}
}

// In text, an engine's warning about an item is its message alone: the
// item's attributes (its feed, group, seq, position) are in the message
// already; other attributes follow it as key=value.
func TestTextLogsLeaveOutTheEnginesItemAttributes(t *testing.T) {
	var b bytes.Buffer
	l := opsConfig{logFormat: logText}.logger(&b, "blackbox", "rec.csv")
	l.Warn(`blackbox engine: feed "input" seq 3: failed`, slog.String(engine.LogFeed, feedName), slog.String(engine.LogGroup, groupName),
		slog.Int64(engine.LogSeq, 3), slog.Group(engine.LogPosition, slog.String("key", ""), slog.Int64("offset", 120)))
	l.Warn("kafkasource: commit failed", "group", "consumers")
	want := "blackbox: warning: feed \"input\" seq 3: failed\nblackbox: warning: kafkasource: commit failed group=consumers\n"
	if got := b.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// undrained names a feed whose live queue still held items read and not
// processed at the end of a stop, and how many; nil when every feed
// drained. runVerdict makes it exit 3.
func TestUndrainedIsExitThree(t *testing.T) {
	drained := engine.Status{Settled: true, Lossless: true, Feeds: []engine.FeedStatus{{Feed: "input", Drained: true}}}
	if err := undrained(drained, time.Second); err != nil {
		t.Errorf("drained: %v, want nil", err)
	}
	left := engine.Status{Settled: false, Lossless: true, Feeds: []engine.FeedStatus{{Feed: "input", Drained: false,
		Subscribers: []engine.SubscriberStatus{{Queue: "main/input", Position: 50, Dispatched: 8}, {Queue: "main/input", Position: 9, Dispatched: 3, Removed: true}}}}}
	err := undrained(left, time.Second)
	if !errors.Is(err, ErrUndrained) || !bytes.Contains([]byte(err.Error()), []byte("42 items read and not processed")) {
		t.Fatalf("undrained: %v, want ErrUndrained naming 42 items", err)
	}
	var ee *ExitError
	if v := runVerdict(recordResult{Status: drained, Undrained: err}); !errors.As(v, &ee) || ee.Code != ExitIncomplete || !errors.Is(v, ErrUndrained) {
		t.Errorf("runVerdict: %v, want exit %d wrapping ErrUndrained", v, ExitIncomplete)
	}
}

// The window's state saves are the sum of every worker's instance's own
// count of the writes of its state file (apps.Ledger.StateSaves): the
// instances the run's builder made, each counted once.
func TestSaveCountsSumTheWorkersSaves(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	build, _, err := appBuilder(apps.LedgerApp(), recordConfig{state: state, workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	saves := &saveCounts{}
	build = saves.counting(build)
	var hosts []*core.Host
	for w := range 2 {
		p, err := build(w)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, core.NewHost("ledger", p, core.NewStepClock(time.Unix(0, 0), time.Millisecond)))
	}
	for i, tc := range []struct {
		worker int
		line   string
		want   int64
	}{
		{0, "a,1", 1},
		{1, "b,2", 2},
		{0, "a,3", 3},
	} {
		if tr := hosts[tc.worker].Handle(nil, tc.line); tr.Err != nil { // no delivery: saved at once
			t.Fatal(tr.Err)
		}
		if got := saves.total(); got != tc.want {
			t.Errorf("after line %d (%q on worker %d): %d saves, want %d", i+1, tc.line, tc.worker, got, tc.want)
		}
	}
}
