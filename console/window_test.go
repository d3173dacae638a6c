package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bbtest "github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -run %s -update to accept):\n%s", path, t.Name(), got)
	}
}

// recording is a Recording of fixed counts.
func recording() console.Recording {
	r := console.Recording{Rows: map[string]int64{"META": 1, "START": 1, "INLINE": 5}, Appends: 3, Bytes: 4096}
	for _, rows := range []int{1, 1, 5} {
		r.Batches.Add(rows)
	}
	return r
}

// partitions is one Kafka partition's standing.
// partitions is two Kafka partitions' standing: one whose end the brokers
// listed (its lag is measured from it), one whose end they did not (its
// lag is the last fetch's).
func partitions(context.Context) []console.Partition {
	return []console.Partition{{Topic: "events", Partition: 0, Committed: 5, HighWatermark: 20, Lag: 15, Lost: 1, End: 26},
		{Topic: "events", Partition: 1, Committed: 3, HighWatermark: 9, Lag: 6, End: -1}}
}

// The exposition of a run held in its first item is the
// golden one, byte for byte (a synctest bubble and a manual clock: every
// figure is the same each run), and lints clean. The bubble's clock moves
// 3s after the source published: the oldest uncommitted item is 3s old.
func TestMetricsExposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, func(c *console.Config) {
			c.Recording = recording
			c.Partitions = map[string]func(context.Context) []console.Partition{"input": partitions}
			c.Files = map[string]func() console.FileSkips{"input": func() console.FileSkips { return console.FileSkips{HoleBytes: 4096, Replaced: 1} }}
			c.StateSaves = map[string]func() int64{"g": func() int64 { return 2 }}
		})
		synctest.Wait() // the source published 1-20; p waits in 1
		// The bubble's clock moves 3s (no wall time).
		time.Sleep(3 * time.Second)
		synctest.Wait()
		r.w.Beat()
		code, body := r.get(t, console.PathMetrics)
		if code != http.StatusOK {
			t.Fatalf("metrics: %d %s", code, body)
		}
		golden(t, "metrics.txt", []byte(body))
		problems, err := testutil.CollectAndLint(r.w.Registry())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	})
}

// Every series the exposition can have is in docs/OPERATIONS.md, and the
// document's section on the window names no series the window does not
// have (the rest of it names other things blackbox_: PostgreSQL tables).
func TestOperationsDocListsEverySeries(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, window, ok := strings.Cut(string(doc), "\n## The operator window of a run\n")
	if !ok {
		t.Fatal("docs/OPERATIONS.md has no section on the operator window")
	}
	window, _, _ = strings.Cut(window, "\n## PostgreSQL store\n")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(blackbox_[a-z_]+)`").FindAllStringSubmatch(window, -1) {
		documented[m[1]] = true
	}
	var have []string
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, func(c *console.Config) {
			c.Recording = recording
			c.Partitions = map[string]func(context.Context) []console.Partition{"input": partitions}
			c.Files = map[string]func() console.FileSkips{"input": func() console.FileSkips { return console.FileSkips{} }}
			c.StateSaves = map[string]func() int64{"g": func() int64 { return 0 }}
		})
		synctest.Wait()
		_, body := r.get(t, console.PathMetrics)
		for _, m := range regexp.MustCompile(`(?m)^# TYPE (blackbox_[a-z_]+) `).FindAllStringSubmatch(body, -1) {
			have = append(have, m[1])
		}
	})
	names := map[string]bool{}
	for _, n := range have {
		names[n] = true
		if !documented[n] {
			t.Errorf("series %s is not in docs/OPERATIONS.md", n)
		}
	}
	for _, n := range console.SeriesNames() {
		if !documented[n] {
			t.Errorf("series %s (described, not exposed in this run) is not in docs/OPERATIONS.md", n)
		}
		names[n] = true
	}
	for n := range documented {
		if !names[n] {
			t.Errorf("docs/OPERATIONS.md names %s, which the window does not have", n)
		}
	}
}

