package golden_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/golden"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// afterApp sets timers. Each word of a line is a delay ("1h"), or a delay
// and a follow-up ("1h+30m": when that timer fires, it sets one of 30m),
// or another word, which it emits. It emits each timer it sets and each
// timer that fires.
type afterApp struct{ then map[int]time.Duration }

func (a *afterApp) set(c *core.Cycle, d time.Duration) int {
	n := c.After(d)
	c.Emit("out", fmt.Sprintf("set timer %d: %s", n, d))
	return n
}

func (a *afterApp) OnEvent(c *core.Cycle, ev any) error {
	for _, w := range strings.Fields(ev.(string)) {
		first, then, _ := strings.Cut(w, "+")
		d, err := time.ParseDuration(first)
		if err != nil {
			c.Emit("out", "got "+w)
			continue
		}
		n := a.set(c, d)
		if then != "" {
			if a.then[n], err = time.ParseDuration(then); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *afterApp) OnTimer(c *core.Cycle, n int) error {
	c.Emit("out", fmt.Sprintf("timer %d fired", n))
	if d, ok := a.then[n]; ok {
		delete(a.then, n)
		a.set(c, d)
	}
	return nil
}

// rearming sets a timer of a second on every line and every timer: its
// timers never end.
type rearming struct{}

func (rearming) OnEvent(c *core.Cycle, _ any) error { c.After(time.Second); return nil }
func (rearming) OnTimer(c *core.Cycle, _ int) error { c.After(time.Second); return nil }

func timerApps() []core.App {
	return []core.App{
		{Name: "after", Decode: apps.Decode, New: func(map[string]string) (core.Processor, error) {
			return &afterApp{then: map[int]time.Duration{}}, nil
		}},
		{Name: "rearming", Decode: apps.Decode, New: func(map[string]string) (core.Processor, error) { return rearming{}, nil }},
	}
}

// timerCase writes a case of app over input into a new folder.
func timerCase(t *testing.T, app, input string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, app), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{golden.CaseFile: `{"app": "` + app + `"}`, golden.InputFile: input} {
		if err := os.WriteFile(filepath.Join(dir, app, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// recorded lists a recording's TIMER rows and outputs, in row order: "TIMER
// n" for a timer cycle, the payload for an output.
func recorded(t *testing.T, path string) []string {
	t.Helper()
	r, err := csvstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for e, err := range r.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case store.KindTimer:
			got = append(got, fmt.Sprintf("TIMER %d", e.Seq))
		case store.KindOutput:
			got = append(got, strings.Trim(string(e.Payload), `"`))
		case store.KindInline:
			got = append(got, "line "+string(e.Payload))
		}
	}
	return got
}

// updateInBubble runs golden.Update inside a synctest bubble, whose clock
// moves only when every goroutine of the run waits on it, and returns how
// far that clock moved.
func updateInBubble(t *testing.T, dir string) (moved time.Duration, err error) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err = golden.Update(dir, timerApps()...)
		moved = time.Since(start)
	})
	return moved, err
}

// TestAGoldenCaseWithAnHourTimerIsRecordedWithoutWaitingForIt: a case
// whose app sets After(1h) on its first line is recorded with the timer
// fired, and its output, before the second line, and checks clean. The
// update runs in a synctest bubble: had anything waited for the timer on
// the system clock, the bubble's clock would have moved an hour (or the
// update would have timed out); it moved by the engine's own short polls.
func TestAGoldenCaseWithAnHourTimerIsRecordedWithoutWaitingForIt(t *testing.T) {
	dir := timerCase(t, "after", "1h\nnext\n")
	moved, err := updateInBubble(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the bubble's clock moved %s", moved)
	if moved >= time.Minute {
		t.Errorf("the update waited %s on the (bubble's) system clock, want no wait for the timer", moved)
	}
	got := recorded(t, filepath.Join(dir, "after", golden.Recording))
	want := []string{`line "1h"`, "set timer 1: 1h0m0s", "TIMER 1", "timer 1 fired", `line "next"`, "got next"}
	if !slices.Equal(got, want) {
		t.Errorf("recorded\n%q\nwant\n%q", got, want)
	}
	golden.Check(t, dir, timerApps()...)
}

// TestTimersFireInDueOrderEachAtItsDueTime: the timer clock jumps to each
// timer's due time in turn, so a timer set when another fires is due after
// that one's due time, not after all the others: 2h and 1h+30m set timers
// 1 (due 2h) and 2 (due 1h), and 2 sets 3 (due 1h30m): they fire 2, 3, 1.
// They are on the last line, so this also proves the run ends only once
// every timer fired.
func TestTimersFireInDueOrderEachAtItsDueTime(t *testing.T) {
	dir := timerCase(t, "after", "2h 1h+30m\n")
	if _, err := updateInBubble(t, dir); err != nil {
		t.Fatal(err)
	}
	got := recorded(t, filepath.Join(dir, "after", golden.Recording))
	want := []string{`line "2h 1h+30m"`, "set timer 1: 2h0m0s", "set timer 2: 1h0m0s",
		"TIMER 2", "timer 2 fired", "set timer 3: 30m0s",
		"TIMER 3", "timer 3 fired",
		"TIMER 1", "timer 1 fired"}
	if !slices.Equal(got, want) {
		t.Errorf("recorded\n%q\nwant\n%q", got, want)
	}
	golden.Check(t, dir, timerApps()...)
}

// TestTimersThatRearmWithoutEndFailTheUpdate: a processor whose every timer
// sets another cannot be recorded (its line's timers never all fire):
// Update fails with ErrRecord instead of hanging, and writes no recording.
func TestTimersThatRearmWithoutEndFailTheUpdate(t *testing.T) {
	dir := timerCase(t, "rearming", "a\nb\n")
	_, err := updateInBubble(t, dir)
	if !errors.Is(err, golden.ErrRecord) {
		t.Fatalf("Update: %v, want ErrRecord", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "rearming", golden.Recording)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a recording was written: %v", err)
	}
}
