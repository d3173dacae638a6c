package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// lossStateRun: the loss state of two bindings of a push feed under an
// operator (docs/GUARANTEES.md "Loss state"). Group "strict" keeps the
// feed's never-drop policy (PAUSE or BLOCK_WITH_DEADLINE, spin 0), group
// "lossy" a DROP override; both hold every item until the scenario opens
// their gate, so that the items offered past their queues are lost by
// both: strict's downgraded drops latch it, lossy's drops degrade it. On a
// TimerClock the scenario moves: lossy is DEGRADED a nanosecond before
// its drawn quiet period ends and UP after it, at its last loss plus the
// quiet period exactly; strict stays LATCHED; a clear of lossy is refused
// (not latched), strict's is taken and recorded with the operator's
// reason; lossless stays false (lossy's drops are in its window). The
// Observer is told each change once, four in all; and every item is
// handled or counted dropped by each group, once.
func lossStateRun(ctx context.Context, e engineSpec, fail func(string, ...any)) error {
	r := rand.New(rand.NewPCG(e.Draw, 0x6c6f7373))
	n := e.Items
	period := time.Duration(1+r.IntN(600)) * time.Second
	policy := engine.Pause().WithSpin(0)
	if r.IntN(2) == 0 {
		policy = engine.BlockWithDeadline(e.Deadline).WithSpin(0)
	}
	what := fmt.Sprintf("lossstate (%s, quiet period %s, queue %d, %d items)", policy.Kind, period, e.Queue, n)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := core.NewStepClock(t0, 0)
	var mu sync.Mutex
	var told []engine.LossStateChange
	strict := newBookkeeper(n, func(int) bool { return true }, 0)
	lossy := newBookkeeper(n, func(int) bool { return true }, 0)
	defer strict.release()
	defer lossy.release()
	eng, err := engine.New(engine.Config{Logger: quiet, TimerClock: clock,
		Feeds: []engine.FeedConfig{{Name: "f", Policy: policy, QueueSize: e.Queue, QuietPeriod: period,
			Subscribers: map[string]engine.Policy{"lossy": engine.DropAfterSpin(0)}}},
		Groups: []engine.GroupConfig{
			{Name: "strict", Feeds: []string{"f"}, Processors: strict.procs("s")},
			{Name: "lossy", Feeds: []string{"f"}, Processors: lossy.procs("l")},
		},
		Observer: engine.Observer{LossState: func(_ string, c engine.LossStateChange) {
			mu.Lock()
			told = append(told, c)
			mu.Unlock()
		}},
	})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer func() {
		strict.release()
		lossy.release()
		eng.Stop(context.WithoutCancel(ctx))
	}()
	f := eng.Feed("f")
	for v := 1; v <= n; v++ {
		if err := f.Offer(v); err != nil {
			return fmt.Errorf("offer %d: %w", v, err)
		}
	}
	loss := func(group string) engine.SubscriberStatus {
		for _, s := range f.Status().Subscribers {
			if s.Queue == group+"/f" {
				return s
			}
		}
		return engine.SubscriberStatus{}
	}
	// At most a queue and the item in hand each: the rest is lost by both.
	if s, l := loss("strict"), loss("lossy"); s.Dropped == 0 || l.Dropped == 0 {
		fail("%s: no loss with both groups held: strict dropped %d, lossy %d", what, s.Dropped, l.Dropped)
		return nil
	}
	if s, l := loss("strict").Loss, loss("lossy").Loss; s.State != engine.LossLatched || l.State != engine.LossDegraded ||
		!l.LastLoss.Equal(t0) {
		fail("%s: after the losses strict is %+v, lossy %+v; want LATCHED and DEGRADED since %s", what, s, l, t0)
	}
	clock.Advance(period - 1)
	if l := loss("lossy").Loss; l.State != engine.LossDegraded {
		fail("%s: lossy %+v a nanosecond before its quiet period ends, want DEGRADED", what, l)
	}
	clock.Advance(1 + time.Duration(r.IntN(3))*period)
	if s, l := loss("strict").Loss, loss("lossy").Loss; s.State != engine.LossLatched || l.State != engine.LossUp || !l.Since.Equal(t0.Add(period)) {
		fail("%s: past the quiet period strict is %+v, lossy %+v; want LATCHED, and UP since %s", what, s, l, t0.Add(period))
	}
	if err := eng.ClearOverload("f", "lossy", "torture: not latched"); !errors.Is(err, engine.ErrNotLatched) {
		fail("%s: a clear of lossy (UP) returned %v, want ErrNotLatched", what, err)
	}
	if err := eng.ClearOverload("f", "strict", "torture: the operator accepts the loss"); err != nil {
		fail("%s: the clear of strict: %v", what, err)
		return nil
	}
	if s, fs := loss("strict").Loss, f.Status(); s.State != engine.LossUp || s.Reason != engine.ClearedReason+"torture: the operator accepts the loss" ||
		!s.Cleared.Equal(clock.Now()) || fs.Lossless {
		fail("%s: after the clear strict is %+v and the feed lossless %v; want UP with the operator's reason, not lossless (lossy's drops)",
			what, s, fs.Lossless)
	}
	strict.release()
	lossy.release()
	for _, g := range []struct {
		name string
		b    *bookkeeper
	}{{"strict", strict}, {"lossy", lossy}} {
		if err := waitFor(ctx, func() bool { s := loss(g.name); return s.Drained && sum(g.b.handled, 1, n)+int(s.Dropped) == n }); err != nil {
			s := loss(g.name)
			fail("%s: %s handled %d and dropped %d of %d items: %v", what, g.name, sum(g.b.handled, 1, n), s.Dropped, n, err)
			continue
		}
		for v := 1; v <= n; v++ {
			if h := g.b.handled[v].Load(); h > 1 {
				fail("%s: %s handled item %d %d times", what, g.name, v, h)
				break
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"strict UP->LATCHED": 1, "lossy UP->DEGRADED": 1, "lossy DEGRADED->UP": 1, "strict LATCHED->UP": 1}
	got := map[string]int{}
	for _, c := range told {
		got[fmt.Sprintf("%s %s->%s", c.Group, c.From, c.To)]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		fail("%s: the Observer was told %v, want each of %v once", what, got, want)
	}
	return nil
}
