package engine

import (
	"sync/atomic"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/internal/ring"
)

// worker runs one instance of each of its group's processors: its own
// Hosts, and the scratch state of the item it is dispatching. A group of
// one worker dispatches on its own goroutine (worker 0, no channel); a
// group of several gives each worker a goroutine of its own and hands it
// tasks in order through its channel. A worker's state is touched only by
// the goroutine running it, but for what the overseer reads and keeps of
// the item it is on (at, atQ, seen, stuck).
type worker struct {
	g     *group
	id    int
	name  string // the group's name, or name#wN in a group of several workers (Input.Group, the group-level hooks)
	hosts []*core.Host
	names []string // its processors' names (the hosts' names)

	tasks    chan task     // several workers: the tasks, closed by the group when it stops
	done     chan struct{} // several workers: closed when run returns
	inflight atomic.Int64  // tasks handed to the worker and not finished

	in        Input
	dv        core.Delivery // the current item's delivery, reused: valid during the delivery only
	comps     []ownedCompletion
	failed    []bool
	compErr   []bool
	drops     []Drop
	completed []token // the tokens of a chunk's completed items (do)

	// Several workers, with GroupConfig.StallAfter: the item the worker
	// is on, or was on last (its queue, atQ, and its position in it, at;
	// 0 while it does a timer or drops), written per item; lastQ and
	// lastAt are their values for the worker alone. The worker is on it
	// while its inflight count is not 0. The overseer's: what it saw the
	// worker on (seen, its goroutine only) and the item it found the
	// worker stuck on (stuck), which the worker clears at the end of the
	// item's task.
	at     atomic.Int64
	atQ    atomic.Pointer[binding]
	lastQ  *binding
	lastAt int64
	seen   sighting
	stuck  atomic.Pointer[stall]

	// The batch: items handled, their BeforeComplete called, that wait for
	// the observers' Flush before they count as dispatched (in order); the
	// completions they registered (all core.BatchCompletion), in item
	// order, one flat slice for the batch; and whether a hook that may
	// stage rows ran since the last Flush.
	pending  []pendingItem
	deferred []ownedCompletion
	dirty    bool
}

// pendingItem is an item of the batch awaiting Flush: a copy of its Input
// (the worker's is reused), its delivery, its queue and token, and its
// completions: w.deferred[clo:chi].
type pendingItem struct {
	b        *binding
	tok      token
	in       Input
	dv       core.Delivery
	clo, chi int
}

// task is one thing a group hands a worker: an item of a queue (b, e,
// claimed with tok), a timer of one of its hosts (timer), or drops, source
// losses and items completed in an earlier run to report in its streams
// (marks).
type task struct {
	b      *binding
	claims []claim // the items, in queue order
	timer  *timerEntry
	marks  *marks
}

// size is what the task counts in a worker's inflight: its items, or 1.
func (t *task) size() int64 { return max(1, int64(len(t.claims))) }

// claim is one item a group handed a worker, and its token.
type claim struct {
	e   ring.Item
	tok token
}

// token identifies a claim: the group generation of the queue the item was
// taken from (it changes whenever the group is subscribed again and with
// every engine), the worker's ownership epoch, and the item's position in
// the queue. A completion, acknowledgement or checkpoint mark carrying a
// token of another generation than the queue's current one is stale: it is
// refused (ErrStaleToken), counted, and never moves the commit. A plain
// value.
type token struct {
	Generation int64 `json:"generation"`
	Worker     int   `json:"worker"`
	Epoch      int64 `json:"epoch"`
	Position   int64 `json:"position"`
}