// /livez is the run loop's heartbeat: 200 while the loop beats, whatever
// the run's state (a processor held, a full queue pausing the feed), 503
// once it has not beaten for LiveAfter.
func TestLivezIsTheHeartbeatOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, func(fc *engine.FeedConfig) { fc.QueueSize = 4 }, func(c *console.Config) { c.LiveAfter = 10 * time.Second })
		synctest.Wait() // p waits in 1: the sink is held, the queue full, the feed paused
		if st := r.e.Status(); !st.Feeds[0].Paused {
			t.Fatalf("feed %+v: want it paused (the queue full behind the held item)", st.Feeds[0])
		}
		if code, body := r.get(t, console.PathLivez); code != http.StatusOK {
			t.Errorf("livez before the first beat: %d %q, want 200 (starting)", code, body)
		}
		for range 3 {
			r.clock.Advance(9 * time.Second)
			r.w.Beat()
			if code, body := r.get(t, console.PathLivez); code != http.StatusOK {
				t.Errorf("livez with the sink held: %d %q, want 200", code, body)
			}
		}
		r.clock.Advance(11 * time.Second)
		if code, _ := r.get(t, console.PathLivez); code != http.StatusServiceUnavailable {
			t.Errorf("livez 11s after the last beat: %d, want 503", code)
		}
	})
}

// /readyz: starting before the loop's first beat, running after, latched
// while a binding is LATCHED (and running again once cleared), draining
// once Drain was called, killed once killed.
func TestReadyzStates(t *testing.T) {
	type ready struct {
		code  int
		state string
	}
	read := func(t *testing.T, r *testRun) ready {
		code, body := r.get(t, console.PathReadyz)
		var rd console.Readiness
		if err := json.Unmarshal([]byte(body), &rd); err != nil {
			t.Fatalf("readyz %q: %v", body, err)
		}
		if rd.Ready != (code == http.StatusOK) {
			t.Errorf("readyz %d with ready %v", code, rd.Ready)
		}
		return ready{code, rd.State}
	}
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		synctest.Wait()
		if got, want := read(t, r), (ready{503, console.StateStarting}); got != want {
			t.Errorf("before the first beat: %+v, want %+v", got, want)
		}
		r.w.Beat()
		if got, want := read(t, r), (ready{200, console.StateRunning}); got != want {
			t.Errorf("running: %+v, want %+v", got, want)
		}
		r.w.Drain()
		if got, want := read(t, r), (ready{503, console.StateDraining}); got != want {
			t.Errorf("draining: %+v, want %+v", got, want)
		}
		if code, ans := r.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "x", Indefinite: true}); code != http.StatusServiceUnavailable || ans.Applied {
			t.Errorf("pause while draining: %d %+v, want 503", code, ans)
		}
		if err := r.e.Kill("test"); err != nil {
			t.Fatal(err)
		}
		if got, want := read(t, r), (ready{503, console.StateKilled}); got != want {
			t.Errorf("killed: %+v, want %+v", got, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// A drop policy that latches at its first loss, on a queue of 4
		// behind the held item 1: it drops, and latches.
		r := startRun(t, func(fc *engine.FeedConfig) {
			fc.QueueSize, fc.Policy, fc.Latch = 4, engine.DropAfterSpin(0), engine.LatchEveryLoss
		}, nil)
		synctest.Wait()
		r.w.Beat()
		if got, want := read(t, r), (ready{503, console.StateLatched}); got != want {
			t.Fatalf("latched: %+v, want %+v", got, want)
		}
		if code, ans := r.post(t, aliceToken, console.ActionClear, console.Request{Feed: "input", Group: "g", Reason: "drops accepted"}); code != http.StatusOK || !ans.Applied {
			t.Fatalf("clear: %d %+v", code, ans)
		}
		if got, want := read(t, r), (ready{200, console.StateRunning}); got != want {
			t.Errorf("cleared: %+v, want %+v", got, want)
		}
		if cs := r.controls(t); len(cs) != 1 || cs[0].Action != store.ControlClear || cs[0].Who != "alice" {
			t.Errorf("CONTROL rows %+v, want alice's clear", cs)
		}
	})
}

