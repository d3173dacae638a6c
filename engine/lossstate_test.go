package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/google/go-cmp/cmp"
)

// t0 is when the loss-state tests' TimerClock stands until they move it.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// lossRig is an engine whose feed "in" has one gated group per name given
// (a turnstile, closed) and whose feed "other" has group "elsewhere"; its
// TimerClock stands at t0 but when the test moves it; it keeps every loss
// state change told to the Observer and every log record with its level.
type lossRig struct {
	e     *engine.Engine
	f     *engine.Feed
	clock *core.StepClock
	gates map[string]*turnstile

	mu      sync.Mutex
	changes []engine.LossStateChange
	logs    []levelled
}

type levelled struct {
	level slog.Level
	msg   string
}

func newLossRig(t *testing.T, fc engine.FeedConfig, groups ...string) *lossRig {
	t.Helper()
	r := &lossRig{clock: core.NewStepClock(t0, 0), gates: map[string]*turnstile{}}
	fc.Name = "in"
	cfg := engine.Config{TimerClock: r.clock, DrainTimeout: 200 * time.Millisecond, Logger: slog.New(r),
		Feeds:    []engine.FeedConfig{fc, {Name: "other", Policy: engine.DropAfterSpin(0), QueueSize: 1}},
		Groups:   []engine.GroupConfig{{Name: "elsewhere", Feeds: []string{"other"}, Processors: procs("p-elsewhere", newTurnstile(true))}},
		Observer: engine.Observer{LossState: r.told}}
	for _, n := range groups {
		r.gates[n] = newTurnstile(false)
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: n, Feeds: []string{"in"}, Processors: procs("p-"+n, r.gates[n])})
	}
	r.e = start(t, cfg)
	t.Cleanup(func() {
		for _, g := range r.gates {
			g.openUp()
		}
	})
	r.f = r.e.Feed("in")
	return r
}

func (r *lossRig) told(group string, c engine.LossStateChange) {
	if group != c.Group {
		panic("LossState hook given group " + group + " for a change of " + c.Group)
	}
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

// The rig is the engine's slog.Handler.
func (r *lossRig) Enabled(context.Context, slog.Level) bool { return true }
func (r *lossRig) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *lossRig) WithGroup(string) slog.Handler            { return r }
func (r *lossRig) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.logs = append(r.logs, levelled{rec.Level, rec.Message})
	r.mu.Unlock()
	return nil
}

// told is every change told so far.
func (r *lossRig) toldSoFar() []engine.LossStateChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]engine.LossStateChange(nil), r.changes...)
}

// stateLogs is the log records of loss state changes.
func (r *lossRig) stateLogs() []levelled {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []levelled
	for _, l := range r.logs {
		if strings.Contains(l.msg, "loss state of queue") {
			out = append(out, l)
		}
	}
	return out
}

// fill has every gated group take item 1 and hold it, item 2 filling its
// queue of one.
func (r *lossRig) fill(t *testing.T) {
	t.Helper()
	fillGated(t, r.e, r.gates, pusher(t, r.f))
}

// drop pushes an item into the full queues: a DROP queue drops it, a PAUSE
// or BLOCK one falls back to a drop (a downgrade) with a spin of 0.
func (r *lossRig) drop(t *testing.T, item int) {
	t.Helper()
	if err := r.f.Offer(item); err != nil {
		t.Fatal(err)
	}
}

// loss is the group's loss state in the status (of its first queue).
func (r *lossRig) loss(t *testing.T, group string) engine.LossStatus {
	t.Helper()
	for _, s := range r.e.Status().Feeds[0].Subscribers {
		if s.Queue == group+"/in" {
			return s.Loss
		}
	}
	t.Fatalf("no queue %s/in", group)
	return engine.LossStatus{}
}

func (r *lossRig) at(d time.Duration) time.Time { return t0.Add(d) }

