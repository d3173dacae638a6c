// The parallel-worker scheduler: how a group of several workers
// (GroupConfig.Workers > 1) takes items from its queues and shares them out.
//
// Invariants:
//
//   - Claims: the group's goroutine alone takes items from its queues
//     (stepParallel) and claims each with a token (the queue's generation,
//     its position in the queue); the workers only complete them.
//   - Prefix: a queue's dispatched count is its contiguous completed
//     prefix: every item up to it completed, the one after it did not.
//     Completions beyond it are kept in gapState.done until the prefix
//     reaches them (complete); only the prefix is ever acknowledged.
//   - Gap: the group claims no item more than MaxGap past the oldest
//     pending one (headLocal - dispatched <= maxGap), so gapState.done,
//     of maxGap+2 slots, never wraps onto a position still in use.
//   - Order: with OrderKey every item of a key goes to WorkerOf(key), in
//     queue order, so the items of a key are handled in sequence order;
//     with OrderNone any idle worker takes the next task.
//   - Marks: drops and source losses reach every worker after every item
//     published before them (handOutAll, then settleShared for
//     OrderNone).
//   - Staleness: a token of another generation than its queue's current
//     one (the group was subscribed again) moves nothing, and is counted.
//   - Held: once a worker fails to dispatch an item (a failure, a cut by
//     Stop), the group takes nothing more (held): nothing after the item
//     is dispatched, so nothing after it is committed.

package engine

