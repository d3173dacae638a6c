package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
)

// The operator's actions on a running engine as engine scenarios: the kill
// switch (Engine.Kill, Config.KillSwitch) and the release of a held
// position (Engine.Release), docs/GUARANTEES.md "The kill switch" and "The
// commit point". Their oracle counts, item by item, what the processors
// handled and which completions ran, and holds the engine's commit and
// status to it: a kill commits exactly the contiguous prefix of what was
// dispatched and the restart delivers the rest; a release is counted as a
// loss of exactly what the group had not completed, and everything else is
// delivered.

// bookkeeper is the processor of the kill and release scenarios, shared by the
// instances of every worker: items are the ints 1..n; it counts by item
// the items it handled (its OnEvent returned nil) and the completions that
// ran. A gated item waits for open (or its cycle's context: it then fails,
// not handled); the entry of item signal closes entered.
type bookkeeper struct {
	handled, completed []atomic.Int32 // by item, [0] unused
	gated              func(int) bool
	open               chan struct{}
	openOnce           sync.Once
	signal             int
	entered            chan struct{}
}

func newBookkeeper(n int, gated func(int) bool, signal int) *bookkeeper {
	if gated == nil {
		gated = func(int) bool { return false }
	}
	return &bookkeeper{handled: make([]atomic.Int32, n+1), completed: make([]atomic.Int32, n+1), gated: gated,
		open: make(chan struct{}), signal: signal, entered: make(chan struct{})}
}

func (t *bookkeeper) OnEvent(cy *core.Cycle, ev any) error {
	v := ev.(int)
	cy.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
		t.completed[v].Add(1)
		return nil
	}))
	if v == t.signal {
		close(t.entered)
	}
	if t.gated(v) {
		select {
		case <-t.open:
		case <-cy.Context().Done():
			return cy.Context().Err()
		}
	}
	t.handled[v].Add(1)
	return nil
}

// release opens the gate (once).
func (t *bookkeeper) release() { t.openOnce.Do(func() { close(t.open) }) }

func (t *bookkeeper) procs(name string) []engine.ProcessorConfig {
	return []engine.ProcessorConfig{{Name: name, Processor: t, New: func() (core.Processor, error) { return t, nil }}}
}

// sum counts the items of from..to handled (or completed) at least once.
func sum(c []atomic.Int32, from, to int) int {
	n := 0
	for v := from; v <= to; v++ {
		if c[v].Load() > 0 {
			n++
		}
	}
	return n
}

// ints are the items 1..n.
func ints(from, to int) []any {
	items := make([]any, 0, to-from+1)
	for v := from; v <= to; v++ {
		items = append(items, v)
	}
	return items
}

// wait waits for ch or ctx.
func wait(ctx context.Context, ch <-chan struct{}, what string) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
}