// A probe that fails (a Kafka source whose brokers do not answer) makes
// its feed, and the run, unreachable.
func TestReadyzUnreachableProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := errors.New("dial tcp 127.0.0.1:9: connection refused")
		var probeErr error
		r := startRun(t, nil, func(c *console.Config) {
			c.Probes = map[string]console.Probe{"input": func(ctx context.Context) error { return probeErr }}
		})
		synctest.Wait()
		r.w.Beat()
		if code, _ := r.get(t, console.PathReadyz); code != http.StatusOK {
			t.Errorf("readyz with the broker up: %d, want 200", code)
		}
		probeErr = fmt.Errorf("%w: no client yet", console.ErrStarting)
		if code, body := r.get(t, console.PathReadyz); code != http.StatusServiceUnavailable || !strings.Contains(body, `"state":"starting"`) {
			t.Errorf("readyz before the source began: %d %s, want 503 starting", code, body)
		}
		probeErr = down
		code, body := r.get(t, console.PathReadyz)
		var rd console.Readiness
		if err := json.Unmarshal([]byte(body), &rd); err != nil {
			t.Fatal(err)
		}
		if code != http.StatusServiceUnavailable || rd.State != console.StateUnreachable || len(rd.Feeds) != 1 ||
			rd.Feeds[0].State != console.StateUnreachable || !strings.Contains(rd.Feeds[0].Reason, down.Error()) {
			t.Errorf("readyz with the broker down: %d %+v, want 503 unreachable naming the error", code, rd)
		}
	})
}

// /status serves Config.Status's bytes as they are.
func TestStatusIsConfigStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		synctest.Wait()
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(r.e.Status()); err != nil {
			t.Fatal(err)
		}
		if code, body := r.get(t, console.PathStatus); code != http.StatusOK || body != want.String() {
			t.Errorf("status: %d %q, want %q", code, body, want.String())
		}
	})
}

// Without tokens the control endpoints are not served (404); with them, a
// request without a known token is refused (401) and does nothing.
func TestControlNeedsAToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, func(c *console.Config) { c.Tokens = nil })
		synctest.Wait()
		if code, _ := r.post(t, aliceToken, console.ActionKill, console.Request{Reason: "x", Finish: true}); code != http.StatusNotFound {
			t.Errorf("control without tokens: %d, want 404", code)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		synctest.Wait()
		for _, tok := range []string{"", "alice-0123456789abcdeX", "alice"} {
			if code, ans := r.post(t, tok, console.ActionKill, console.Request{Reason: "x", Finish: true}); code != http.StatusUnauthorized || ans.Applied {
				t.Errorf("token %q: %d %+v, want 401", tok, code, ans)
			}
		}
		if st := r.e.Status(); st.Killed != "" {
			t.Errorf("killed %q by a request without a token", st.Killed)
		}
		if cs := r.controls(t); len(cs) != 0 {
			t.Errorf("CONTROL rows %+v, want none", cs)
		}
	})
}

// Bad requests are refused with the Answer's codes and change nothing.
func TestControlRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		synctest.Wait()
		past := t0.Add(-time.Minute)
		for _, c := range []struct {
			name   string
			action console.Action
			req    console.Request
			code   int
		}{
			{"unknown action", "explode", console.Request{Reason: "x"}, http.StatusNotFound},
			{"no reason", console.ActionPause, console.Request{Feed: "input", Group: "g", Indefinite: true}, http.StatusBadRequest},
			{"no group", console.ActionPause, console.Request{Feed: "input", Reason: "x", Indefinite: true}, http.StatusBadRequest},
			{"pause without a deadline", console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "x"}, http.StatusBadRequest},
			{"pause until the past", console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "x", Until: &past}, http.StatusBadRequest},
			{"unknown group", console.ActionPause, console.Request{Feed: "input", Group: "h", Reason: "x", Indefinite: true}, http.StatusNotFound},
			{"clear, not latched", console.ActionClear, console.Request{Feed: "input", Group: "g", Reason: "x"}, http.StatusUnprocessableEntity},
			{"release without a generation", console.ActionRelease, console.Request{Feed: "input", Group: "g", Reason: "x"}, http.StatusBadRequest},
			{"seek, not fenced", console.ActionSeek, console.Request{Feed: "input", Group: "g", Reason: "x", Generation: r.binding(t).Generation, Latest: true}, http.StatusUnprocessableEntity},
			{"kill abandoning, which this run does not", console.ActionKill, console.Request{Reason: "x"}, http.StatusUnprocessableEntity},
		} {
			if code, ans := r.post(t, aliceToken, c.action, c.req); code != c.code || ans.Applied || ans.Error == "" {
				t.Errorf("%s: %d %+v, want %d and an error", c.name, code, ans, c.code)
			}
		}
		if b := r.binding(t); b.Fenced {
			t.Errorf("binding %+v fenced by a refused request", b)
		}
		if cs := r.controls(t); len(cs) != 0 {
			t.Errorf("CONTROL rows %+v, want none", cs)
		}
	})
}

