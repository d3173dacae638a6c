package engine

import (
	"container/heap"
	"context"
	"github.com/blackbox-audit/blackbox/core"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// RetryPolicy says how often a failed item is tried in a processor (and a
// failed completion callback run) before it is skipped. Attempts counts
// every try: 1 means no retry. The zero value means 1.
type RetryPolicy struct {
	Attempts int
	Backoff  time.Duration
}

func (r RetryPolicy) attempts() int { return max(1, r.Attempts) }

// group is one goroutine (the agent) owning its queues and processors.
type group struct {
	name  string
	eng   *Engine
	hosts []*core.Host
	names []string
	retry RetryPolicy
	obs   *Observer
	clock core.Clock
	// ctx is what its cycles return from Cycle.Context; Stop cancels it
	// once the drain is over, after closing stop.
	ctx    context.Context
	cancel context.CancelFunc

	_ [line]byte

	bindings atomic.Pointer[[]*binding]
	fenced   atomic.Bool
	dead     atomic.Bool // failed: an observer hook failed (failure says why); it takes no more items
	failure  atomic.Pointer[ObserverError]
	sleeping atomic.Bool
	goid     atomic.Int64 // the goroutine running run (feed.go: onGroupGoroutine)
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}

	// Publishers read the fields above on every item; the group's goroutine
	// writes the ones below on every item: keep them apart.
	_ [line]byte

	timersMu sync.Mutex
	timers   timerHeap
	nTimers  atomic.Int64 // len(timers), read without the lock

	in      Input
	dv      core.Delivery // the current item's delivery, reused: valid during the delivery only
	drops   []Drop
	comps   []ownedCompletion
	failed  []bool
	compErr []bool
}

type ownedCompletion struct {
	owner int
	c     core.Completion
}

