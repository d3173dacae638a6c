package testkit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/testkit"
)

// window counts the lines of each key ("KEY,N" adds N); the first line of
// a key opens a window that a timer closes an hour later, emitting the
// key's total to "closed". Each line emits the running total to "totals".
type window struct {
	totals map[string]int
	keys   map[int]string // timer number -> its key
}

func (w *window) OnEvent(c *core.Cycle, ev any) error {
	k, v, _ := strings.Cut(ev.(string), ",")
	n, err := strconv.Atoi(v)
	if err != nil {
		return err
	}
	if _, open := w.totals[k]; !open {
		w.keys[c.After(time.Hour)] = k
	}
	w.totals[k] += n
	c.Emit("totals", fmt.Sprintf("%s=%d", k, w.totals[k]))
	return nil
}

func (w *window) OnTimer(c *core.Cycle, n int) error {
	k := w.keys[n]
	c.Emit("closed", fmt.Sprintf("%s closed at %d", k, w.totals[k]))
	delete(w.totals, k)
	return nil
}

func windowApp() core.App {
	key := func(item any) string { k, _, _ := strings.Cut(item.(string), ","); return k }
	return core.App{Name: "window",
		Decode: func(b []byte) (any, error) { var s string; err := json.Unmarshal(b, &s); return s, err },
		KeyFor: func(map[string]string) (func(any) string, error) { return key, nil },
		New: func(o map[string]string) (core.Processor, error) {
			if len(o) > 0 {
				return nil, fmt.Errorf("%w: window takes no option", core.ErrOption)
			}
			return &window{totals: map[string]int{}, keys: map[int]string{}}, nil
		}}
}

// TestARunFiresItsTimersWhenTheTestMovesTheClock: items sent are handled
// by Idle; no window closes until the clock is moved past it, and then
// every one does; the recording replays identical; on two workers the
// outputs are the same.
func TestARunFiresItsTimersWhenTheTestMovesTheClock(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			r := testkit.Start(t, testkit.Config{App: windowApp(), Workers: workers})
			r.Send("alice,1", "bob,2", "alice,3")
			r.Idle()
			totals := r.Sink().Outputs("totals")
			slices.SortFunc(totals, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
			if want := []any{"alice=1", "alice=4", "bob=2"}; !slices.Equal(totals, want) {
				t.Errorf("totals %q, want %q", totals, want)
			}
			if got := r.Sink().Outputs("closed"); len(got) != 0 {
				t.Errorf("closed before the clock moved: %q", got)
			}
			r.Advance(59 * time.Minute)
			if got := r.Sink().Outputs("closed"); len(got) != 0 {
				t.Errorf("closed before the hour: %q", got)
			}
			r.Advance(time.Minute)
			closed := r.Sink().Outputs("closed")
			slices.SortFunc(closed, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
			if want := []any{"alice closed at 4", "bob closed at 2"}; !slices.Equal(closed, want) {
				t.Errorf("closed %q, want %q", closed, want)
			}
			rec := r.Stop()
			rep := testkit.ReplaysIdentical(t, rec, windowApp())
			var inputs int64
			for _, p := range rep.Processors {
				inputs += p.Inputs
			}
			if inputs != 5 { // three lines, two timers
				t.Errorf("replayed %d inputs, want 5", inputs)
			}
		})
	}
}

// TestStopFiresWhatIsDueAndRecordsIt: a timer the clock passed before Stop
// fires in the stop, recorded (the replay compares it).
func TestStopFiresWhatIsDueAndRecordsIt(t *testing.T) {
	r := testkit.Start(t, testkit.Config{App: windowApp()})
	r.Send("alice,1")
	r.Idle()
	r.Clock().Advance(2 * time.Hour) // no Idle: Stop finds the timer due
	rec := r.Stop()
	if got := r.Sink().Outputs("closed"); !slices.Equal(got, []any{"alice closed at 1"}) {
		t.Errorf("closed %q, want alice's window", got)
	}
	testkit.ReplaysIdentical(t, rec, windowApp())
}

// TestASinkWithOnlyRefusesOtherSinks: Only names the sinks a processor may
// emit to; another fails the write with ErrUnknownSink.
func TestASinkWithOnlyRefusesOtherSinks(t *testing.T) {
	s := &testkit.Sink{Only: []string{"totals"}}
	if err := s.Write("p", "totals", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Write("p", "other", 2); !errors.Is(err, testkit.ErrUnknownSink) {
		t.Errorf("write to another sink: %v, want ErrUnknownSink", err)
	}
	if got, want := s.All(), []testkit.Output{{Processor: "p", Sink: "totals", Value: 1}}; !slices.Equal(got, want) {
		t.Errorf("all %v, want %v", got, want)
	}
}

// TestAClockMovesOnlyForward: Advance and Set move it forward, never back.
func TestAClockMovesOnlyForward(t *testing.T) {
	c := testkit.NewClock(testkit.Epoch)
	for _, tc := range []struct {
		move func()
		want time.Time
	}{
		{func() {}, testkit.Epoch},
		{func() { c.Advance(time.Hour) }, testkit.Epoch.Add(time.Hour)},
		{func() { c.Advance(-time.Minute) }, testkit.Epoch.Add(time.Hour)},
		{func() { c.Set(testkit.Epoch) }, testkit.Epoch.Add(time.Hour)},
		{func() { c.Set(testkit.Epoch.Add(2 * time.Hour)) }, testkit.Epoch.Add(2 * time.Hour)},
	} {
		tc.move()
		if got := c.Now(); !got.Equal(tc.want) {
			t.Errorf("now %v, want %v", got, tc.want)
		}
	}
}

// TestGoldenRecordsThenChecksACase: with update the cases are recorded,
// then checked; a check finds them identical.
func TestGoldenRecordsThenChecksACase(t *testing.T) {
	dir := t.TempDir()
	c := filepath.Join(dir, "two-keys")
	if err := os.Mkdir(c, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"case.json": `{"app": "window"}`, "input.txt": "alice,1\nbob,2\nalice,3\n"} {
		if err := os.WriteFile(filepath.Join(c, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Golden(t, dir, true, windowApp())
	if _, err := os.Stat(filepath.Join(c, "recording.csv")); err != nil {
		t.Fatalf("no recording: %v", err)
	}
	testkit.Golden(t, dir, false, windowApp())
}
