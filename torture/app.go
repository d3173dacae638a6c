package torture

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// AppName is the name of the harness's own app (App).
const AppName = "torture"

// App is the harness's own app, a keyed counter with timers and a
// snapshot: a line "KEY,ID" counts ID for KEY and emits {"key","id","n"}
// (n: how many lines of KEY this processor has seen, its snapshot
// included); a line "timer,ID" sets a timer that emits {"timer","keys"}
// when it fires; anything else emits {"rejected"}. Its key is the line's
// first field, so its outputs depend only on the key's lines: a run on
// any number of key-ordered workers gives the same outputs. It takes the
// option "start" (a count every key begins at, shown in its START
// snapshot). Its processor is not safe for concurrent use; the App value
// is.
var App = core.App{Name: AppName, New: newTally, Key: key, Decode: decodeLine}

// tally is App's processor: the count of lines per key.
type tally struct {
	start  int64
	counts map[string]int64
}

func newTally(options map[string]string) (core.Processor, error) {
	t := &tally{counts: map[string]int64{}}
	for k, v := range options {
		switch k {
		case "start":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: torture: start %q is not a count", core.ErrOption, v)
			}
			t.start = n
		default:
			return nil, fmt.Errorf("%w: torture takes no option %q (only start)", core.ErrOption, k)
		}
	}
	return t, nil
}

// tallyOutput is what the app emits for a counted line, to sink "tally".
type tallyOutput struct {
	Key string `json:"key"`
	ID  int64  `json:"id"`
	N   int64  `json:"n"`
}

// timerOutput is what the app's timer emits.
type timerOutput struct {
	Timer int `json:"timer"`
	Keys  int `json:"keys"`
}

func (t *tally) OnEvent(c *core.Cycle, ev any) error {
	line, _ := ev.(string)
	k, v, ok := strings.Cut(line, ",")
	id, err := strconv.ParseInt(v, 10, 64)
	switch {
	case !ok || err != nil:
		c.Emit("tally", map[string]string{"rejected": line})
	case k == "timer":
		c.After(time.Millisecond)
	default:
		t.counts[k]++
		c.Emit("tally", tallyOutput{Key: k, ID: id, N: t.start + t.counts[k]})
	}
	return nil
}

func (t *tally) OnTimer(c *core.Cycle, n int) error {
	c.Emit("tally", timerOutput{Timer: n, Keys: len(t.counts)})
	return nil
}

type tallySnapshot struct {
	Start  int64            `json:"start"`
	Counts map[string]int64 `json:"counts"`
}

func (t *tally) Snapshot() ([]byte, error) {
	return json.Marshal(tallySnapshot{Start: t.start, Counts: t.counts})
}

func (t *tally) Restore(b []byte) error {
	var s tallySnapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("torture: snapshot: %w", err)
	}
	t.start, t.counts = s.Start, s.Counts
	if t.counts == nil {
		t.counts = map[string]int64{}
	}
	return nil
}

// key is the first field of a line.
func key(item any) string {
	line, _ := item.(string)
	k, _, _ := strings.Cut(line, ",")
	return k
}

// decodeLine decodes a recorded input payload, a JSON string, into the line.
func decodeLine(payload []byte) (any, error) {
	var s string
	if err := json.Unmarshal(payload, &s); err != nil {
		return nil, fmt.Errorf("torture: input payload %.60q is not a JSON string: %w", payload, err)
	}
	return s, nil
}