// A pause with a deadline fences the group until the window's clock passes
// it (the heartbeat ends it); each is a CONTROL row: alice's pause with its
// deadline, then the window's resume.
func TestPauseUntilADeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		synctest.Wait()
		until := t0.Add(5 * time.Minute)
		code, ans := r.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "deploy", Until: &until})
		if code != http.StatusOK || !ans.Applied || ans.Who != "alice" || !ans.At.Equal(t0) {
			t.Fatalf("pause: %d %+v", code, ans)
		}
		if b := r.binding(t); !b.Fenced || b.PausedUntil == nil || !b.PausedUntil.Equal(until) {
			t.Fatalf("binding %+v: want fenced until %s", b, until)
		}
		r.clock.Advance(4 * time.Minute)
		r.w.Beat()
		if b := r.binding(t); !b.Fenced {
			t.Fatalf("binding %+v: unfenced before its deadline", b)
		}
		r.clock.Advance(time.Minute)
		r.w.Beat()
		if b := r.binding(t); b.Fenced || b.PausedUntil != nil {
			t.Fatalf("binding %+v: still paused at its deadline", b)
		}
		got := r.controls(t)
		want := []store.Control{
			{Feed: "input", Group: "g", Action: store.ControlPause, Who: "alice", Reason: "deploy", At: t0, Before: 0, After: 0, Until: until},
			{Feed: "input", Group: "g", Action: store.ControlResume, Who: console.Operator, Reason: "the pause ended (its deadline passed)", At: until, Before: 0, After: 0},
		}
		if !slices.Equal(got, want) {
			t.Errorf("CONTROL rows\n%+v\nwant\n%+v", got, want)
		}
	})
}