// killRun: a positioned feed (a memsource log, whose committed offset is
// the source's position) read by a group of workers with a small MaxGap;
// one or two items are gated, so that items are in flight and others done
// beyond them. The run is killed (Engine.Kill at a drawn moment, or the
// KillSwitch at a drawn ask), its items in flight finishing or abandoned
// (KillAbandon). Then: publishes are refused (ErrKilled), the status says
// killed and not settled (and lossless: the feed is re-read), the commit
// is exactly the contiguous prefix of the items whose completions ran (never
// past one that did not); a new engine on the log delivers every item past
// the commit once and none before it, so that over both runs every item is
// handled.
func killRun(ctx context.Context, e engineSpec, fail func(string, ...any)) error {
	r := rand.New(rand.NewPCG(e.Draw, 0x6b696c6c))
	n := e.Items
	maxGap := 1 + r.IntN(8)
	abandon, viaSwitch := r.IntN(2) == 0, r.IntN(2) == 0
	g1, g2 := 1+r.IntN(n-1), 0
	if r.IntN(2) == 0 {
		g2 = min(n, g1+1+r.IntN(maxGap))
	}
	// Kill: 0 at once, 1 once k items were handled, 2 once g1 is in flight,
	// 3 and every item before it handled, 4 and (most often) an item done
	// beyond it.
	moment := r.IntN(5)
	k, asks := r.IntN(g1), 1+r.IntN(g1)
	how := fmt.Sprintf("Kill at moment %d (k %d)", moment, k)
	if viaSwitch {
		how = fmt.Sprintf("the KillSwitch at ask %d", asks)
	}
	what := fmt.Sprintf("kill (%d items, %d workers, max gap %d, items %d and %d gated, abandon %v, %s)",
		n, e.Workers, maxGap, g1, g2, abandon, how)
	const reason = "torture: operator kill"

	log := memsource.NewLog(ints(1, n)...)
	log.Close()
	p := newBookkeeper(n, func(v int) bool { return v == g1 || v == g2 }, g1)
	defer p.release()
	killed := make(chan struct{})
	var killedOnce sync.Once
	var asked atomic.Int64
	cfg := engine.Config{Logger: quiet, DrainTimeout: 10 * time.Second, KillAbandon: abandon,
		Feeds: []engine.FeedConfig{{Name: "f", Source: log.Source(), QueueSize: e.Queue},
			{Name: "push", Policy: engine.DropAfterSpin(0), QueueSize: 8}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"f", "push"}, Workers: e.Workers, MaxGap: maxGap,
			Order: engine.OrderNone, Processors: p.procs("p")}},
		Observer: engine.Observer{Killed: func(string) { killedOnce.Do(func() { close(killed) }) }},
	}
	if viaSwitch {
		// The group asks before each item it takes: it takes g1, so it asks
		// at least g1 times.
		cfg.KillSwitch = func() (string, bool) { return reason, asked.Add(1) >= int64(asks) }
	}
	eng, err := engine.New(cfg)
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			p.release()
			eng.Stop(context.WithoutCancel(ctx))
		}
	}()
	if viaSwitch {
		if err := wait(ctx, killed, "the kill switch's kill"); err != nil {
			return err
		}
	} else {
		switch moment {
		case 1:
			err = waitFor(ctx, func() bool { return sum(p.handled, 1, n) >= k })
		case 2:
			err = wait(ctx, p.entered, "the gated item")
		case 3, 4:
			if err = wait(ctx, p.entered, "the gated item"); err == nil {
				err = waitFor(ctx, func() bool { return sum(p.handled, 1, g1-1) == g1-1 })
			}
			if err == nil && moment == 4 {
				// No item beyond g1 may come (all of them in g1's batch,
				// or none left): then the kill comes a second later.
				bctx, cancel := context.WithTimeout(ctx, time.Second)
				_ = waitFor(bctx, func() bool { return sum(p.completed, g1+1, n) > 0 })
				cancel()
				err = ctx.Err()
			}
		}
		if err != nil {
			return err
		}
		if err := eng.Kill(reason); err != nil {
			return fmt.Errorf("Kill: %w", err)
		}
	}
	if err := eng.Feed("push").Publish(ctx, 0); !errors.Is(err, engine.ErrKilled) {
		fail("%s: a Publish after the kill returned %v, want ErrKilled", what, err)
	}
	if err := eng.Feed("push").Offer(0); !errors.Is(err, engine.ErrKilled) {
		fail("%s: an Offer after the kill returned %v, want ErrKilled", what, err)
	}
	p.release() // too late for an abandoned item; a finishing one finishes
	stopped = true
	if err := eng.Stop(ctx); err != nil {
		fail("%s: Stop after the kill: %v", what, err)
		return nil
	}
	st := eng.Status()
	if st.Killed != reason || st.Settled {
		fail("%s: status killed %q settled %v, want killed %q and not settled", what, st.Killed, st.Settled, reason)
	}
	if fs := eng.Feed("f").Status(); fs.Settled || !fs.Lossless {
		fail("%s: the positioned feed's status settled %v lossless %v, want not settled and lossless (a restart re-reads it)",
			what, fs.Settled, fs.Lossless)
	}
	prefix := 0
	for prefix < n && p.completed[prefix+1].Load() > 0 {
		prefix++
	}
	beyond := sum(p.completed, prefix+1, n)
	if c := log.Committed(); c != int64(prefix) {
		fail("%s: committed through %d, want exactly the contiguous prefix of the items dispatched, %d (%d completed beyond it)",
			what, c, prefix, beyond)
	}
	for v := 1; v <= n; v++ {
		if h, c := p.handled[v].Load(), p.completed[v].Load(); h > 1 || c > 1 {
			fail("%s: item %d handled %d times and completed %d times in one run", what, v, h, c)
			break
		}
	}

	// The restart: every item past the commit once, none before it.
	committed := int(log.Committed())
	p2 := newBookkeeper(n, nil, 0)
	eng2, err := engine.New(engine.Config{Logger: quiet,
		Feeds: []engine.FeedConfig{{Name: "f", Source: log.Source(), QueueSize: e.Queue}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"f"}, Workers: e.Workers, MaxGap: maxGap,
			Order: engine.OrderNone, Processors: p2.procs("p")}},
	})
	if err != nil {
		return err
	}
	if _, err := eng2.RunSettled(ctx); err != nil {
		fail("%s: the restart after the kill: %v", what, err)
		return nil
	}
	for v := 1; v <= n; v++ {
		h := p2.handled[v].Load()
		switch {
		case v <= committed && h != 0:
			fail("%s: the restart delivered item %d again, committed by the killed run (through %d)", what, v, committed)
		case v > committed && h != 1:
			fail("%s: the restart handled item %d, past the commit (%d), %d times, want once", what, v, committed, h)
		case h+p.handled[v].Load() == 0:
			fail("%s: item %d was handled by neither run: skipped", what, v)
		default:
			continue
		}
		break
	}
	if c := log.Committed(); c != int64(n) {
		fail("%s: the restart settled with the commit at %d of %d", what, c, n)
	}
	return nil
}