import (
	"errors"
	"hash/fnv"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// Order says how a group of several workers shares out the items it
// takes.
type Order string

// The orders.
const (
	// OrderKey gives all the items of one key (GroupConfig.Key) to one
	// worker, which handles them in sequence order: WorkerOf(key,
	// Workers), so a run with the same Workers gives each key to the same
	// worker.
	OrderKey Order = "key"
	// OrderNone gives each item to the first idle worker: no order holds
	// between items.
	OrderNone Order = "none"
)

// DefaultMaxGap is GroupConfig.MaxGap when it is not set.
const DefaultMaxGap = 1024

// workerTasks is the capacity of a worker's task channel: enough for the
// group to run ahead of a worker finishing its item, small enough that a
// busy worker holds few items the others could take (OrderNone).
const workerTasks = 16

// ErrStaleToken is returned, and counted in the group's status, when a
// completion or checkpoint mark carries the token of another generation
// than its queue's current one (the group was subscribed again since, or
// the mark is of another engine): it never moves the commit. Callers of
// Checkpoint.DurableThrough match it with errors.Is.
var ErrStaleToken = errors.New("engine: stale token")

// ErrForeignMark: a checkpoint was given the zero Mark, or a mark of
// another feed's or group's checkpoint. It moves nothing.
// Checkpoint.DurableThrough returns it; callers match it with errors.Is.
var ErrForeignMark = errors.New("engine: mark of another checkpoint")

// generations numbers the queues (bindings) of every engine of the
// process: a token of one queue is never valid for another.
var generations atomic.Int64

// gapState tracks, for a queue of a group of several workers, the items
// completed beyond the queue's contiguous completed prefix
// (queue.dispatched: the items up to it are completed, the one after it is
// not). The group claims an item only while it lies within maxGap of the
// oldest pending one, so done never wraps onto a position still in use.
// Safe for concurrent use (mu).
type gapState struct {
	mu      sync.Mutex
	done    []bool         // by queue position modulo len(done)
	seqs    []atomic.Int64 // the feed sequence of the item claimed at each position (same index)
	claimed atomic.Int64   // positions claimed
	beyond  atomic.Int64
}

func newGapState(maxGap int64) *gapState {
	return &gapState{done: make([]bool, maxGap+2), seqs: make([]atomic.Int64, maxGap+2)}
}

// claim records that the item of feed sequence seq was taken at position
// pos (group goroutine).
func (gs *gapState) claim(pos, seq int64) {
	gs.seqs[pos%int64(len(gs.seqs))].Store(seq)
	gs.claimed.Store(pos)
}

// oldestPending is the sequence of the item after the prefix, if it was
// claimed; 0 otherwise.
func (gs *gapState) oldestPending(prefix int64) int64 {
	if gs.claimed.Load() <= prefix {
		return 0
	}
	return gs.seqs[(prefix+1)%int64(len(gs.seqs))].Load()
}

// queueOf is the group's current queue (binding) of feed f, nil when it
// does not subscribe to f.
func (g *group) queueOf(f *Feed) *binding {
	for _, b := range *g.bindings.Load() {
		if b.feed == f {
			return b
		}
	}
	return nil
}

// complete records that the items of feed f claimed with toks are
// completed, in the group's current queue of f, and moves that queue's
// prefix through every completed item after it. Each token's generation
// is the claim's (the queue it was taken from): a token of another
// generation than the current queue's (the group was unsubscribed, and
// maybe subscribed again, since the claim) is refused and counted, and
// moves nothing: its position is a position of another queue.
func (g *group) complete(f *Feed, toks ...token) error {
	if len(toks) == 0 {
		return nil
	}
	b := g.queueOf(f)
	if b == nil {
		g.stale.Add(int64(len(toks)))
		return ErrStaleToken
	}
	var err error
	gs := b.gap
	n := int64(len(gs.done))
	gs.mu.Lock()
	defer gs.mu.Unlock()
	prefix := b.dispatched.Load()
	for _, tok := range toks {
		if tok.Generation != b.gen || b.removed.Load() {
			g.stale.Add(1)
			err = ErrStaleToken
			continue
		}
		if tok.Position != prefix+1 {
			gs.done[tok.Position%n] = true
			gs.beyond.Add(1)
			continue
		}
		prefix++
		for gs.done[(prefix+1)%n] {
			gs.done[(prefix+1)%n] = false
			gs.beyond.Add(-1)
			prefix++
		}
	}
	b.dispatched.Store(prefix)
	return err
}

// stepParallel is step for a group of several workers: it takes items and
// hands each to its worker, as long as the queue's gap allows, and hands
// due timers to the workers owning them. It reports whether it did
// anything.
func (g *group) stepParallel() bool {
	did := g.reportReleased() // even fenced or held: it takes nothing
	blocked := false
	if !g.fenced.Load() && !g.held.Load() {
		for _, b := range *g.bindings.Load() {
			for range core.MaxBatch {
				if g.halted() {
					break // killed: the items still queued are never taken
				}
				if b.q.Taken()-b.dispatched.Load() > g.maxGap {
					blocked = true
					break
				}
				e, ok, dropped := g.next(b)
				did = did || dropped
				if !ok {
					break
				}
				did = true
				b.gap.claim(b.q.Taken(), e.Seq)
				c := claim{e: e, tok: token{Generation: b.gen, Epoch: b.gen, Position: b.q.Taken()}}
				wi := 0
				if g.order == OrderKey {
					wi = WorkerOf(g.key(e.Value), len(g.workers))
				}
				if g.pending[wi] = append(g.pending[wi], c); len(g.pending[wi]) >= g.chunkFor(wi) {
					g.handOut(b, wi)
				}
				if g.fenced.Load() || b.removed.Load() || g.held.Load() {
					break
				}
			}
			g.handOutAll(b)
		}
	}
	g.blocked(blocked)
	if g.fireTimers() {
		did = true
	}
	if !did && blocked {
		// Nothing to do but wait for the prefix to move: a worker's
		// completion wakes the group.
		g.parkBlocked()
		return true
	}
	return did
}

// chunk is how many items of one queue a group hands a worker at a time
// at most, when the workers have a backlog: then a chunk costs one channel
// operation (and one wake-up) instead of one per item, which on a busy
// machine is CPU the workers get back. While a worker (OrderKey) or the
// shared channel (OrderNone) has no backlog, items go out one by one, so an
// idle worker takes the next item at once and a slow item holds up no other.
const chunk = 16

// chunkFor is the size at which the items pending for worker wi are handed
// out: chunk when its channel already holds a backlog, else 1.
func (g *group) chunkFor(wi int) int {
	if g.order == OrderKey {
		if len(g.workers[wi].tasks) > 0 {
			return chunk
		}
		return 1
	}
	if len(g.shared) >= len(g.workers) {
		return chunk
	}
	return 1
}

// handOut hands the items pending for worker wi (OrderKey; the shared
// channel's with OrderNone) to it, as one task.
func (g *group) handOut(b *binding, wi int) {
	cs := g.pending[wi]
	if len(cs) == 0 {
		return
	}
	t := task{b: b, claims: append(g.freeChunk(), cs...)}
	g.pending[wi] = cs[:0]
	if g.order == OrderKey {
		w := g.workers[wi]
		w.inflight.Add(int64(len(t.claims)))
		w.tasks <- t
		return
	}
	g.sharedItems.Add(t.size())
	g.shared <- t // the first idle worker takes it
}

// freeChunk is an empty []claim for a task's items, reused when a worker
// returned one (the hand-out allocates nothing in the steady state).
func (g *group) freeChunk() []claim {
	select {
	case c := <-g.chunks:
		return c
	default:
		return make([]claim, 0, chunk)
	}
}

// reuse gives a task's []claim back for another hand-out (a worker, once
// the task is done), unless enough are spare.
func (g *group) reuse(c []claim) {
	clear(c)
	select {
	case g.chunks <- c[:0]:
	default:
	}
}

// handOutAll hands out every pending item of queue b.
func (g *group) handOutAll(b *binding) {
	for wi := range g.pending {
		g.handOut(b, wi)
	}
}

// WorkerOf is the worker, of workers, that handles the items of key in a
// key-ordered group: FNV-1a 32 of the key modulo workers. The assignment
// is stable: the same key and number of workers give the same worker in
// every run.
func WorkerOf(key string, workers int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(workers))
}