func (g *group) notify() {
	if g.sleeping.Load() {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

func (g *group) addBinding(b *binding) {
	old := g.bindings.Load()
	var nb []*binding
	if old != nil {
		nb = append(nb, (*old)...)
	}
	nb = append(nb, b)
	g.bindings.Store(&nb)
	g.notify()
}

func (g *group) removeBinding(b *binding) {
	old := g.bindings.Load()
	var nb []*binding
	for _, x := range *old {
		if x != b {
			nb = append(nb, x)
		}
	}
	g.bindings.Store(&nb)
}

// run is the group's goroutine: it dispatches items round-robin over its
// queues, fires due timers, and parks when there is nothing to do.
func (g *group) run() {
	defer close(g.done)
	g.goid.Store(goroutineID())
	for _, h := range g.hosts {
		if g.obs.Started != nil {
			if err := g.obs.Started(h.Name(), h.Processor()); err != nil {
				g.fail("Started", h.Name(), nil, err)
				break
			}
		}
	}
	idle := 0
	for {
		select {
		case <-g.stop:
			g.finish()
			return
		default:
		}
		if g.dead.Load() {
			// Failed: take nothing more, fire no timer; wait for Stop.
			<-g.stop
			return
		}
		if g.step() {
			idle = 0
			continue
		}
		if idle++; idle < minSpin || idle < maxSpin && g.sourceBehind() {
			runtime.Gosched()
			continue
		}
		g.park()
	}
}

// A group whose queues run dry yields (runtime.Gosched, cheap on an idle
// core) minSpin times before it parks. Once it has parked, the next publish
// must wake its thread: a system call for the publisher and a scheduling
// delay, much longer than a yield, before the group runs. A source that is
// behind (it has more to publish: a file source reading a file publishes a
// batch of lines, reads, publishes the next) would pay that on nearly every
// batch, so while one of its sources is behind a group yields up to maxSpin
// times, about as long as the source takes to read its next batch, before it
// parks. Groups whose sources are caught up, or that take pushes, spend
// minSpin yields: a trickle of items does not keep them spinning. The
// figures behind the two constants are in docs/PERFORMANCE.md's benchmarks.
const (
	minSpin = 64
	maxSpin = 1024
)

// sourceBehind reports whether a source of the group's feeds has more to
// publish.
func (g *group) sourceBehind() bool {
	for _, b := range *g.bindings.Load() {
		if b.feed.behind.Load() {
			return true
		}
	}
	return false
}

// batch is how many items a group takes from one queue before it looks at
// its other queues and its timers.
const batch = 64

// step does one pass of work; it reports whether it did anything.
func (g *group) step() bool {
	did := false
	if !g.fenced.Load() {
		for _, b := range *g.bindings.Load() {
			// Marks at or before the head are drops that happened before the
			// item about to be taken: report them first. The head is read
			// before the take so a drop marked after it is not reported
			// ahead of the items enqueued before it.
			for range batch {
				h := b.q.headLocal
				if g.emitDrops(b, h) {
					did = true
				}
				e, ok := b.q.take()
				if !ok {
					break
				}
				if b.q.headLocal&63 == 0 && b.feed.waiting.Load() && b.q.drained() {
					b.q.publishHead()
					b.feed.signalReady()
				}
				did = true
				if !g.dispatch(b, e) {
					// Not dispatched: the group failed, or Stop cut a
					// retry. It takes nothing after the item it holds.
					return did
				}
				// A timer that fell due while handling the item (After(0))
				// fires before the next item.
				g.fireTimers()
				if g.fenced.Load() || b.removed.Load() {
					break
				}
			}
		}
	}
	if g.fireTimers() {
		did = true
	}
	return did
}

func (g *group) emitDrops(b *binding, pos int64) bool {
	g.drops = b.takeMarks(pos, g.drops[:0])
	if len(g.drops) == 0 {
		return false
	}
	if g.obs.Dropped != nil {
		for _, d := range g.drops {
			d.Processors = g.names
			g.obs.Dropped(g.name, d)
		}
	}
	return true
}

func (g *group) park() {
	g.sleeping.Store(true)
	defer g.sleeping.Store(false)
	if !g.fenced.Load() {
		for _, b := range *g.bindings.Load() {
			b.q.publishHead()
			if b.q.nonEmpty() || b.hasMarks.Load() {
				return
			}
		}
		// Going to sleep with empty queues: a paused source may publish.
		for _, b := range *g.bindings.Load() {
			b.feed.signalReady()
		}
	}
	wait := 5 * time.Millisecond
	g.timersMu.Lock()
	if len(g.timers) > 0 {
		wait = min(wait, max(0, g.timers[0].due.Sub(g.clock.Now())))
	}
	g.timersMu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-g.wake:
	case <-g.stop:
	case <-t.C:
	}
}

// dispatch handles one item: every processor, with retries; then the
// observers' BeforeComplete (the recording is written); then the completion
// callbacks; then AfterDispatch; then the dispatched counter. It reports
// whether the item was dispatched: it is not when Stop cut a retry backoff,
// a processor or callback failed once Stop cancelled Cycle.Context, or an
// observer failed the group. Such an item holds the commit (nothing
// after it is dispatched either) and the next run delivers it again.
func (g *group) dispatch(b *binding, e envelope) bool {
	var dv *core.Delivery
	if e.positioned {
		g.dv = core.Delivery{Feed: b.feed.name, Sequence: e.seq, Epoch: e.epoch, Position: e.pos}
		dv = &g.dv
	}
	in := &g.in
	*in = Input{Group: g.name, Feed: b.feed.name, Seq: e.seq, Delivery: dv, Item: e.item}
	if g.obs.BeforeDispatch != nil {
		g.obs.BeforeDispatch(g.name, in)
	}
	g.comps = g.comps[:0]
	attempts := g.retry.attempts()
	for pi, h := range g.hosts {
		g.failed[pi], g.compErr[pi] = false, false
		for attempt := 0; ; attempt++ {
			d := dv
			if d != nil && attempt > 0 {
				c := *d
				c.Attempt = attempt
				d = &c
				in.Delivery = d
			}
			if g.obs.Received != nil {
				g.obs.Received(h.Name(), in)
			}
			t := h.Handle(d, e.item)
			if g.obs.Handled != nil {
				g.obs.Handled(h.Name(), in, t)
			}
			if t.Err == nil {
				for _, c := range t.Completions {
					g.addCompletion(pi, c)
				}
				break
			}
			if attempt == 0 {
				g.failed[pi] = true
				if g.obs.Failed != nil {
					g.obs.Failed(h.Name(), in, t.Err)
				}
			}
			if g.ctx.Err() != nil {
				return g.cut(in)
			}
			if attempt+1 >= attempts {
				b.feed.failures.Add(1)
				g.eng.warnf("feed %q seq %d: processor %q failed %d times, item skipped: %v", b.feed.name, e.seq, h.Name(), attempts, t.Err)
				break
			}
			if !g.backoff() {
				return g.cut(in)
			}
		}
		in.Delivery = dv
	}
	if g.obs.BeforeComplete != nil {
		if err := g.obs.BeforeComplete(g.name, in); err != nil {
			g.fail("BeforeComplete", "", in, err)
			return g.abandon(in)
		}
	}
	for _, oc := range g.comps {
		owner := g.hosts[oc.owner].Name()
		for attempt := 0; ; attempt++ {
			err := g.hosts[oc.owner].Complete(oc.c, dv)
			if err == nil {
				break
			}
			if !g.compErr[oc.owner] {
				g.compErr[oc.owner] = true
				if g.obs.CompletionFailed != nil {
					if oerr := g.obs.CompletionFailed(owner, in, err); oerr != nil {
						g.fail("CompletionFailed", owner, in, oerr)
						return g.abandon(in)
					}
				}
			}
			if g.ctx.Err() != nil {
				return g.cut(in)
			}
			if attempt+1 >= attempts {
				b.feed.completionFailures.Add(1)
				g.eng.warnf("feed %q seq %d: completion of processor %q failed %d times, skipped: %v", b.feed.name, e.seq, owner, attempts, err)
				break
			}
			if !g.backoff() {
				return g.cut(in)
			}
		}
	}
	clear(g.comps)
	if g.obs.AfterDispatch != nil {
		g.obs.AfterDispatch(g.name, in)
	}
	*in = Input{}
	b.q.dispatched.Add(1)
	return true
}

// abandon ends the dispatch of an item that did not complete: it does not
// count as dispatched. It returns false, for dispatch to return.
func (g *group) abandon(in *Input) bool {
	clear(g.comps)
	g.comps = g.comps[:0]
	*in = Input{}
	return false
}

// cut abandons an item that Stop cut, saying so: its retry backoff was
// under way, or it failed once Stop had cancelled Cycle.Context (the
// failure may be the cancellation itself: the item did not complete).
func (g *group) cut(in *Input) bool {
	g.eng.warnf("feed %q seq %d: stop during the dispatch of group %q (a retry backoff, or a failure once the cycle's context was cancelled): not dispatched, the next run delivers it again", in.Feed, in.Seq, g.name)
	return g.abandon(in)
}

// fail stops the group because an observer hook failed: it keeps the first
// failure, then marks the group dead, which its feeds see as a consumer that
// cannot take items (a positioned feed pauses and reports it stalled). in
// is the item held back, nil for none.
func (g *group) fail(hook, processor string, in *Input, err error) {
	oe := &ObserverError{Group: g.name, Hook: hook, Processor: processor, Err: err}
	if in != nil {
		oe.Feed, oe.Seq = in.Feed, in.Seq
	}
	if g.failure.CompareAndSwap(nil, oe) {
		g.eng.warnf("%v", oe)
	}
	g.dead.Store(true)
}

// addCompletion keeps c once per delivery, across the group's processors
// (sameCompletion): a completion registered by several processors runs once,
// owned by the first.
func (g *group) addCompletion(owner int, c core.Completion) {
	for _, x := range g.comps {
		if core.SameCompletion(x.c, c) {
			return
		}
	}
	g.comps = append(g.comps, ownedCompletion{owner, c})
}

// backoff sleeps the retry backoff; false when the group is stopping (the
// try that failed did not complete: its item is not dispatched).
func (g *group) backoff() bool {
	if g.retry.Backoff <= 0 {
		return true
	}
	t := time.NewTimer(g.retry.Backoff)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-g.stop:
		return false
	}
}