// releaseRun: a positioned feed read by two groups; the victim completes
// items 1..k of the first m and is handling k+1 (gated, as are k+2..m)
// when it is unsubscribed (and maybe subscribed again) or fenced: its
// queue holds the commit. The operator reads the queue's generation from
// the status; a release naming a wrong one is refused (ErrGeneration, or
// ErrNotHeld for the group's new, live queue) and changes nothing; the
// right one releases: Released is exactly what the queue was given and
// its group had not completed (one worker: m-k; several: the accounting
// below), the feed is not lossless, the commit moves past the released
// items, the same generation cannot release twice. Then the gated items
// complete, too late: refused (stale), never counted twice. The rest of
// the input (m+1..n) is appended: the healthy group gets every item, the
// commit reaches the end.
func releaseRun(ctx context.Context, e engineSpec, fail func(string, ...any)) error {
	r := rand.New(rand.NewPCG(e.Draw, 0x72656c))
	n := e.Items
	m := 2 + r.IntN(n/2)
	k := r.IntN(m)
	mode := pick(r, "unsubscribed", "resubscribed", "fenced")
	workers, healthyWorkers := pick(r, 1, e.Workers), 1+r.IntN(e.Workers)
	wrong := r.IntN(3)
	last := pick(r, k+1, m) // the victim's gated items: k+1..last (several workers complete those after it)
	what := fmt.Sprintf("release (%s, %d items, %d given to the victim, %d-%d gated; victim %d workers, healthy %d)",
		mode, n, m, k+1, last, workers, healthyWorkers)

	log := memsource.NewLog(ints(1, m)...)
	victim := newBookkeeper(n, func(v int) bool { return v > k && v <= last }, k+1)
	defer victim.release()
	healthy := newBookkeeper(n, nil, 0)
	eng, err := engine.New(engine.Config{Logger: quiet,
		Feeds: []engine.FeedConfig{{Name: "f", Source: log.Source(), QueueSize: n}},
		Groups: []engine.GroupConfig{
			{Name: "healthy", Feeds: []string{"f"}, Workers: healthyWorkers, Processors: healthy.procs("h")},
			{Name: "victim", Feeds: []string{"f"}, Workers: workers, Processors: victim.procs("v")},
		},
	})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer func() {
		victim.release()
		eng.Stop(context.WithoutCancel(ctx))
	}()
	f := eng.Feed("f")
	// Every one of the m items given to both queues, the victim in the
	// middle of k+1.
	if err := waitFor(ctx, func() bool { return f.Status().Sequence >= int64(m) }); err != nil {
		return fmt.Errorf("publishing the first %d items: %w", m, err)
	}
	if err := wait(ctx, victim.entered, "the victim's gated item"); err != nil {
		return err
	}
	switch mode {
	case "unsubscribed":
		err = eng.Unsubscribe("victim", "f")
	case "resubscribed":
		if err = eng.Unsubscribe("victim", "f"); err == nil {
			err = eng.Subscribe("victim", "f")
		}
	case "fenced":
		err = eng.Fence("victim")
	}
	if err != nil {
		return fmt.Errorf("%s: %w", mode, err)
	}
	queue := func(st engine.FeedStatus, group string, removed bool) (engine.SubscriberStatus, bool) {
		for _, s := range st.Subscribers {
			if s.Queue == group+"/f" && s.Removed == removed {
				return s, true
			}
		}
		return engine.SubscriberStatus{}, false
	}
	st := f.Status()
	held, ok := queue(st, "victim", mode != "fenced")
	hq, ok2 := queue(st, "healthy", false)
	if !ok || !ok2 {
		fail("%s: the status names no queue victim/f (removed %v) or healthy/f: %+v", what, mode != "fenced", st.Subscribers)
		return nil
	}
	gen := held.Generation

	// A wrong generation: another group's queue, one never issued, or the
	// victim's new live queue (resubscribed): refused, nothing changes.
	other, want := hq.Generation, engine.ErrGeneration
	switch {
	case wrong == 1:
		other = gen + 1<<40
	case wrong == 2 && mode == "resubscribed":
		if live, ok := queue(st, "victim", false); ok {
			other, want = live.Generation, engine.ErrNotHeld
		}
	}
	before := log.Committed()
	if rel, err := eng.Release("f", "victim", other, "torture: wrong generation"); !errors.Is(err, want) || rel != (engine.Released{}) {
		fail("%s: a release of generation %d (the held queue's is %d) returned %+v, %v; want nothing released, %v",
			what, other, gen, rel, err, want)
	}
	if st := f.Status(); st.Released != 0 || !st.Lossless || log.Committed() > int64(k) {
		fail("%s: a refused release changed the feed: released %d lossless %v committed %d (was %d)",
			what, st.Released, st.Lossless, log.Committed(), before)
	}
	rel, err := eng.Release("f", "victim", gen, "torture: the operator gives up the backlog")
	if err != nil {
		fail("%s: the release of generation %d: %v", what, gen, err)
		return nil
	}
	// Read after the release: an item not completed then was not when the
	// release sealed the queue.
	doneAtRelease := sum(victim.completed, 1, m)
	st = f.Status()
	released := byGen(st, gen)
	if st.Released != rel.Unprocessed+rel.Processed || released.Released != st.Released || released.Generation != gen {
		fail("%s: the feed's released %d, the queue's %d (generation %d), the release's %d unprocessed + %d processed: want one count",
			what, st.Released, released.Released, released.Generation, rel.Unprocessed, rel.Processed)
	}
	if st.Lossless {
		fail("%s: the feed says lossless after the release of %d items", what, st.Released)
	}
	if workers == 1 {
		// One worker handles in order: 1..k completed, k+1 in flight.
		if rel.Unprocessed != int64(m-k) || rel.Processed != 0 || doneAtRelease != k || rel.FirstSeq != int64(k+1) || rel.LastSeq != int64(m) {
			fail("%s: released %d unprocessed and %d processed, seqs %d-%d (%d completed); want the %d items %d-%d the victim had not completed",
				what, rel.Unprocessed, rel.Processed, rel.FirstSeq, rel.LastSeq, doneAtRelease, m-k, k+1, m)
		}
	} else if rel.Unprocessed < int64(m-doneAtRelease) {
		fail("%s: released %d unprocessed and %d processed with %d of %d completed: want at least the %d not completed",
			what, rel.Unprocessed, rel.Processed, doneAtRelease, m, m-doneAtRelease)
	}
	if again, err := eng.Release("f", "victim", gen, "torture: twice"); !errors.Is(err, engine.ErrGeneration) {
		fail("%s: a second release of generation %d returned %+v, %v; want ErrGeneration (a release spends its generation)",
			what, gen, again, err)
	}
	// The commit moves past the released items, at once.
	if err := waitFor(ctx, func() bool { return log.Committed() >= int64(m) }); err != nil {
		fail("%s: the commit stays at %d after the release, want %d: %v", what, log.Committed(), m, err)
		return nil
	}

	// The items in flight complete now, after their release.
	victim.release()
	if mode == "fenced" {
		if err := eng.Unfence("victim"); err != nil {
			return err
		}
	}
	log.Append(ints(m+1, n)...)
	log.Close()
	if err := waitFor(ctx, func() bool {
		g := groupOf(eng.Status(), "victim")
		return log.Committed() == int64(n) && sum(healthy.handled, 1, n) == n && g.InFlight == 0 &&
			(workers > 1 || g.StaleTokens > 0)
	}); err != nil {
		fail("%s: the run never caught up after the release: committed %d of %d, healthy handled %d, victim %+v: %v",
			what, log.Committed(), n, sum(healthy.handled, 1, n), groupOf(eng.Status(), "victim"), err)
		return nil
	}
	fs, stale := f.Status(), groupOf(eng.Status(), "victim").StaleTokens
	released = byGen(fs, gen)
	if fs.Released != st.Released || released.Released != st.Released {
		fail("%s: the late completions changed what was released: %d, then %d (the queue's %d)",
			what, st.Released, fs.Released, released.Released)
	}
	// Each of the m items counts once: in the queue's dispatched prefix,
	// or released; a completion that ran counts once more for a released
	// item only if the release took it as processed, or it was refused
	// (stale).
	if released.Dispatched != int64(m)-fs.Released {
		fail("%s: the released queue dispatched %d and released %d of its %d items: an item counted twice or never",
			what, released.Dispatched, fs.Released, m)
	}
	if done := sum(victim.completed, 1, m); int64(done) != released.Dispatched+rel.Processed+stale {
		fail("%s: the victim completed %d of its first %d items: want its dispatched prefix %d + %d released as processed + %d refused (stale)",
			what, done, m, released.Dispatched, rel.Processed, stale)
	}
	if workers == 1 && stale != 1 {
		fail("%s: the late completion of item %d: %d stale tokens, want it refused once", what, k+1, stale)
	}
	for v := 1; v <= n; v++ {
		if h := healthy.handled[v].Load(); h != 1 {
			fail("%s: the healthy group handled item %d %d times, want once", what, v, h)
			break
		}
		if c := victim.completed[v].Load(); c > 1 {
			fail("%s: the victim completed item %d %d times", what, v, c)
			break
		}
	}
	if mode != "unsubscribed" {
		if got := sum(victim.completed, m+1, n); got != n-m {
			fail("%s: the victim's new queue completed %d of the %d items appended after the release", what, got, n-m)
		}
	}
	return nil
}

// byGen is the queue of generation gen in st.
func byGen(st engine.FeedStatus, gen int64) engine.SubscriberStatus {
	for _, s := range st.Subscribers {
		if s.Generation == gen {
			return s
		}
	}
	return engine.SubscriberStatus{}
}

// groupOf is group's status in st.
func groupOf(st engine.Status, group string) engine.GroupStatus {
	for _, g := range st.Groups {
		if g.Group == group {
			return g
		}
	}
	return engine.GroupStatus{}
}
