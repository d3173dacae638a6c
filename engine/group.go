package engine

import (
	"container/heap"
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/internal/ring"
)

// RetryPolicy says how often a failed item is tried in a processor (and a
// failed completion callback run) before it is skipped. Attempts counts
// every try: 1 means no retry. The zero value means 1.
type RetryPolicy struct {
	Attempts int
	Backoff  time.Duration
}

func (r RetryPolicy) attempts() int { return max(1, r.Attempts) }

// group is one goroutine (the agent) owning its queues and its workers:
// one worker (dispatched on the group's goroutine), or several, each with
// a goroutine and instances of the processors of its own, to which the
// group hands the items it takes (by key, or to the least busy).
type group struct {
	name        string
	eng         *Engine
	workers     []*worker
	shared      chan task    // several workers, OrderNone: the items, taken by the first idle worker
	pending     [][]claim    // several workers: items taken in this step, not yet handed out, per worker (OrderNone: [0])
	sharedItems atomic.Int64 // the items in shared
	chunks      chan []claim // several workers: spare []claim for the tasks' items, given back by the workers
	hosts       []*core.Host // every worker's hosts: worker w's processor p at w*nprocs+p
	nprocs      int
	order       Order
	key         func(item any) string
	maxGap      int64
	stallAfter  time.Duration // GroupConfig.StallAfter resolved: 0 never (and for one worker)
	retry       RetryPolicy
	obs         *Observer
	clock       core.Clock
	// ctx is what its cycles return from Cycle.Context; Stop cancels it
	// once the drain is over, after closing stop.
	ctx    context.Context
	cancel context.CancelFunc

	_ [line]byte

	bindings atomic.Pointer[[]*binding]
	bindMu   sync.Mutex // serialises the changes of bindings
	fenced   atomic.Bool
	dead     atomic.Bool // failed: an observer hook or a holder's save failed (failure says why); it takes no more items
	failure  atomic.Pointer[groupFailure]
	sleeping atomic.Bool
	held     atomic.Bool // several workers: one did not dispatch its item (a failure, a cut); the group takes nothing more
	quiet    atomic.Bool // killed: the group finished (or abandoned) the items it had in flight (kill.go)
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}

	// Publishers read the fields above on every item; the group's goroutine
	// writes the ones below on every item: keep them apart.
	_ [line]byte

	timersMu sync.Mutex
	timers   timerHeap
	nTimers  atomic.Int64 // len(timers), read without the lock

	marks marks // emitDrops's, reused

	rel         releases    // what operator releases left to report (Engine.Release)
	hasReleases atomic.Bool // rel holds something

	// Several workers: what the status reports of the gap.
	gapBlocked   atomic.Int64 // nanoseconds the group waited with a queue's gap full
	blockedSince atomic.Int64 // when it began waiting (Unix ns), 0 when not
	stale        atomic.Int64 // completions and marks refused for a stale token
	closeOnce    sync.Once    // closeWorkers
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
	g.bindMu.Lock()
	defer g.bindMu.Unlock()
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
	g.bindMu.Lock()
	defer g.bindMu.Unlock()
	old := g.bindings.Load()
	var nb []*binding
	for _, x := range *old {
		if x != b {
			nb = append(nb, x)
		}
	}
	g.bindings.Store(&nb)
}

// replaceBinding puts nb in b's place (Engine.Release).
func (g *group) replaceBinding(b, nb *binding) {
	g.bindMu.Lock()
	defer g.bindMu.Unlock()
	nbs := slices.Clone(*g.bindings.Load())
	if i := slices.Index(nbs, b); i >= 0 {
		nbs[i] = nb
	} else {
		nbs = append(nbs, nb)
	}
	g.bindings.Store(&nbs)
	g.notify()
}

