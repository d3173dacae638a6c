package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
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