func (r *lossRig) checkChanges(t *testing.T, want []engine.LossStateChange) {
	t.Helper()
	// The engine's overseer may have taken the changes to tell (the
	// publish's unlock or the overseer tells them, whichever takes them
	// first): wait until it is done telling (a CI run read the list while
	// it was).
	synctest.Wait()
	if diff := cmp.Diff(want, r.toldSoFar()); diff != "" {
		t.Errorf("changes told to the Observer (-want +got):\n%s", diff)
	}
}

const dropReason = "queue g/in full after 0s spin"

func change(from, to engine.LossState, reason string, at, observed time.Time) engine.LossStateChange {
	return engine.LossStateChange{Feed: "in", Group: "g", From: from, To: to, Reason: reason, At: at, Observed: observed}
}

func TestADropPolicyLossDegradesTheBindingAndItIsUpAgainAtLastLossPlusTheQuietPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.DropAfterSpin(0), QueueSize: 1, QuietPeriod: 10 * time.Second}, "g")
		r.fill(t)
		r.clock.Advance(time.Second)
		r.drop(t, 3)
		if got, want := r.loss(t, "g"), (engine.LossStatus{State: engine.LossDegraded, Since: r.at(time.Second),
			LastLoss: r.at(time.Second), Reason: dropReason}); got != want {
			t.Fatalf("after the drop: %+v, want %+v", got, want)
		}
		r.clock.Advance(9*time.Second - 1) // the quiet period not yet over
		if got := r.loss(t, "g").State; got != engine.LossDegraded {
			t.Fatalf("a nanosecond before the quiet period ends: %s, want DEGRADED", got)
		}
		r.clock.Advance(25 * time.Second) // observed late: at 35s
		if got, want := r.loss(t, "g"), (engine.LossStatus{State: engine.LossUp, Since: r.at(11 * time.Second),
			LastLoss: r.at(time.Second), Reason: "no loss for the quiet period (10s)"}); got != want {
			t.Fatalf("after the quiet period: %+v, want %+v", got, want)
		}
		r.checkChanges(t, []engine.LossStateChange{
			change(engine.LossUp, engine.LossDegraded, dropReason, r.at(time.Second), r.at(time.Second)),
			change(engine.LossDegraded, engine.LossUp, "no loss for the quiet period (10s)", r.at(11*time.Second), r.at(35*time.Second-1)),
		})
	})
}

func TestASecondLossWithinTheQuietPeriodStaysDegradedAndMovesTheRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.DropAfterSpin(0), QueueSize: 1, QuietPeriod: time.Minute}, "g")
		r.fill(t)
		r.drop(t, 3)
		r.clock.Advance(30 * time.Second)
		r.drop(t, 4)
		r.clock.Advance(40 * time.Second) // 70s: a minute after the first loss, not the second
		if got := r.loss(t, "g"); got.State != engine.LossDegraded || !got.LastLoss.Equal(r.at(30*time.Second)) {
			t.Fatalf("at 70s: %+v, want DEGRADED since the second loss at 30s", got)
		}
		r.clock.Advance(20 * time.Second)
		if got := r.loss(t, "g"); got.State != engine.LossUp || !got.Since.Equal(r.at(90*time.Second)) {
			t.Fatalf("at 90s: %+v, want UP since 90s", got)
		}
		r.checkChanges(t, []engine.LossStateChange{
			change(engine.LossUp, engine.LossDegraded, dropReason, t0, t0),
			change(engine.LossDegraded, engine.LossUp, "no loss for the quiet period (1m0s)", r.at(90*time.Second), r.at(90*time.Second)),
		})
	})
}

