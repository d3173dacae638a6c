package recorder

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// proc is one processor's recording state. Apart from broken (atomic), it is
// touched only by the processor's group goroutine.
type proc struct {
	name   string
	record bool
	broken atomic.Bool
	next   int64  // the next row's index
	inputs int64  // input rows written (INDEXED, INLINE, TIMER)
	staged int64  // rows staged in its group's batch, not yet written: they take the indexes from next on
	group  string // the group (worker) whose batch holds its staged rows

	// The item being dispatched (feed, seq).
	inItem    bool
	feed      string
	seq       int64
	failed    bool // a failed attempt: FAILED instead of the input's rows
	compFail  bool // a completion failed: FAILED after the input's rows
	failErr   error
	failAt    time.Time
	instant   time.Time
	payload   []byte
	indexed   bool
	handled   bool
	delivery  core.Delivery
	delivered bool
	outputs   []output
	reads     []time.Time
}

type output struct {
	sink    string
	payload []byte
}

func (p *proc) endItem() {
	p.inItem, p.failed, p.compFail, p.handled, p.delivered, p.indexed = false, false, false, false, false, false
	p.failErr, p.payload, p.reads = nil, nil, nil
	clear(p.outputs)
	p.outputs = p.outputs[:0]
}

// groupState is the item a group (a worker of a group) is dispatching:
// the recorded processors that received it (broken ones included), in
// order; and the group's batch: the rows staged since its last Flush, of
// every processor of the group, in the order the hooks ran, written by
// Flush with one Append. It is touched only by the group's goroutine.
type groupState struct {
	touched []*proc
	rows    []store.Entry // the batch's rows
	parts   []part        // each processor's run of rows in it, in order
	size    int           // the batch's approximate encoded size, bytes
	// err: a write of the batch failed. Every later Flush returns it:
	// the items of that batch were not recorded, and the group fails.
	err error
}

// FlushBytes bounds a group's batch: when the rows staged since its last
// Flush reach about this many bytes (payloads, details and the other
// fields), the recorder writes them at once, without waiting for the
// engine's Flush. The engine bounds a batch by inputs: the items it takes
// from one queue in a pass (64), or the chunk a worker was handed.
const FlushBytes = 1 << 20

// stage adds the rows of p appended to the batch from index lo on:
// they are p's rows with the indexes from p.next+p.staged on, inputs of
// them input rows. Rows a store cannot hold (store.Validate) are taken
// back and stop p's recording at once, so that a batch holds only rows
// every store accepts.
func (r *Recorder) stage(gs *groupState, p *proc, group string, lo int, inputs int64) {
	n := len(gs.rows) - lo
	if n == 0 {
		return
	}
	if err := validate(gs.rows[lo:]); err != nil {
		clear(gs.rows[lo:])
		gs.rows = gs.rows[:lo]
		r.breakProc(p, err)
		return
	}
	gs.parts = append(gs.parts, part{p: p, lo: lo, hi: len(gs.rows), inputs: inputs})
	p.staged += int64(n)
	p.group = group
	for i := lo; i < len(gs.rows); i++ {
		e := &gs.rows[i]
		gs.size += 64 + len(e.Processor) + len(e.Source) + len(e.Key) + len(e.Payload) + len(e.Detail) + 32*len(e.Reads)
	}
}

// at is the index of p's next row: after its written and staged ones.
func (p *proc) at() int64 { return p.next + p.staged }

func (r *Recorder) proc(name string) *proc {
	if v, ok := r.procs.Load(name); ok {
		return v.(*proc)
	}
	v, _ := r.procs.LoadOrStore(name, &proc{name: name, record: r.only == nil || r.only[name], next: 1})
	return v.(*proc)
}

func (r *Recorder) group(name string) *groupState {
	if v, ok := r.groups.Load(name); ok {
		return v.(*groupState)
	}
	v, _ := r.groups.LoadOrStore(name, &groupState{})
	return v.(*groupState)
}