// An operator pauses g (indefinitely), releases what its queue holds,
// resumes it; another seeks: dry run first (nothing done, nothing
// recorded), an apply naming a stale plan refused (409), the apply naming
// the plan done. Each action applied is one CONTROL row with the operator,
// the reason and the positions.
func TestReleaseSeekResumeAreRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		synctest.Wait() // p waits in 1
		ok := func(code int, ans console.Answer) console.Answer {
			t.Helper()
			if code != http.StatusOK || !ans.Applied {
				t.Fatalf("%s: %d %+v", ans.Action, code, ans)
			}
			return ans
		}
		ok(r.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "poison", Indefinite: true}))
		gen := r.binding(t).Generation
		rel := ok(r.post(t, aliceToken, console.ActionRelease, console.Request{Feed: "input", Group: "g", Reason: "poison backlog", Generation: gen}))
		if rel.Before != 0 || rel.After != 20 {
			t.Errorf("release %+v: want positions 0 -> 20", rel)
		}
		// The completed counter is the binding's position: a counter,
		// never backwards when a release puts a new queue in place.
		if _, body := r.get(t, console.PathMetrics); !strings.Contains(body, `blackbox_queue_items_completed_total{feed="input",group="g"} 20`) {
			t.Errorf("metrics after the release: want the completed counter at 20 (the new queue's own count is 0):\n%s", body)
		}
		if code, _ := r.post(t, bobToken, console.ActionRelease, console.Request{Feed: "input", Group: "g", Reason: "again", Generation: gen}); code != http.StatusConflict {
			t.Errorf("a second release of generation %d: %d, want 409", gen, code)
		}
		r.gate.Open()
		synctest.Wait()
		gen = r.binding(t).Generation
		code, dry := r.post(t, bobToken, console.ActionSeek, console.Request{Feed: "input", Group: "g", Reason: "skip", Generation: gen, Latest: true})
		if code != http.StatusOK || dry.Applied || dry.Plan == nil || dry.PlanHash != console.PlanHash(*dry.Plan) {
			t.Fatalf("seek dry run: %d %+v", code, dry)
		}
		if code, _ := r.post(t, bobToken, console.ActionSeek, console.Request{Feed: "input", Group: "g", Reason: "skip", Generation: gen, Latest: true, PlanHash: strings.Repeat("0", 64)}); code != http.StatusConflict {
			t.Errorf("seek naming a stale plan: %d, want 409", code)
		}
		seek := ok(r.post(t, bobToken, console.ActionSeek, console.Request{Feed: "input", Group: "g", Reason: "skip", Generation: gen, Latest: true, PlanHash: dry.PlanHash}))
		if seek.Before != dry.Plan.Before || seek.After != dry.Plan.After {
			t.Errorf("seek %+v: want the plan's positions %+v", seek, *dry.Plan)
		}
		ok(r.post(t, aliceToken, console.ActionResume, console.Request{Feed: "input", Group: "g", Reason: "done"}))
		if b := r.binding(t); b.Fenced || b.Position != seek.After {
			t.Errorf("binding %+v after the resume: want not fenced, position %d (the seek's, not its new queue's count)", b, seek.After)
		}
		ok(r.post(t, aliceToken, console.ActionKill, console.Request{Reason: "end of test", Finish: true}))
		var got []string
		for _, c := range r.controls(t) {
			got = append(got, fmt.Sprintf("%s %s %s %d-%d", c.Who, c.Action, c.Reason, c.Before, c.After))
		}
		want := []string{"alice pause poison 0-0", "alice release poison backlog 0-20", "bob seek skip 20-20", "alice resume done 20-20",
			"alice kill end of test 0-0"}
		if !slices.Equal(got, want) {
			t.Errorf("CONTROL rows %q, want %q", got, want)
		}
	})
}

// ParseTokens reads NAME TOKEN lines and refuses what it cannot honour.
func TestParseTokens(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     console.Tokens
	}{
		{"two", "# ops\nalice " + aliceToken + "\n\nbob " + bobToken + "\n", console.Tokens{{"alice", aliceToken}, {"bob", bobToken}}},
		{"empty", "# none\n", nil},
		{"one field", "alice\n", nil},
		{"three fields", "alice " + aliceToken + " x\n", nil},
		{"name twice", "alice " + aliceToken + "\nalice " + bobToken + "\n", nil},
		{"token twice", "alice " + aliceToken + "\nbob " + aliceToken + "\n", nil},
		{"short token", "alice short\n", nil},
	} {
		got, err := console.ParseTokens(strings.NewReader(c.in))
		if c.want == nil {
			if !errors.Is(err, console.ErrTokens) {
				t.Errorf("%s: %v, %v: want ErrTokens", c.name, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v: want %v", c.name, got, err, c.want)
		}
	}
}

// New refuses what it cannot honour: tokens without a recording.
func TestNewRefuses(t *testing.T) {
	_, err := console.New(console.Config{Engine: &engine.Engine{}, Status: func(io.Writer) error { return nil },
		Tokens: console.Tokens{{"alice", aliceToken}}})
	if !errors.Is(err, console.ErrConfig) {
		t.Errorf("tokens without an Auditor: %v, want ErrConfig", err)
	}
}

// A seek over items the group completed that still hold the commit (a
// processing checkpoint that made none durable): its CONTROL row's before
// is the group's completed prefix, as the pause's before it, not the
// plan's Before (the first item holding the commit, minus 1).
func TestASeekOverHeldItemsRecordsTheCompletedPrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		if _, err := r.e.Hold("input", "g"); err != nil {
			t.Fatal(err)
		}
		r.gate.Open()
		synctest.Wait() // every item completed, none durable
		ok := func(code int, ans console.Answer) console.Answer {
			t.Helper()
			if code != http.StatusOK || !ans.Applied {
				t.Fatalf("%s: %d %+v", ans.Action, code, ans)
			}
			return ans
		}
		ok(r.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "skip", Indefinite: true}))
		gen := r.binding(t).Generation
		code, dry := r.post(t, aliceToken, console.ActionSeek, console.Request{Feed: "input", Group: "g", Reason: "skip", Generation: gen, Latest: true})
		if code != http.StatusOK || dry.Plan == nil || dry.Plan.Processed != 20 || dry.Plan.Before != 0 {
			t.Fatalf("seek dry run: %d %+v, want a plan over 20 processed items from 0", code, dry)
		}
		ok(r.post(t, aliceToken, console.ActionSeek, console.Request{Feed: "input", Group: "g", Reason: "skip", Generation: gen, Latest: true, PlanHash: dry.PlanHash}))
		var got []string
		for _, c := range r.controls(t) {
			got = append(got, fmt.Sprintf("%s %d-%d", c.Action, c.Before, c.After))
		}
		if want := []string{"pause 20-20", "seek 20-20"}; !slices.Equal(got, want) {
			t.Errorf("CONTROL rows %q, want %q", got, want)
		}
	})
}