// finish ends the group on a clean stop: drops marked at the end of its
// queues are reported, then each processor's stream is closed. A failed
// group does not end cleanly: finish is not called for it.
func (g *group) finish() {
	for _, b := range *g.bindings.Load() {
		g.emitDrops(b, b.q.headLocal)
	}
	for _, h := range g.hosts {
		if g.obs.Stopped != nil {
			if err := g.obs.Stopped(h.Name()); err != nil {
				g.fail("Stopped", h.Name(), nil, err)
				return
			}
		}
	}
}

// timers

type timerEntry struct {
	due  time.Time
	host int
	n    int
}

type timerHeap []timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	if h[i].host != h[j].host {
		return h[i].host < h[j].host
	}
	return h[i].n < h[j].n
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (g *group) schedule(host int) func(n int, due time.Time) {
	return func(n int, due time.Time) {
		g.timersMu.Lock()
		heap.Push(&g.timers, timerEntry{due: due, host: host, n: n})
		g.nTimers.Store(int64(len(g.timers)))
		g.timersMu.Unlock()
		if g.obs.TimerSet != nil {
			g.obs.TimerSet(g.names[host], n, due)
		}
	}
}

// fireTimers runs the timers that are due; it reports whether any ran.
func (g *group) fireTimers() bool {
	fired := false
	for g.nTimers.Load() > 0 {
		g.timersMu.Lock()
		if len(g.timers) == 0 || g.fenced.Load() || g.timers[0].due.After(g.clock.Now()) {
			g.timersMu.Unlock()
			return fired
		}
		te := heap.Pop(&g.timers).(timerEntry)
		g.nTimers.Store(int64(len(g.timers)))
		g.timersMu.Unlock()
		h := g.hosts[te.host]
		t := h.Fire(te.n)
		if t.Err != nil {
			g.eng.warnf("processor %q timer %d failed: %v", h.Name(), te.n, t.Err)
		}
		if g.obs.TimerFired != nil {
			g.obs.TimerFired(h.Name(), t)
		}
		fired = true
	}
	return fired
}