// live returns the recorded, unbroken processor of that name, or nil.
func (r *Recorder) live(name string) *proc {
	p := r.proc(name)
	if !p.record || p.broken.Load() {
		return nil
	}
	return p
}

// Observer returns the engine hooks that record. Put it in
// engine.Config.Observer (combine it with others with Observer.Then).
func (r *Recorder) Observer() engine.Observer {
	committed := r.committed
	if r.noCommits {
		committed = nil
	}
	return engine.Observer{
		Started:          r.started,
		BeforeDispatch:   r.beforeDispatch,
		Received:         r.received,
		Handled:          r.handled,
		Failed:           r.failed,
		BeforeComplete:   r.beforeComplete,
		Flush:            r.flushGroup,
		CompletionFailed: r.completionFailed,
		AfterDispatch:    r.afterDispatch,
		Dropped:          r.dropped,
		Lost:             r.lost,
		AlreadyCompleted: r.alreadyCompleted,
		TimerFired:       r.timerFired,
		Stopped:          r.stopped,
		Committed:        committed,
		Killed:           r.kill,
		LossState:        r.lossState,
		Acted:            r.acted,
	}
}

// kill keeps why the engine was killed: every END row written from then on
// says it (store.End.Killed).
func (r *Recorder) kill(reason string) { r.killed.Store(&reason) }

// started stages START in the opening (see New), which the last stream
// META lists writes; once the opening is written, it writes START on its
// own. An error (the stream cannot be started, the opening cannot be
// written) fails the processor's group before it handles anything.
func (r *Recorder) started(name string, pr core.Processor) error {
	p := r.proc(name)
	if !p.record {
		return nil
	}
	if p.at() != 1 || p.broken.Load() {
		r.breakProc(p, fmt.Errorf("recorder: processor %q started twice: a Recorder records one run", name))
		return r.brokenErr(p)
	}
	row := store.Entry{Processor: name, Index: p.at(), Kind: store.KindStart, Instant: r.clock.Now()}
	err := checkName("processor", name)
	if s, ok := pr.(core.Snapshotter); ok && err == nil {
		if row.Payload, err = s.Snapshot(); err != nil {
			err = fmt.Errorf("recorder: snapshot: %w", err)
		}
	}
	if err == nil {
		err = holdable([]store.Entry{row})
	}
	if err != nil {
		r.breakProc(p, err)
		r.mu.Lock()
		r.startStaged(name, false) // it never will be: the opening does not wait for it
		r.mu.Unlock()
		return r.brokenErr(p)
	}
	r.mu.Lock()
	if !r.open && r.openErr == nil && !r.closed {
		r.head = append(r.head, row)
		r.headProcs = append(r.headProcs, p)
		p.next++
		r.startStaged(name, true)
		r.mu.Unlock()
		return r.brokenErr(p)
	}
	r.mu.Unlock()
	r.appendParts([]store.Entry{row}, []part{{p: p, lo: 0, hi: 1}})
	return r.brokenErr(p)
}

// startStaged notes that the stream's START is in the opening (staged) or
// never will be, and writes the opening once every stream META lists is, or
// at the first START staged when META lists none (r.mu held). A failure
// breaks the processors whose START it held.
func (r *Recorder) startStaged(name string, staged bool) {
	if r.open || r.openErr != nil || r.closed || r.listed && !r.awaiting[name] || !r.listed && !staged {
		return
	}
	delete(r.awaiting, name)
	if len(r.awaiting) > 0 {
		return
	}
	n, err := r.appendLocked(nil, true)
	switch {
	case err == nil:
		r.wrote(n)
	case r.openErr == nil: // a row of the opening refused (they are holdable): stop as for any other failure
		r.openErr = fmt.Errorf("writing the recording's first rows (META, STARTs): %w", err)
		for _, p := range r.headProcs {
			r.breakProc(p, r.openErr)
		}
	}
}

func (r *Recorder) beforeDispatch(group string, in *engine.Input) {
	r.endItems(group)
	r.began(group, in.Feed, in.Seq)
}