// dispatch handles one item: every processor, with retries; then the
// observers' BeforeComplete (the recording is staged). An item that
// registered no completion, or only core.BatchCompletions, joins the
// batch (w.pending): once the observers' Flush returned nil (w.flush) its
// completions run, and it counts as dispatched. An item with another
// completion has the batch flushed (its rows and those of the pending
// items before it are written, their completions run), then its
// completion callbacks run, then AfterDispatch, and it counts as
// dispatched (w.count). It
// reports whether the item was handled: it is not when Stop cut a retry
// backoff, a processor or callback failed once Stop cancelled
// Cycle.Context, or an observer failed the group. Such an item holds the
// commit (nothing after it is dispatched either) and the next run delivers
// it again; the pending items before it are flushed first.
func (w *worker) dispatch(b *binding, e ring.Item, tok token) bool {
	var dv *core.Delivery
	if e.Positioned {
		dv = &w.dv
		setString(&dv.Feed, b.feed.name)
		dv.Sequence, dv.Epoch, dv.Attempt = e.Seq, e.Epoch, 0
		setString(&dv.Position.Key, e.Pos.Key)
		dv.Position.Offset = e.Pos.Offset
	}
	in := &w.in
	setString(&in.Group, w.name)
	setString(&in.Feed, b.feed.name)
	in.Seq = e.Seq
	if in.Delivery != dv {
		in.Delivery = dv
	}
	in.Item = e.Value
	if w.g.obs.BeforeDispatch != nil {
		w.g.obs.BeforeDispatch(w.name, in)
	}
	w.comps = w.comps[:0]
	attempts := w.g.retry.attempts()
	for pi, h := range w.hosts {
		if w.g.abandoned() {
			return w.cut(in) // killed: the processors not given it yet never are
		}
		w.failed[pi] = false
		for attempt := 0; ; attempt++ {
			d := dv
			if d != nil && attempt > 0 {
				c := *d
				c.Attempt = attempt
				d = &c
				in.Delivery = d
			}
			if w.g.obs.Received != nil {
				w.g.obs.Received(h.Name(), in)
			}
			t := h.Handle(d, e.Value)
			if w.g.obs.Handled != nil {
				w.g.obs.Handled(h.Name(), in, t)
			}
			if t.Err == nil {
				for _, c := range t.Completions {
					w.addCompletion(pi, c)
				}
				break
			}
			if attempt == 0 {
				w.failed[pi] = true
				if w.g.obs.Failed != nil {
					w.g.obs.Failed(h.Name(), in, t.Err)
				}
			}
			if w.g.ctx.Err() != nil {
				return w.cut(in)
			}
			if attempt+1 >= attempts {
				b.feed.failures.Add(1)
				w.g.eng.warnItem(itemAttrs(b.feed.name, w.g.name, e.Seq, positionOf(dv)),
					"feed %q seq %d: processor %q failed %d times, item skipped: %v", b.feed.name, e.Seq, h.Name(), attempts, t.Err)
				break
			}
			if !w.g.backoff() {
				return w.cut(in)
			}
			b.feed.retries.Add(1)
		}
		in.Delivery = dv
	}
	if w.g.abandoned() {
		return w.cut(in) // killed while its processors ran: abandoned
	}
	if w.g.obs.BeforeComplete != nil {
		w.dirty = true
		if err := w.g.obs.BeforeComplete(w.name, in); err != nil {
			w.g.fail("BeforeComplete", "", in, err)
			w.flush() // the items handled before it count once written
			return w.abandon(in)
		}
	}
	if w.g.obs.Flush != nil && w.deferrable() {
		p := pendingItem{b: b, tok: tok, in: *in, clo: len(w.deferred)}
		if dv != nil {
			p.dv = *dv
		}
		w.deferred = append(w.deferred, w.comps...)
		p.chi = len(w.deferred)
		w.pending = append(w.pending, p)
		clear(w.comps)
		w.comps = w.comps[:0]
		*in = Input{}
		return true
	}
	if len(w.comps) > 0 && !w.flushFor(in) {
		// Its rows (or a pending item's) were not written, or a pending
		// item's completion failed the group: its completions must not
		// run.
		return w.abandon(in)
	}
	switch w.complete(b, w.comps, in) {
	case completionsFailed:
		return w.abandon(in)
	case completionsCut:
		return w.cut(in)
	}
	clear(w.comps)
	w.comps = w.comps[:0]
	if w.g.obs.AfterDispatch != nil {
		w.g.obs.AfterDispatch(w.name, in)
	}
	w.count(b, tok)
	in.Item = nil // keep no item alive past its dispatch
	return true
}