func TestTwoLossEpisodesAreTwoDegradedChangesWithAnUpBetween(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.DropAfterSpin(0), QueueSize: 1, QuietPeriod: time.Minute}, "g")
		r.fill(t)
		r.drop(t, 3)
		r.clock.Advance(2 * time.Minute) // nobody looks: the next loss applies the recovery first
		r.drop(t, 4)
		r.checkChanges(t, []engine.LossStateChange{
			change(engine.LossUp, engine.LossDegraded, dropReason, t0, t0),
			change(engine.LossDegraded, engine.LossUp, "no loss for the quiet period (1m0s)", r.at(time.Minute), r.at(2*time.Minute)),
			change(engine.LossUp, engine.LossDegraded, dropReason, r.at(2*time.Minute), r.at(2*time.Minute)),
		})
	})
}

// The overseer applies a recovery when it is due, with nobody reading the
// status: here on the bubble's clock (the default TimerClock), so that it
// wakes at the instant itself.
func TestTheOverseerAppliesARecoveryWhenItIsDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []engine.LossStateChange
		gate := newTurnstile(false)
		e := start(t, engine.Config{DrainTimeout: 200 * time.Millisecond,
			Feeds:  []engine.FeedConfig{{Name: "in", Policy: engine.DropAfterSpin(0), QueueSize: 1, QuietPeriod: 5 * time.Second}},
			Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: procs("p", gate)}},
			Observer: engine.Observer{LossState: func(_ string, c engine.LossStateChange) {
				mu.Lock()
				got = append(got, c)
				mu.Unlock()
			}}})
		t.Cleanup(gate.openUp)
		fillGated(t, e, map[string]*turnstile{"g": gate}, pusher(t, e.Feed("in")))
		time.Sleep(1234 * time.Millisecond)
		lost := time.Now().UTC()
		if err := e.Feed("in").Offer(3); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		mu.Lock()
		defer mu.Unlock()
		want := []engine.LossStateChange{
			change(engine.LossUp, engine.LossDegraded, dropReason, lost, lost),
			change(engine.LossDegraded, engine.LossUp, "no loss for the quiet period (5s)", lost.Add(5*time.Second), lost.Add(5*time.Second)),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("changes (-want +got):\n%s", diff)
		}
	})
}

func TestANeverDropBindingsLossLatchesItUntilAnOperatorClearsIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy engine.Policy
		lose   func(t *testing.T, r *lossRig)
		reason string
	}{
		{"block refusal", engine.BlockWithDeadline(10 * time.Millisecond), func(t *testing.T, r *lossRig) {
			if err := r.f.Publish(context.Background(), 3); !errors.Is(err, engine.ErrRefused) {
				t.Fatalf("publish 3: %v, want refused", err)
			}
		}, "a BLOCK_WITH_DEADLINE queue promises no loss: queue g/in: a publish was refused (deadline)"},
		{"block downgrade", engine.BlockWithDeadline(time.Hour).WithSpin(0), func(t *testing.T, r *lossRig) { r.drop(t, 3) },
			"a BLOCK_WITH_DEADLINE queue promises no loss: queue g/in full after 0s spin; BLOCK_WITH_DEADLINE not waited"},
		{"pause downgrade", engine.Pause().WithSpin(0), func(t *testing.T, r *lossRig) { r.drop(t, 3) },
			"a PAUSE queue promises no loss: queue g/in full after 0s spin; PAUSE not waited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newLossRig(t, engine.FeedConfig{Policy: tc.policy, QueueSize: 1, QuietPeriod: time.Second}, "g")
				r.fill(t)
				tc.lose(t, r)
				r.clock.Advance(time.Hour) // any quiet period
				tc.lose(t, r)              // a loss while latched changes nothing
				r.clock.Advance(time.Hour)
				if got, want := r.loss(t, "g"), (engine.LossStatus{State: engine.LossLatched, Since: t0,
					LastLoss: r.at(time.Hour), Reason: tc.reason}); got != want {
					t.Fatalf("two hours on: %+v, want %+v", got, want)
				}
				if err := r.e.ClearOverload("in", "g", "operator: consumer restarted"); err != nil {
					t.Fatalf("ClearOverload: %v", err)
				}
				cleared := engine.ClearedReason + "operator: consumer restarted"
				if got, want := r.loss(t, "g"), (engine.LossStatus{State: engine.LossUp, Since: r.at(2 * time.Hour),
					LastLoss: r.at(time.Hour), Reason: cleared, Cleared: r.at(2 * time.Hour)}); got != want {
					t.Fatalf("cleared: %+v, want %+v", got, want)
				}
				r.checkChanges(t, []engine.LossStateChange{
					change(engine.LossUp, engine.LossLatched, tc.reason, t0, t0),
					change(engine.LossLatched, engine.LossUp, cleared, r.at(2*time.Hour), r.at(2*time.Hour)),
				})
			})
		})
	}
}

func TestClearOverloadOfABindingNotLatchedIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.DropAfterSpin(0), QueueSize: 1,
			Subscribers: map[string]engine.Policy{"latched": engine.Pause().WithSpin(0)}}, "g", "up", "latched")
		r.gates["up"].openUp()
		r.fill(t)
		testutil.WhenBlocked(t, "up's queue empty", func() bool { return r.gates["up"].count() == 2 })
		r.drop(t, 3) // g: DEGRADED; latched: LATCHED; up: room
		for _, tc := range []struct {
			feed, group string
			want        error
		}{
			{"in", "up", engine.ErrNotLatched},
			{"in", "g", engine.ErrNotLatched}, // DEGRADED recovers by itself
			{"nope", "g", engine.ErrUnknown},
			{"in", "nope", engine.ErrUnknown},
			{"in", "elsewhere", engine.ErrUnknown}, // never subscribed to "in"
		} {
			if err := r.e.ClearOverload(tc.feed, tc.group, "why"); !errors.Is(err, tc.want) {
				t.Errorf("ClearOverload(%q, %q): %v, want %v", tc.feed, tc.group, err, tc.want)
			}
		}
		if got := r.loss(t, "latched").State; got != engine.LossLatched {
			t.Errorf("latched: %s after the refused clears, want LATCHED", got)
		}
		if got := r.loss(t, "g").State; got != engine.LossDegraded {
			t.Errorf("g: %s after the refused clears, want DEGRADED", got)
		}
		if err := r.e.ClearOverload("in", "latched", ""); err != nil {
			t.Fatal(err)
		}
		if err := r.e.ClearOverload("in", "latched", ""); !errors.Is(err, engine.ErrNotLatched) {
			t.Errorf("second clear: %v, want ErrNotLatched", err)
		}
		if got := r.loss(t, "latched").Reason; got != engine.ClearedReason+"no reason given" {
			t.Errorf("the clear's reason %q", got)
		}
	})
}

func TestEachLossStateChangeIsWarnedOnceAndTheReturnToUpLoggedAtInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.DropAfterSpin(0), QueueSize: 1, QuietPeriod: time.Second,
			Subscribers: map[string]engine.Policy{"l": engine.Pause().WithSpin(0)}}, "g", "l")
		r.fill(t)
		for i := range 50 { // 50 losses of each queue: two changes
			r.drop(t, 3+i)
		}
		r.clock.Advance(time.Second)
		for range 10 {
			r.e.Status()
		}
		if err := r.e.ClearOverload("in", "l", "fixed"); err != nil {
			t.Fatal(err)
		}
		type line struct {
			level slog.Level
			has   string
		}
		want := []line{
			{slog.LevelWarn, "queue g/in: UP -> DEGRADED"},
			{slog.LevelWarn, "queue l/in: UP -> LATCHED"},
			{slog.LevelInfo, "queue g/in: DEGRADED -> UP"},
			{slog.LevelInfo, "queue l/in: LATCHED -> UP"},
		}
		got := r.stateLogs()
		if len(got) != len(want) {
			t.Fatalf("%d loss state records, want %d: %+v", len(got), len(want), got)
		}
		for i, w := range want {
			if got[i].level != w.level || !strings.Contains(got[i].msg, w.has) {
				t.Errorf("record %d: %s %q, want %s with %q", i, got[i].level, got[i].msg, w.level, w.has)
			}
		}
		if n := len(r.toldSoFar()); n != 4 {
			t.Errorf("%d changes told, want 4", n)
		}
	})
}