// began notes that the group began the feed's item seq: until it
// dispatches one, the items of the feed it left unprocessed begin at seq
// at the latest (an item a stop or a kill cut, the first a worker was
// given, counts as unprocessed, not as never published to it).
func (r *Recorder) began(group, feed string, seq int64) {
	k := takenKey{group, feed}
	if _, ok := r.taken.Load(k); ok {
		return
	}
	v := new(atomic.Int64)
	v.Store(seq - 1)
	r.taken.LoadOrStore(k, v)
}

// afterDispatch notes the item dispatched (see took).
func (r *Recorder) afterDispatch(group string, in *engine.Input) { r.took(group, in.Feed, in.Seq) }

// takenKey is a group's queue of a feed.
type takenKey struct{ group, feed string }

// took notes that the group dispatched (or dropped) the feed's items up to
// seq: a queue hands them out, and its items count as dispatched, in the
// feed's order (an item Stop or a kill cut short is not dispatched, nor is
// any item after it).
func (r *Recorder) took(group, feed string, seq int64) {
	k := takenKey{group, feed}
	v, ok := r.taken.Load(k)
	if !ok {
		v, _ = r.taken.LoadOrStore(k, new(atomic.Int64))
	}
	storeMax(v.(*atomic.Int64), seq)
}

// unprocessed lists, per journalled feed the group took items of, the
// seqs the feed journalled past the last one the group dispatched or
// dropped (or from the first it began, when it dispatched none): at a
// clean stop or a kill (the group takes nothing more), the items its drain
// left in its queue, or the stop or the kill cut short or abandoned, not
// dispatched, so never committed (the next run delivers them again).
func (r *Recorder) unprocessed(group string) []store.Unprocessed {
	var out []store.Unprocessed
	r.feeds.Range(func(_, v any) bool {
		fj := v.(*feedJournal)
		t, ok := r.taken.Load(takenKey{group, fj.name})
		if !ok {
			return true
		}
		if taken, last := t.(*atomic.Int64).Load(), fj.last.Load(); last > taken {
			out = append(out, store.Unprocessed{Feed: fj.name, First: taken + 1, Last: last})
		}
		return true
	})
	slices.SortFunc(out, func(a, b store.Unprocessed) int { return strings.Compare(a.Feed, b.Feed) })
	return out
}

// endItems forgets the item the group's processors were handling.
func (r *Recorder) endItems(group string) {
	gs := r.group(group)
	for _, p := range gs.touched {
		p.endItem()
	}
	gs.touched = gs.touched[:0]
}

// received takes the copy of the input, once per input and processor: at
// its first attempt, before its handler runs.
func (r *Recorder) received(name string, in *engine.Input) {
	p := r.proc(name)
	if !p.record || p.inItem {
		return
	}
	p.inItem, p.feed, p.seq = true, in.Feed, in.Seq
	p.group = in.Group
	gs := r.group(in.Group)
	gs.touched = append(gs.touched, p)
	if p.broken.Load() {
		return // beforeComplete fails the item
	}
	if err := checkName("feed", in.Feed); err != nil {
		r.breakProc(p, err)
		return
	}
	b, err := r.encode(in.Item)
	if err != nil {
		r.breakProc(p, fmt.Errorf("input of feed %q seq %d: %w", in.Feed, in.Seq, err))
		return
	}
	p.payload = b
	p.indexed = r.journalled(in.Feed, in.Seq, b)
	p.instant = r.clock.Now()
}

// handled keeps the outputs and clock readings of the successful attempt.
func (r *Recorder) handled(name string, in *engine.Input, t *core.Trace) {
	p := r.live(name)
	if p == nil || !p.inItem || p.failed || p.handled || t.Err != nil {
		return
	}
	p.handled = true
	if in.Delivery != nil {
		p.delivery, p.delivered = *in.Delivery, true
	}
	if err := r.keepTrace(p, t); err != nil {
		r.breakProc(p, fmt.Errorf("output of feed %q seq %d: %w", in.Feed, in.Seq, err))
	}
}