// setString sets *p to v unless it holds v already. The worker's Input and
// Delivery are rewritten for every item, mostly with the strings they hold
// already: a store of a pointer costs a write barrier while the garbage
// collector marks, which at millions of items a second (a file source)
// was a tenth of the group's time.
func setString(p *string, v string) {
	if *p != v {
		*p = v
	}
}

// deferrable reports whether the item being dispatched may join the
// batch: every completion it registered (none, maybe) is a
// core.BatchCompletion.
func (w *worker) deferrable() bool {
	for _, oc := range w.comps {
		if _, ok := oc.c.(core.BatchCompletion); !ok {
			return false
		}
	}
	return true
}

// completionsResult is how an item's completions ended (complete).
type completionsResult int

const (
	completionsDone   completionsResult = iota // each ran (or failed every retry, and was skipped)
	completionsFailed                          // a CompletionFailed observer failed the group, or one failed once the group had failed
	completionsCut                             // Stop cut a retry backoff, or a completion failed once Stop had cancelled the cycle's context
)

// complete runs an item's completions, in order, each with retries (the
// group's RetryPolicy): in for the item, whose Delivery they see. The
// first failure of each processor's completions within the item goes to
// the CompletionFailed observer; one failing every try is warned of,
// counted and skipped. One that fails once the group has failed (a
// holder's Checkpoint.Fail, which a completion may call before it returns
// its error) is not retried nor skipped: its item does not count
// (completionsFailed). Used right after the item (dispatch) and for an
// item of the batch once its rows are written (flushFor).
func (w *worker) complete(b *binding, comps []ownedCompletion, in *Input) completionsResult {
	if w.g.abandoned() {
		return completionsCut // killed: not completed, not counted
	}
	if len(comps) == 0 {
		return completionsDone
	}
	clear(w.compErr)
	attempts := w.g.retry.attempts()
	for _, oc := range comps {
		if w.g.abandoned() {
			return completionsCut
		}
		owner := w.hosts[oc.owner].Name()
		for attempt := 0; ; attempt++ {
			err := w.hosts[oc.owner].Complete(oc.c, in.Delivery)
			if err == nil {
				break
			}
			if !w.compErr[oc.owner] {
				w.compErr[oc.owner] = true
				if w.g.obs.CompletionFailed != nil {
					if oerr := w.g.obs.CompletionFailed(owner, in, err); oerr != nil {
						w.g.fail("CompletionFailed", owner, in, oerr)
						return completionsFailed
					}
				}
			}
			if w.g.ctx.Err() != nil {
				return completionsCut
			}
			if w.g.dead.Load() {
				// The group failed (a holder's Checkpoint.Fail, maybe
				// from this very completion: its state cannot be
				// saved): the item does not count, the next run
				// delivers it again.
				return completionsFailed
			}
			if attempt+1 >= attempts {
				b.feed.completionFailures.Add(1)
				w.g.eng.warnItem(itemAttrs(b.feed.name, w.g.name, in.Seq, positionOf(in.Delivery)),
					"feed %q seq %d: completion of processor %q failed %d times, skipped: %v", b.feed.name, in.Seq, owner, attempts, err)
				break
			}
			if !w.g.backoff() {
				return completionsCut
			}
		}
	}
	return completionsDone
}

// flush calls the observers' Flush when a hook may have staged something
// since the last one, then lets the pending items count as dispatched, in
// order: each one's deferred completions (complete), AfterDispatch, then
// w.count. A Flush error fails the group: no pending item counts, and
// flush reports false; so it does when a pending item's completions fail
// the group or are cut by Stop: neither that item nor the later ones
// count.
func (w *worker) flush() bool { return w.flushFor(nil) }