// blocked accounts the time the group waits with a queue's gap full.
func (g *group) blocked(now bool) {
	since := g.blockedSince.Load()
	switch {
	case now && since == 0:
		g.blockedSince.Store(time.Now().UnixNano())
	case !now && since != 0:
		g.gapBlocked.Add(time.Now().UnixNano() - since)
		g.blockedSince.Store(0)
	}
}

// gapWait is the time the group spent waiting with a queue's gap full,
// the current wait included.
func (g *group) gapWait() time.Duration {
	d := g.gapBlocked.Load()
	if since := g.blockedSince.Load(); since != 0 {
		d += time.Now().UnixNano() - since
	}
	return time.Duration(d)
}

// parkBlocked waits until a worker finishes a task (it notifies the group)
// or the group stops, yielding first.
func (g *group) parkBlocked() {
	for range minSpin {
		runtime.Gosched()
		if g.wakeable() {
			return
		}
	}
	g.sleeping.Store(true)
	defer g.sleeping.Store(false)
	if g.wakeable() || g.hasReleases.Load() || g.eng.killed.Load() { // a worker finished (or a release or Kill came) meanwhile: it may not have woken us
		return
	}
	select {
	case <-g.wake:
	case <-g.stop:
	}
}

// wakeable reports whether the prefix of a queue moved far enough for the
// group to take an item again.
func (g *group) wakeable() bool {
	for _, b := range *g.bindings.Load() {
		if b.q.Taken()-b.dispatched.Load() <= g.maxGap {
			return true
		}
	}
	return false
}

// closeWorkers closes the workers' task channels, once.
func (g *group) closeWorkers() {
	g.closeOnce.Do(func() {
		for _, w := range g.workers {
			close(w.tasks)
		}
		if g.shared != nil {
			close(g.shared)
		}
	})
}

// stopping reports whether Stop closed the group.
func (g *group) stopping() bool {
	select {
	case <-g.stop:
		return true
	default:
		return false
	}
}