func (r *Recorder) keepTrace(p *proc, t *core.Trace) error {
	for _, o := range t.Outputs {
		if err := checkName("sink", o.Sink); err != nil {
			return err
		}
		b, err := r.encode(o.Value)
		if err != nil {
			return fmt.Errorf("sink %q: %w", o.Sink, err)
		}
		p.outputs = append(p.outputs, output{sink: o.Sink, payload: b})
	}
	if len(t.Reads) > 0 {
		p.reads = append([]time.Time(nil), t.Reads...)
	}
	return nil
}

// failed marks the processor's input failed: its first failed attempt.
func (r *Recorder) failed(name string, in *engine.Input, err error) {
	p := r.live(name)
	if p == nil || !p.inItem || p.failed {
		return
	}
	p.failed, p.failErr, p.failAt = true, err, r.clock.Now()
}

// beforeComplete stages the item's rows for every recorded processor of
// the group in the group's batch; the engine's Flush (flushGroup) writes
// them before the item's completion callbacks run and before it counts as
// dispatched: the recording is written ahead of what they make durable. A
// batch past FlushBytes is written at once. It returns the *BrokenError of
// every processor of the item whose recording stopped (now or before), or
// the error of that early write, which fails the group: the item is not
// dispatched.
func (r *Recorder) beforeComplete(group string, in *engine.Input) error {
	gs := r.group(group)
	for _, p := range gs.touched {
		if !p.broken.Load() {
			lo := len(gs.rows)
			var inputs int64
			gs.rows, inputs = p.itemRows(gs.rows, in)
			r.stage(gs, p, group, lo, inputs)
		}
	}
	if gs.size >= FlushBytes {
		if err := r.flush(gs); err != nil {
			return err
		}
	}
	return r.brokenErr(gs.touched...)
}

// flushGroup is the engine's Flush: it writes the group's batch.
func (r *Recorder) flushGroup(group string) error { return r.flush(r.group(group)) }

// flush writes the rows staged in the group's batch with one Append (one
// write, one transaction). It returns nil when every staged row was
// written; otherwise the *BrokenError of the processors whose rows were
// not (their recording stopped), then and at every later call: the items
// of the batch are not recorded and must not count as dispatched.
func (r *Recorder) flush(gs *groupState) error {
	if gs.err != nil {
		return gs.err
	}
	if len(gs.parts) == 0 {
		return nil
	}
	var last int64 // the batch's highest input sequence, for the kill point
	if killpoint.Armed(killpoint.RowsWritten) {
		last = store.LastSeq(gs.rows)
	}
	err := r.appendParts(gs.rows, gs.parts)
	for _, pt := range gs.parts {
		pt.p.staged = 0
	}
	clear(gs.rows)
	clear(gs.parts)
	gs.rows, gs.parts, gs.size = gs.rows[:0], gs.parts[:0], 0
	if err != nil {
		gs.err = err
		return err
	}
	killpoint.ReachAt(killpoint.RowsWritten, last) // tests only: dormant unless armed
	return nil
}

// flushProc writes p's group's batch when it holds rows of p, before a row
// of p is written outside it (START, END, a completion's FAILED), so that
// p's rows reach the store in index order. The engine flushes before each
// of those hooks, so this writes nothing unless a caller did not.
func (r *Recorder) flushProc(p *proc) {
	if p.staged > 0 {
		r.flush(r.group(p.group))
	}
}