// TestASeekBackIsRecordedAsAMoveBack: a seek to a seq before the group's
// position (the run's memsource log reads again) is applied as planned
// (a re-delivery of seqs 6-20), recorded by a CONTROL row whose after is
// below its before; once resumed, the group is handed items 6-20 again
// (as seqs 21-35) and its binding's position counts from the feed's last
// seq at the seek: 35, never backwards.
func TestASeekBackIsRecordedAsAMoveBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		r.gate.Open()
		bbtest.AdvanceUntil(t, "the commit at 20", func() bool { return r.log.Committed() == 20 })
		ok := func(code int, ans console.Answer) console.Answer {
			t.Helper()
			if code != http.StatusOK || !ans.Applied {
				t.Fatalf("%s: %d %+v", ans.Action, code, ans)
			}
			return ans
		}
		ok(r.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "recompute", Indefinite: true}))
		gen := r.binding(t).Generation
		req := console.Request{Feed: "input", Group: "g", Reason: "recompute", Generation: gen, To: 5}
		code, dry := r.post(t, bobToken, console.ActionSeek, req)
		if code != http.StatusOK || dry.Applied || dry.Plan == nil {
			t.Fatalf("seek back dry run: %d %+v", code, dry)
		}
		if p := *dry.Plan; !p.Redelivery || p.Loss || p.Before != 20 || p.After != 5 || p.FirstSeq != 6 || p.LastSeq != 20 {
			t.Fatalf("the plan %+v: want a re-delivery of seqs 6-20, 20 -> 5", p)
		}
		req.PlanHash = dry.PlanHash
		seek := ok(r.post(t, bobToken, console.ActionSeek, req))
		if seek.Before != 20 || seek.After != 5 {
			t.Errorf("seek back %+v: want positions 20 -> 5", seek)
		}
		if b := r.binding(t); b.MoveBack != engine.MoveBackPending { // the source polls on the bubble's clock, which has not moved
			t.Errorf("binding %+v right after the seek back: want moveBack %q", b, engine.MoveBackPending)
		}
		ok(r.post(t, aliceToken, console.ActionResume, console.Request{Feed: "input", Group: "g", Reason: "go"}))
		bbtest.AdvanceUntil(t, "the items read again completed", func() bool { return r.binding(t).Position == 35 })
		if b := r.binding(t); b.MoveBack != "" {
			t.Errorf("binding %+v once the items read again completed: want no moveBack", b)
		}
		if c := r.log.Committed(); c != 20 {
			t.Errorf("committed %d after the re-delivery, want 20", c)
		}
		var got []string
		for _, c := range r.controls(t) {
			got = append(got, fmt.Sprintf("%s %s %s %d-%d", c.Who, c.Action, c.Reason, c.Before, c.After))
		}
		want := []string{"alice pause recompute 20-20", "bob seek recompute 20-5", "alice resume go 20-20"}
		if !slices.Equal(got, want) {
			t.Errorf("CONTROL rows %q, want %q", got, want)
		}
	})
}