// Lossless judges each binding's loss window: the run, or since an
// operator cleared its latch. A DEGRADED binding's recovery does not end
// its window: the run lost what its DROP policy dropped.
func TestLosslessJudgesTheLossWindowAClearBegins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.Pause().WithSpin(0), QueueSize: 1, QuietPeriod: time.Second}, "g")
		r.fill(t)
		lossless := func() bool { return r.e.Status().Feeds[0].Lossless }
		r.drop(t, 3)
		if lossless() {
			t.Fatal("lossless after a downgraded drop")
		}
		if err := r.e.ClearOverload("in", "g", "accepted"); err != nil {
			t.Fatal(err)
		}
		fs := r.e.Status().Feeds[0]
		if !fs.Lossless || !r.e.Status().Lossless || fs.Dropped != 1 || fs.Subscribers[0].Dropped != 1 {
			t.Fatalf("after the clear: lossless %v, dropped %d: want lossless, the counters kept", fs.Lossless, fs.Dropped)
		}
		r.drop(t, 4)
		if lossless() {
			t.Fatal("lossless after a loss past the clear")
		}

		d := newLossRig(t, engine.FeedConfig{Policy: engine.DropAfterSpin(0), QueueSize: 1, QuietPeriod: time.Second}, "g")
		d.fill(t)
		d.drop(t, 3)
		d.clock.Advance(time.Minute)
		if fs := d.e.Status().Feeds[0]; fs.Lossless || fs.Subscribers[0].Loss.State != engine.LossUp {
			t.Fatalf("a DROP queue recovered: lossless %v, state %s; want not lossless, UP", fs.Lossless, fs.Subscribers[0].Loss.State)
		}
	})
}

func TestALatchOutlivesItsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.Pause().WithSpin(0), QueueSize: 1}, "g")
		r.fill(t)
		r.drop(t, 3)
		if err := r.e.Unsubscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		if err := r.e.Subscribe("g", "in"); err != nil {
			t.Fatal(err)
		}
		for _, s := range r.e.Status().Feeds[0].Subscribers {
			if s.Loss.State != engine.LossLatched {
				t.Errorf("queue %s (removed %v): %s, want LATCHED", s.Queue, s.Removed, s.Loss.State)
			}
		}
		if err := r.e.ClearOverload("in", "g", "resubscribed"); err != nil {
			t.Fatal(err)
		}
		if n := len(r.toldSoFar()); n != 2 {
			t.Errorf("%d changes, want 2 (the latch and the clear)", n)
		}
	})
}

func TestARefusalAtShutdownChangesNoState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.BlockWithDeadline(time.Hour), QueueSize: 1}, "g")
		r.fill(t)
		done := make(chan error, 1)
		go func() { done <- r.f.Publish(context.Background(), 3) }()
		synctest.Wait() // waiting for room
		stopped := make(chan error, 1)
		go func() { stopped <- r.e.Stop(context.Background()) }()
		var re *engine.RefusedError
		if err := <-done; !errors.As(err, &re) || re.Reason != engine.RefusedShutdown {
			t.Fatalf("publish 3: %v, want refused at shutdown", err)
		}
		r.gates["g"].openUp()
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if got := r.loss(t, "g"); !got.IsZero() {
			t.Errorf("after a refusal at shutdown: %+v, want UP, nothing lost", got)
		}
		r.checkChanges(t, nil)
		if err := r.e.ClearOverload("in", "g", "late"); !errors.Is(err, engine.ErrStopped) {
			t.Errorf("ClearOverload after Stop: %v, want ErrStopped", err)
		}
	})
}