// completionFailed writes the FAILED row of the first failure of one of
// the processor's completion callbacks within the item, after the input's
// rows (beforeComplete staged them, Flush wrote them). The engine reports
// only the first failure per processor and item. For the item the
// processor is handling (an ordinary completion, run right after it),
// nothing is written when its rows already are a FAILED row (a failed
// attempt) or hold a completion's FAILED row. A deferred completion
// (core.BatchCompletion) runs once its batch was written, when the
// processor may be handling a later item: its FAILED row follows the
// batch's rows. It returns the processor's *BrokenError when the row
// cannot be written.
func (r *Recorder) completionFailed(name string, in *engine.Input, err error) error {
	p := r.proc(name)
	if !p.record {
		return nil
	}
	if p.broken.Load() {
		return r.brokenErr(p)
	}
	if p.inItem && p.seq == in.Seq && p.feed == in.Feed {
		if p.failed || p.compFail {
			return r.brokenErr(p)
		}
		p.compFail = true
	}
	r.flushProc(p)
	row := store.Entry{Processor: name, Index: p.at(), Kind: store.KindFailed, Source: in.Feed, Seq: in.Seq,
		Instant: r.clock.Now(), Detail: oneLine("completion: " + err.Error())}
	r.appendParts([]store.Entry{row}, []part{{p: p, lo: 0, hi: 1}})
	return r.brokenErr(p)
}

// itemRows appends p's rows for the item: FAILED, or [DELIVERY] INDEXED or
// INLINE and the OUTPUT rows.
func (p *proc) itemRows(rows []store.Entry, in *engine.Input) ([]store.Entry, int64) {
	idx := p.at()
	add := func(e store.Entry) {
		e.Processor, e.Index = p.name, idx
		idx++
		rows = append(rows, e)
	}
	if p.failed {
		add(store.Entry{Kind: store.KindFailed, Source: in.Feed, Seq: in.Seq, Instant: p.failAt, Detail: oneLine(p.failErr.Error())})
		return rows, 0
	}
	if p.delivered {
		d := &p.delivery
		add(store.Entry{Kind: store.KindDelivery, Source: in.Feed, Seq: in.Seq, Epoch: d.Epoch, Key: d.Position.Key,
			Offset: d.Position.Offset, N: int64(d.Attempt)})
	}
	e := store.Entry{Kind: store.KindIndexed, Source: in.Feed, Seq: in.Seq, Instant: p.instant,
		N: int64(len(p.outputs)), Reads: p.reads}
	if !p.indexed {
		e.Kind, e.Payload = store.KindInline, p.payload
	}
	add(e)
	for k, o := range p.outputs {
		add(store.Entry{Kind: store.KindOutput, Source: o.sink, Seq: int64(k + 1), Payload: o.payload})
	}
	return rows, 1
}

// dropDetail is the Detail of a DROPPED row.
type dropDetail struct {
	First       int64  `json:"first"`
	Last        int64  `json:"last"`
	Reason      string `json:"reason"`
	Approximate bool   `json:"approximate"`
}

// dropped stages a DROPPED row for each recorded processor of the group.
func (r *Recorder) dropped(group string, d engine.Drop) {
	r.took(group, d.Feed, d.LastSeq)
	detail, err := json.Marshal(dropDetail{First: d.FirstSeq, Last: d.LastSeq, Reason: d.Reason, Approximate: d.Approximate})
	if err != nil { // a struct of strings, ints and a bool
		panic(err)
	}
	gs := r.group(group)
	for _, name := range d.Processors {
		p := r.live(name)
		if p == nil {
			continue
		}
		if err := checkName("feed", d.Feed); err != nil {
			r.breakProc(p, err)
			continue
		}
		gs.rows = append(gs.rows, store.Entry{Processor: name, Index: p.at(), Kind: store.KindDropped, Source: d.Feed,
			Seq: d.FirstSeq, Offset: d.Offset, N: d.Count, Detail: string(detail)})
		r.stage(gs, p, group, len(gs.rows)-1, 0)
	}
}

// lost stages a LOST row for each recorded processor of the group: the
// source lost input (engine.Intake.AddLoss) before the group's next item.
func (r *Recorder) lost(group string, l engine.SourceLoss) {
	row := store.Lost{Feed: l.Feed, Seq: l.Seq, Epoch: l.Epoch, Key: oneLine(l.Key), From: max(l.From, 0), To: max(l.To, 0),
		Items: max(l.Items, 0), Reason: l.Reason, Detail: l.Detail}
	gs := r.group(group)
	for _, name := range l.Processors {
		p := r.live(name)
		if p == nil {
			continue
		}
		if err := checkName("feed", l.Feed); err != nil {
			r.breakProc(p, err)
			continue
		}
		gs.rows = append(gs.rows, row.Entry(name, p.at()))
		r.stage(gs, p, group, len(gs.rows)-1, 0)
	}
}