// flushFor is flush for the dispatch of item in, which waits on it: a
// failure names the oldest pending item, or in.
func (w *worker) flushFor(in *Input) bool {
	if !w.dirty && len(w.pending) == 0 {
		return true
	}
	w.dirty = false
	if w.g.obs.Flush != nil {
		if err := w.g.obs.Flush(w.name); err != nil {
			held := in
			if len(w.pending) > 0 {
				held = &w.pending[0].in
			}
			w.g.fail("Flush", "", held, err)
			w.dropPending()
			return false
		}
	}
	for i := range w.pending {
		p := &w.pending[i]
		if p.in.Delivery != nil {
			p.in.Delivery = &p.dv
		}
		switch w.complete(p.b, w.deferred[p.clo:p.chi], &p.in) {
		case completionsFailed:
			w.dropPending()
			return false
		case completionsCut:
			w.warnCut(&p.in)
			w.dropPending()
			return false
		}
		if w.g.obs.AfterDispatch != nil {
			w.g.obs.AfterDispatch(w.name, &p.in)
		}
		w.count(p.b, p.tok)
	}
	w.dropPending()
	return true
}

// dropPending empties the batch, keeping nothing of its items.
func (w *worker) dropPending() {
	clear(w.pending)
	w.pending = w.pending[:0]
	clear(w.deferred)
	w.deferred = w.deferred[:0]
}

// count makes an item of queue b count as dispatched: at once in a group
// of one worker; with several, its token joins the chunk's completed ones
// (do records them with one lock of the queue's gap state).
func (w *worker) count(b *binding, tok token) {
	if len(w.g.workers) == 1 {
		n := b.dispatched.Add(1)
		if s := b.sealed.Load(); s != 0 {
			b.refuseLate(n, s) // an operator released the queue (Engine.Release)
		}
		return
	}
	w.completed = append(w.completed, tok)
}

// abandon ends the dispatch of an item that did not complete: it does not
// count as dispatched. It returns false, for dispatch to return.
func (w *worker) abandon(in *Input) bool {
	clear(w.comps)
	w.comps = w.comps[:0]
	*in = Input{}
	return false
}

// cut abandons an item that Stop cut, saying so: its retry backoff was
// under way, or it failed once Stop had cancelled Cycle.Context (the
// failure may be the cancellation itself: the item did not complete).
func (w *worker) cut(in *Input) bool {
	w.warnCut(in)
	w.flush() // the items handled before it count once written
	return w.abandon(in)
}

// warnCut warns that Stop (or a kill) cut the dispatch of item in.
func (w *worker) warnCut(in *Input) {
	if w.g.eng.killed.Load() {
		w.g.eng.warnItem(itemAttrs(in.Feed, w.g.name, in.Seq, positionOf(in.Delivery)),
			"feed %q seq %d: killed during the dispatch of group %q: not dispatched, the next run delivers it again", in.Feed, in.Seq, w.g.name)
		return
	}
	w.g.eng.warnItem(itemAttrs(in.Feed, w.g.name, in.Seq, positionOf(in.Delivery)),
		"feed %q seq %d: stop during the dispatch of group %q (a retry backoff, or a failure once the cycle's context was cancelled): not dispatched, the next run delivers it again", in.Feed, in.Seq, w.g.name)
}

// addCompletion keeps c once per delivery, across the group's processors
// (sameCompletion): a completion registered by several processors runs once,
// owned by the first.
func (w *worker) addCompletion(owner int, c core.Completion) {
	for _, x := range w.comps {
		if core.SameCompletion(x.c, c) {
			return
		}
	}
	w.comps = append(w.comps, ownedCompletion{owner, c})
}

// run is a worker's goroutine in a group of several: it does its tasks in
// order until the group closes its channel. An item is dispatched only
// while the group runs: once Stop closed the group, or the group failed or
// held an item, the items still queued to the worker are not dispatched
// (they stay uncommitted, and the next run delivers them again).
func (w *worker) run() {
	defer close(w.done)
	own, shared := w.tasks, w.g.shared
	for own != nil || shared != nil {
		var t task
		var ok bool
		select {
		case t, ok = <-own:
			if !ok {
				own = nil
				continue
			}
		case t, ok = <-shared:
			if !ok {
				shared = nil
				continue
			}
			w.inflight.Add(t.size()) // counted by the worker that takes it
			w.g.sharedItems.Add(-t.size())
			// What the group sent this worker before it handed t out (the
			// drop and loss marks before t's item, group.settleShared) is
			// done first, so that no mark follows an item published after
			// it.
			own = w.drainOwn(own)
		}
		w.do(t)
		w.inflight.Add(-t.size())
		w.g.notify()
	}
}