// run is the group's goroutine: it dispatches items round-robin over its
// queues, fires due timers, and parks when there is nothing to do.
func (g *group) run() {
	defer close(g.done)
	for _, h := range g.hosts {
		if g.obs.Started != nil {
			if err := g.obs.Started(h.Name(), h.Processor()); err != nil {
				g.fail("Started", h.Name(), nil, err)
				break
			}
		}
	}
	if len(g.workers) > 1 {
		var wg sync.WaitGroup
		for _, w := range g.workers {
			wg.Go(w.run)
		}
		defer wg.Wait()
		defer g.closeWorkers()
	}
	idle := 0
	for {
		select {
		case <-g.stop:
			if !g.dead.Load() { // a group failed meanwhile (from another goroutine) does not end cleanly
				g.finish()
			}
			return
		default:
		}
		if g.dead.Load() {
			// Failed: take nothing more, fire no timer; wait for Stop,
			// reporting what operator releases leave to report.
			g.waitDead()
			return
		}
		if g.eng.killed.Load() {
			// Killed: take nothing more, fire no timer; end once the
			// kill's end closes the group.
			g.stopKilled()
			return
		}
		if len(g.workers) > 1 {
			if g.stepParallel() {
				idle = 0
				continue
			}
			if idle++; idle < minSpin {
				runtime.Gosched()
				continue
			}
			g.park()
			continue
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

// step does one pass of work; it reports whether it did anything. The
// items it takes from one queue in a pass are one batch: the observers'
// Flush runs at its end (and before a completion or a timer within it),
// and only then do its items count as dispatched (worker.dispatch).
func (g *group) step() bool {
	w := g.workers[0]
	did := g.reportReleased() // even fenced: it takes nothing
	if !g.fenced.Load() {
		for _, b := range *g.bindings.Load() {
			// Marks at or before the head are drops that happened before the
			// item about to be taken: report them first. The head is read
			// before the take so a drop marked after it is not reported
			// ahead of the items enqueued before it.
			for range core.MaxBatch {
				if g.halted() {
					break // killed: the items still queued are never taken
				}
				e, ok, dropped := g.next(b)
				did = did || dropped
				if !ok {
					break
				}
				did = true
				if !w.dispatch(b, e, token{}) {
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
			if !w.flush() {
				return did
			}
		}
	}
	if g.fireTimers() {
		did = true
	}
	w.flush()
	return did
}

// emitDrops reports the drops and source losses marked at or before queue
// position pos (with done, the items not handed again marked there too):
// to
// the single worker's streams at once, or, with several workers, to every
// worker's streams through its tasks, in order with its items.
// next reports the drops marked at or before the queue's head, then takes
// the next item, if any; once the queue drained to half it signals a
// paused source (consumer only). dropped says whether drops were reported.
func (g *group) next(b *binding) (e ring.Item, ok, dropped bool) {
	pos := b.q.Taken()
	dropped = g.emitDrops(b, pos, false)
	e, ok = b.q.Take()
	if ok {
		// Items not handed again (completed in an earlier run) are
		// reported once an item follows them: the feed may extend the
		// last run of them until it places one.
		dropped = g.emitDrops(b, pos, true) || dropped
	}
	if ok && b.q.Taken()&63 == 0 && b.feed.waiting.Load() && b.q.Drained() {
		b.q.PublishHead()
		b.feed.signalReady()
	}
	return e, ok, dropped
}

func (g *group) emitDrops(b *binding, pos int64, done bool) bool {
	g.marks.reset()
	b.takeMarks(pos, &g.marks, done)
	if g.marks.empty() {
		return false
	}
	if len(g.workers) == 1 {
		g.workers[0].reportDrops(&g.marks)
		return true
	}
	// The items taken before the marks reach their workers first: those
	// still pending are handed out now (a worker does its tasks in order),
	// and with OrderNone every item handed out is done before the marks go
	// out (settleShared), so that no worker reads a mark and then an item
	// published before it.
	g.handOutAll(b)
	if g.order == OrderNone {
		g.settleShared()
	}
	for _, w := range g.workers {
		w.inflight.Add(1)
		w.tasks <- task{marks: g.marks.clone()}
	}
	return true
}

// settleShared waits until every item handed out so far was done (OrderNone:
// the shared channel empty, no worker with a task in hand), or the group
// stops or fails. A mark sent to the workers then comes after every item
// published before it in every worker's stream, and a worker that takes an
// item published after it does the mark first (worker.run).
func (g *group) settleShared() {
	for !g.workersIdle() && !g.dead.Load() {
		g.sleeping.Store(true)
		if g.workersIdle() { // done meanwhile: the worker may not wake us
			g.sleeping.Store(false)
			return
		}
		select {
		case <-g.wake:
		case <-g.stop:
			g.sleeping.Store(false)
			return
		}
		g.sleeping.Store(false)
	}
}

// workersIdle reports whether no item is waiting in the shared channel and
// no worker has a task in hand. A worker counts a shared task in its
// inflight before the channel's count drops, so no task is between them.
func (g *group) workersIdle() bool {
	if g.sharedItems.Load() != 0 {
		return false
	}
	for _, w := range g.workers {
		if w.inflight.Load() != 0 {
			return false
		}
	}
	return true
}

func (g *group) park() {
	g.sleeping.Store(true)
	defer g.sleeping.Store(false)
	if g.hasReleases.Load() || g.eng.killed.Load() { // a release or Kill's notify may have come before sleeping was set
		return
	}
	if !g.fenced.Load() {
		for _, b := range *g.bindings.Load() {
			b.q.PublishHead()
			if b.q.NonEmpty() || b.hasMarks.Load() {
				return
			}
		}
		// Going to sleep with empty queues: a paused source may publish.
		for _, b := range *g.bindings.Load() {
			b.feed.signalReady()
		}
	}
	// Idle: what a waiter of the engine waits for (its queues drained)
	// may hold now.
	g.eng.watch.note()
	// Every change that gives the group work wakes it (notify): an item
	// or a mark in a queue, a binding added, an unfence, a worker's task
	// done, a failure, Stop. Only a pending timer is waited for by time:
	// its due time is read from the timer clock, which may be moved by
	// others (a deterministic clock), so it is looked at again every
	// timerPoll at most.
	var due <-chan time.Time
	g.timersMu.Lock()
	if len(g.timers) > 0 {
		t := time.NewTimer(min(timerPoll, max(0, g.timers[0].due.Sub(g.clock.Now()))))
		defer t.Stop()
		due = t.C
	}
	g.timersMu.Unlock()
	select {
	case <-g.wake:
	case <-g.stop:
	case <-due:
	}
}

// timerPoll bounds how long a parked group with a pending timer waits
// before it reads the timer clock again.
const timerPoll = 5 * time.Millisecond

// groupFailure is why a group failed: err (an *ObserverError or a
// *DurableError) and the cause it wraps, which the status names.
type groupFailure struct {
	err   error
	cause error
}

// fail stops the group because an observer hook failed. in is the item
// held back, nil for none.
func (g *group) fail(hook, processor string, in *Input, err error) {
	oe := &ObserverError{Group: g.name, Hook: hook, Processor: processor, Err: err}
	if in != nil {
		oe.Feed, oe.Seq = in.Feed, in.Seq
	}
	g.failWith(oe, err)
}

// failWith marks the group dead, which its feeds see as a consumer that
// cannot take items (a positioned feed pauses and reports it stalled), then
// keeps its first failure (err, wrapping cause). Dead comes first: once
// Engine.Err reports the failure, a Stop it prompts finds the group dead
// and does not end it cleanly. Safe from any goroutine.
func (g *group) failWith(err, cause error) {
	g.dead.Store(true)
	if g.failure.CompareAndSwap(nil, &groupFailure{err: err, cause: cause}) {
		g.eng.warnf("%v", err)
	}
	g.eng.watch.fail()
	g.eng.watch.note()
	g.notify()
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
	g.reportReleased()
	for _, b := range *g.bindings.Load() {
		g.emitDrops(b, b.q.Taken(), true)
	}
	if len(g.workers) == 1 && !g.workers[0].flush() && g.dead.Load() {
		// The flush failed the group. (A batch cut by the stop, or
		// abandoned by a kill, does not count, but the streams end.)
		return
	}
	if len(g.workers) > 1 {
		// Every worker ends its tasks before its streams are closed.
		g.closeWorkers()
		for _, w := range g.workers {
			<-w.done
		}
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

// waitDead is the run of a failed group: it waits for Stop, and
// reports in its streams what operator releases leave to report
// (Engine.Release) meanwhile.
func (g *group) waitDead() {
	for {
		g.sleeping.Store(true)
		if g.hasReleases.Load() {
			g.sleeping.Store(false)
			g.reportReleased()
			if len(g.workers) == 1 {
				g.workers[0].flush()
			}
			continue
		}
		select {
		case <-g.stop:
			g.sleeping.Store(false)
			return
		case <-g.wake:
			g.sleeping.Store(false)
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
			g.obs.TimerSet(g.hosts[host].Name(), n, due)
		}
	}
}

// timerDueBy reports whether a timer not fired yet is due at or before t.
func (g *group) timerDueBy(t time.Time) bool {
	if g.nTimers.Load() == 0 {
		return false
	}
	g.timersMu.Lock()
	defer g.timersMu.Unlock()
	return len(g.timers) > 0 && !g.timers[0].due.After(t)
}

// fireTimers runs the timers that are due; it reports whether any ran.
func (g *group) fireTimers() bool {
	fired := false
	for g.nTimers.Load() > 0 && !g.eng.killed.Load() {
		g.timersMu.Lock()
		if len(g.timers) == 0 || g.fenced.Load() || g.timers[0].due.After(g.clock.Now()) {
			g.timersMu.Unlock()
			return fired
		}
		te := heap.Pop(&g.timers).(timerEntry)
		g.nTimers.Store(int64(len(g.timers)))
		g.timersMu.Unlock()
		if len(g.workers) > 1 {
			// The timer's host belongs to a worker: it fires there, in
			// order with the worker's items.
			w := g.workers[te.host/g.nprocs]
			w.inflight.Add(1)
			w.tasks <- task{timer: &te}
		} else {
			g.workers[0].fire(te)
		}
		fired = true
	}
	return fired
}