// alreadyCompleted stages a COMPLETED row for each recorded processor of
// the group: items its group completed in an earlier run were not handed to
// it (engine.Intake.SkipCompleted). They count as taken: a stop leaves them
// out of what its END rows list as unprocessed.
func (r *Recorder) alreadyCompleted(group string, c engine.Completed) {
	r.took(group, c.Feed, c.Last.Seq)
	row := store.Completed{Feed: c.Feed, Seq: c.First.Seq, Items: c.Count(), Epoch: c.First.Epoch,
		Key: c.First.Position.Key, From: c.First.Position.Offset, Last: c.Last.Position.Offset}
	gs := r.group(group)
	for _, name := range c.Processors {
		p := r.live(name)
		if p == nil {
			continue
		}
		if err := errors.Join(checkName("feed", c.Feed), checkName("key", row.Key)); err != nil {
			r.breakProc(p, err)
			continue
		}
		gs.rows = append(gs.rows, row.Entry(name, p.at()))
		r.stage(gs, p, group, len(gs.rows)-1, 0)
	}
}

// timerFired stages the timer's rows (TIMER and its OUTPUT rows, or
// FAILED) in the batch of the processor's group. A processor sets timers
// only in its cycles, so its group is known by then; were it not, the rows
// are written at once.
func (r *Recorder) timerFired(name string, t *core.Trace) {
	p := r.live(name)
	if p == nil {
		return
	}
	now := r.clock.Now()
	var rows []store.Entry
	var inputs int64
	if t.Err != nil {
		rows = append(rows, store.Entry{Processor: name, Index: p.at(), Kind: store.KindFailed, Seq: int64(t.Timer), Instant: now,
			Detail: oneLine(fmt.Sprintf("timer %d: %v", t.Timer, t.Err))})
	} else {
		var tp proc // scratch: the timer's outputs and readings
		if err := r.keepTrace(&tp, t); err != nil {
			r.breakProc(p, fmt.Errorf("timer %d: %w", t.Timer, err))
			return
		}
		inputs = 1
		rows = append(rows, store.Entry{Processor: name, Index: p.at(), Kind: store.KindTimer, Seq: int64(t.Timer),
			Instant: now, N: int64(len(tp.outputs)), Reads: tp.reads})
		for k, o := range tp.outputs {
			rows = append(rows, store.Entry{Processor: name, Index: p.at() + int64(k) + 1, Kind: store.KindOutput,
				Source: o.sink, Seq: int64(k + 1), Payload: o.payload})
		}
	}
	if p.group == "" {
		r.appendParts(rows, []part{{p: p, lo: 0, hi: len(rows), inputs: inputs}})
		return
	}
	gs := r.group(p.group)
	lo := len(gs.rows)
	gs.rows = append(gs.rows, rows...)
	r.stage(gs, p, p.group, lo, inputs)
}

// stopped writes END, listing the journalled items its group did not
// dispatch (unprocessed) and, for a killed run, why it was killed. It
// returns the processor's *BrokenError when its stream stopped (END cannot
// be written, or a row before it could not).
func (r *Recorder) stopped(name string) error {
	p := r.proc(name)
	if !p.record {
		return nil
	}
	r.flushProc(p)
	if p.broken.Load() {
		return r.brokenErr(p)
	}
	row := store.Entry{Processor: name, Index: p.at(), Kind: store.KindEnd, N: p.inputs, Instant: r.clock.Now()}
	var end store.End
	if p.group != "" {
		end.Unprocessed = r.unprocessed(p.group)
	}
	if k := r.killed.Load(); k != nil {
		end.Killed = *k
	}
	row.Detail = end.Detail()
	r.appendParts([]store.Entry{row}, []part{{p: p, lo: 0, hi: 1}})
	return r.brokenErr(p)
}