// TestASeekTheRecordingCannotHoldIsRefusedAndNotDone: the seek's CONTROL
// row is the engine's recorder's, written before the seek takes effect;
// a recorder that cannot write it (closed) refuses the seek: 500, not
// applied, the binding's generation still live, no row.
func TestASeekTheRecordingCannotHoldIsRefusedAndNotDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		r.gate.Open()
		bbtest.AdvanceUntil(t, "the commit at 20", func() bool { return r.log.Committed() == 20 })
		if code, ans := r.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "skip", Indefinite: true}); code != http.StatusOK {
			t.Fatalf("pause: %d %+v", code, ans)
		}
		gen := r.binding(t).Generation
		req := console.Request{Feed: "input", Group: "g", Reason: "skip", Generation: gen, Latest: true}
		code, dry := r.post(t, aliceToken, console.ActionSeek, req)
		if code != http.StatusOK || dry.Plan == nil {
			t.Fatalf("seek dry run: %d %+v", code, dry)
		}
		rows := len(r.controls(t))
		if err := r.rec.Close(); err != nil {
			t.Fatal(err)
		}
		req.PlanHash = dry.PlanHash
		code, ans := r.post(t, aliceToken, console.ActionSeek, req)
		if code != http.StatusInternalServerError || ans.Applied {
			t.Errorf("seek with the recorder closed: %d %+v, want 500, not applied", code, ans)
		}
		if b := r.binding(t); b.Generation != gen {
			t.Errorf("binding %+v after the refused seek: want generation %d still live", b, gen)
		}
		if got := len(r.controls(t)); got != rows {
			t.Errorf("%d CONTROL rows after the refused seek, want %d", got, rows)
		}
	})
}

// TestAReleaseTheRecordingCannotHoldIsRefusedAndNotDone: as a seek's, a
// release's CONTROL row is the engine's recorder's, written before the
// release takes effect: a recorder that cannot write it (closed) refuses
// the release: 500, not applied, the binding's generation still live,
// nothing released.
func TestAReleaseTheRecordingCannotHoldIsRefusedAndNotDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		synctest.Wait() // p waits in 1
		if code, ans := r.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "poison", Indefinite: true}); code != http.StatusOK {
			t.Fatalf("pause: %d %+v", code, ans)
		}
		gen := r.binding(t).Generation
		rows := len(r.controls(t))
		if err := r.rec.Close(); err != nil {
			t.Fatal(err)
		}
		code, ans := r.post(t, aliceToken, console.ActionRelease, console.Request{Feed: "input", Group: "g", Reason: "poison backlog", Generation: gen})
		if code != http.StatusInternalServerError || ans.Applied {
			t.Errorf("release with the recorder closed: %d %+v, want 500, not applied", code, ans)
		}
		if b := r.binding(t); b.Generation != gen {
			t.Errorf("binding %+v after the refused release: want generation %d still live", b, gen)
		}
		if st := r.e.Status(); st.Feeds[0].Released != 0 {
			t.Errorf("released %d after the refused release, want 0", st.Feeds[0].Released)
		}
		if got := len(r.controls(t)); got != rows {
			t.Errorf("%d CONTROL rows after the refused release, want %d", got, rows)
		}
	})
}