// drainOwn does the tasks waiting in the worker's own channel, without
// waiting for more; it returns nil for a closed channel.
func (w *worker) drainOwn(own chan task) chan task {
	for own != nil {
		select {
		case t, ok := <-own:
			if !ok {
				return nil
			}
			w.do(t)
			w.inflight.Add(-t.size())
			w.g.notify()
		default:
			return own
		}
	}
	return own
}

// do does one task.
func (w *worker) do(t task) {
	g := w.g
	switch {
	case t.timer != nil:
		w.offItem()
		if !g.dead.Load() && !g.abandoned() {
			w.fire(*t.timer)
		}
		w.flush()
	case t.marks != nil:
		w.offItem()
		w.reportDrops(t.marks)
		w.flush()
	default:
		// The chunk is one batch: its items' rows are flushed together
		// (before an item's completions, and at its end), and its
		// completions recorded together, with one lock of the queue's gap
		// state; an item not dispatched ends the chunk. Once the group is
		// unsubscribed from the queue, nothing more of it is dispatched
		// (as a group of one worker takes nothing more of it): what the
		// queue held and the group did not process is never acknowledged
		// in this run.
		watched := g.stallAfter > 0
		if watched && w.lastQ != t.b {
			w.lastQ = t.b
			w.atQ.Store(t.b)
		}
		for i, c := range t.claims {
			if g.dead.Load() || g.held.Load() || g.stopping() || t.b.removed.Load() || g.abandoned() {
				break
			}
			c.tok.Worker = w.id
			if watched {
				// One store per item, nothing else: the overseer finds
				// the worker idle by its inflight count.
				w.at.Store(c.tok.Position)
				w.lastAt = c.tok.Position
				if i == 0 {
					g.eng.ov.wake()
				}
			}
			if !w.dispatch(t.b, c.e, c.tok) {
				g.held.Store(true)
				break
			}
		}
		if !w.flush() {
			g.held.Store(true)
		}
		g.complete(t.b.feed, w.completed...)
		if watched && w.stuck.Load() != nil {
			w.stuck.Store(nil) // its item completed (or will not be)
		}
		w.completed = w.completed[:0]
		g.reuse(t.claims)
	}
}

// offItem notes that the worker does something else than an item (a timer,
// drops): the overseer does not take it for the item it was on last.
func (w *worker) offItem() {
	if w.lastAt != 0 {
		w.at.Store(0)
		w.lastAt = 0
	}
}

// fire runs a due timer of one of the worker's hosts, once the batch
// before it is flushed (not when the flush failed the group).
func (w *worker) fire(te timerEntry) {
	if !w.flush() {
		return
	}
	h := w.g.hosts[te.host]
	t := h.Fire(te.n)
	if t.Err != nil {
		w.g.eng.warnf("processor %q timer %d failed: %v", h.Name(), te.n, t.Err)
	}
	if w.g.obs.TimerFired != nil {
		w.dirty = true
		w.g.obs.TimerFired(h.Name(), t)
	}
}

// reportDrops tells the observers of drops, source losses and items
// completed in an earlier run in the worker's streams.
func (w *worker) reportDrops(m *marks) {
	if w.g.obs.Dropped != nil {
		for _, d := range m.drops {
			w.dirty = true
			d.Processors = w.names
			w.g.obs.Dropped(w.name, d)
		}
	}
	if w.g.obs.Lost != nil {
		for _, l := range m.lost {
			w.dirty = true
			l.Processors = w.names
			w.g.obs.Lost(w.name, l)
		}
	}
	if w.g.obs.AlreadyCompleted != nil {
		for _, c := range m.done {
			w.dirty = true
			c.Processors = w.names
			w.g.obs.AlreadyCompleted(w.name, c)
		}
	}
}