func TestTheLatchRuleAndTheQuietPeriodAreTheFeedsConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fc    engine.FeedConfig
		want  engine.LossState // after a downgraded drop (g: PAUSE) and a drop (d: DROP)
		wantD engine.LossState
	}{
		{"never-drop, the default", engine.FeedConfig{}, engine.LossLatched, engine.LossDegraded},
		{"every loss", engine.FeedConfig{Latch: engine.LatchEveryLoss}, engine.LossLatched, engine.LossLatched},
		{"nothing", engine.FeedConfig{Latch: engine.LatchNothing}, engine.LossDegraded, engine.LossDegraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := tc.fc
				fc.Policy, fc.QueueSize = engine.Pause().WithSpin(0), 1
				fc.Subscribers = map[string]engine.Policy{"d": engine.DropAfterSpin(0)}
				r := newLossRig(t, fc, "g", "d")
				r.fill(t)
				r.drop(t, 3)
				if got, gotD := r.loss(t, "g").State, r.loss(t, "d").State; got != tc.want || gotD != tc.wantD {
					t.Errorf("PAUSE %s, DROP %s; want %s, %s", got, gotD, tc.want, tc.wantD)
				}
				r.clock.Advance(engine.DefaultQuietPeriod)
				after := map[engine.LossState]engine.LossState{engine.LossDegraded: engine.LossUp, engine.LossLatched: engine.LossLatched}
				if got := r.loss(t, "d").State; got != after[tc.wantD] {
					t.Errorf("DROP after the default quiet period: %s, want %s", got, after[tc.wantD])
				}
			})
		})
	}
	for _, tc := range []struct {
		name string
		fc   engine.FeedConfig
		key  string
	}{
		{"below the minimum", engine.FeedConfig{QuietPeriod: engine.MinQuietPeriod - 1}, "quietPeriod"},
		{"negative", engine.FeedConfig{QuietPeriod: -time.Second}, "quietPeriod"},
		{"unknown latch rule", engine.FeedConfig{Latch: "sometimes"}, "latch"},
	} {
		fc := tc.fc
		fc.Name, fc.Policy, fc.QueueSize = "in", engine.Pause(), 1
		_, err := engine.New(engine.Config{Feeds: []engine.FeedConfig{fc}})
		var ce *engine.ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || ce.Feed != "in" {
			t.Errorf("%s: %v, want a ConfigError of feed in, key %s", tc.name, err, tc.key)
		}
	}
	if _, err := engine.New(engine.Config{Feeds: []engine.FeedConfig{{Name: "in", Policy: engine.Pause(), QueueSize: 1, QuietPeriod: engine.MinQuietPeriod}}}); err != nil {
		t.Errorf("the minimum quiet period refused: %v", err)
	}
}

// The status JSON of a queue shows its loss state ("loss") once something
// happened to it, and nothing while it is UP and never lost: the JSON of
// a run without losses is what it was before loss states.
func TestTheStatusJSONShowsALossStateOnceSomethingHappened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLossRig(t, engine.FeedConfig{Policy: engine.Pause().WithSpin(0), QueueSize: 1,
			Subscribers: map[string]engine.Policy{"up": engine.DropAfterSpin(0)}}, "g", "up")
		r.gates["up"].openUp()
		r.fill(t)
		testutil.WhenBlocked(t, "up's queue empty", func() bool { return r.gates["up"].count() == 2 })
		r.drop(t, 3)
		b, err := json.Marshal(r.e.Status().Feeds[0].Subscribers)
		if err != nil {
			t.Fatal(err)
		}
		got := string(b)
		want := `"loss":{"state":"LATCHED","since":"2030-01-01T00:00:00Z","lastLoss":"2030-01-01T00:00:00Z","reason":"a PAUSE queue promises no loss: queue g/in full after 0s spin; PAUSE not waited"}`
		if strings.Count(got, `"loss"`) != 1 || !strings.Contains(got, want) {
			t.Errorf("subscribers JSON %s: want one loss, g's: %s", got, want)
		}
	})
}
