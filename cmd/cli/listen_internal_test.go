package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// --log-format json writes each warning as one JSON object with the run's
// keys first: run (the recording), feed and group (the engine's); a
// source's own group attribute (a Kafka consumer group) is kafka_group.
// Below Warn nothing is written, as in text.
func TestJSONLogsCarryTheRunsKeys(t *testing.T) {
	var b bytes.Buffer
	log := opsConfig{logFormat: logJSON}.logger(&b, "blackbox", "rec.csv")
	log.Info("not a warning")
	log.Warn("kafkasource: commit failed", "group", "consumers", "err", "broker down")
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%q: %v", b.String(), err)
	}
	want := map[string]any{"level": "WARN", "msg": "kafkasource: commit failed", "run": "rec.csv", "feed": feedName,
		"group": groupName, "kafka_group": "consumers", "err": "broker down"}
	delete(got, "time")
	if len(got) != len(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if n := bytes.Count(b.Bytes(), []byte("\n")); n != 1 {
		t.Errorf("%d lines, want 1 (the warning)", n)
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