// An applied seek answers the plan the engine applied and recorded, not
// the dry run its hash named: an item in flight while the group is paused
// may complete between the two, and the answer's unprocessed count is
// then the DROPPED rows' (torture seed 1796274625508148985: 153 answered,
// 151 recorded).
func TestAnAppliedSeekAnswersThePlanTheEngineApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		synctest.Wait() // p waits in 1
		code, ans := r.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "g", Reason: "skip", Indefinite: true})
		if code != http.StatusOK || !ans.Applied {
			t.Fatalf("pause: %d %+v", code, ans)
		}
		gen := r.binding(t).Generation
		req := console.Request{Feed: "input", Group: "g", Reason: "skip", Generation: gen, Latest: true}
		code, dry := r.post(t, aliceToken, console.ActionSeek, req)
		if code != http.StatusOK || dry.Plan == nil || dry.Plan.Unprocessed != 20 {
			t.Fatalf("seek dry run: %d %+v, want a plan over 20 unprocessed items", code, dry)
		}
		console.SetBeforeSeek(r.w, func() {
			r.gate.Open()
			synctest.Wait() // item 1 completes; the pause dispatches no other
		})
		req.PlanHash = dry.PlanHash
		code, seek := r.post(t, aliceToken, console.ActionSeek, req)
		if code != http.StatusOK || !seek.Applied || seek.Plan == nil {
			t.Fatalf("seek: %d %+v", code, seek)
		}
		if code, ans := r.post(t, aliceToken, console.ActionResume, console.Request{Feed: "input", Group: "g", Reason: "go"}); code != http.StatusOK || !ans.Applied {
			t.Fatalf("resume: %d %+v", code, ans)
		}
		synctest.Wait()     // the worker told of the seek
		dropped := int64(0) // the seqs the DROPPED row of the seek covers
		for e, err := range r.m.ReadOnly().Rows() {
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind == store.KindDropped && e.Source == "input" {
				dropped = max(dropped, e.N)
			}
		}
		got := []int64{seek.Plan.Unprocessed, seek.Before, seek.After, dropped}
		if want := []int64{19, 1, 20, 19}; !slices.Equal(got, want) {
			t.Errorf("the applied seek's unprocessed, before, after and DROPPED count %v, want %v (plan %+v)", got, want, *seek.Plan)
		}
		if seek.PlanHash != console.PlanHash(*seek.Plan) {
			t.Errorf("the answer's plan hash %s does not name its plan", seek.PlanHash)
		}
	})
}

// auditFunc is an Auditor of a function.
type auditFunc func(store.Control) error

func (f auditFunc) Control(c store.Control) error { return f(c) }

// A kill is recorded before it takes effect (a kill ends the run, which
// closes its recording: a row written after it found the recorder closed,
// torture seed 1796286182059162061); a kill whose row cannot be written is
// refused, 500, and not done.
func TestAKillIsRecordedBeforeItTakesEffect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r *testRun
		var killedAtRow []string // the engine's Killed when each kill row was written
		r = startRun(t, nil, func(c *console.Config) {
			c.Audit = auditFunc(func(row store.Control) error {
				if row.Action == string(console.ActionKill) {
					killedAtRow = append(killedAtRow, r.e.Status().Killed)
				}
				return r.rec.Control(row)
			})
		})
		r.gate.Open()
		synctest.Wait()
		code, ans := r.post(t, aliceToken, console.ActionKill, console.Request{Reason: "stop", Finish: true})
		if code != http.StatusOK || !ans.Applied {
			t.Fatalf("kill: %d %+v", code, ans)
		}
		if !slices.Equal(killedAtRow, []string{""}) || r.e.Status().Killed != "stop" {
			t.Errorf("the kill row was written with the engine killed %q, the engine killed %q after: want one row written before the kill",
				killedAtRow, r.e.Status().Killed)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, nil, nil)
		r.gate.Open()
		synctest.Wait()
		if err := r.rec.Close(); err != nil {
			t.Fatal(err)
		}
		code, ans := r.post(t, aliceToken, console.ActionKill, console.Request{Reason: "stop", Finish: true})
		if code != http.StatusInternalServerError || ans.Applied {
			t.Errorf("kill with the recorder closed: %d %+v, want 500, not applied", code, ans)
		}
		if k := r.e.Status().Killed; k != "" {
			t.Errorf("the engine killed (%q) by a kill that could not be recorded", k)
		}
	})
}
