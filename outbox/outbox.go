package outbox

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// Sentinel errors, wrapped by the errors the outbox returns.
var (
	// ErrMarks: the marks file cannot be read (a *MarksError names the
	// line), or was written for another sink or line format.
	ErrMarks = errors.New("outbox: bad marks file")
	// ErrRecording: a recording the marks name with a commit or a batch
	// (recovery reads it to find what is left to deliver) is gone,
	// unreadable or replaced by another (META created at another instant).
	// The marks name a run's recording until its outbox's clean Close
	// (every output delivered, every input committed) or the next Open:
	// keep it until then.
	ErrRecording = errors.New("outbox: a recording the marks need is missing")
	// ErrOut: the file sink's file does not hold what the marks say was
	// written to it (shorter, longer, or other bytes).
	ErrOut = errors.New("outbox: the out file does not match its marks")
	// ErrPayload: a *File was given an output that is not one line of
	// JSON (a custom codec's): it cannot hold it, and writes none of its
	// batch.
	ErrPayload = errors.New("outbox: an output is not one line of JSON")
	// ErrClosed: the outbox was closed.
	ErrClosed = errors.New("outbox: closed")
)

// Config is an outbox's configuration. It is only read.
type Config struct {
	// Marks is the marks file: created when missing, read by the next
	// run. One per sink (`blackbox run` puts it beside --out: OUT.outbox).
	Marks string
	// Sink receives the effects: a *File, or a core.EffectSink of the
	// caller's.
	Sink core.EffectSink
	// Durable makes each mark, the recording it follows and each file
	// batch durable (fsync) before the step after it: the guarantee then
	// holds across a power loss, not only a crash of the process.
	Durable bool
	// Logger receives the recovery's summary; default slog.Default().
	Logger *slog.Logger
}

// Status is what an outbox did; a plain value.
type Status struct {
	// Guarantee is what its sink can do: GuaranteeExactlyOnce for the
	// file sink and a core.Transactional sink, GuaranteeIdempotent for a
	// core.Idempotent one, GuaranteeAtLeastOnce otherwise.
	Guarantee string `json:"guarantee"`
	Batches   int64  `json:"batches"`   // batches delivered by this run, recovery's included
	Delivered int64  `json:"delivered"` // effects delivered by this run, recovery's included
	// Recovered: effects earlier runs recorded (their inputs committed,
	// or suppressed since) that this run's Open delivered first (included
	// in Delivered).
	Recovered int64 `json:"recovered"`
	// Suppressed: effects of inputs read again at a position whose
	// outputs an earlier run recorded without a commit covering it, and
	// that Open delivered from that run's recording: not delivered again.
	Suppressed int64 `json:"suppressed"`
	// Again: effects of a batch a crash interrupted, delivered again in
	// full by recovery to a sink that cannot say what it holds: it may
	// have them twice (0 for an exactly-once sink). Included in Delivered
	// and Recovered, as is what recovery delivers of that batch to an
	// exactly-once sink (for the file sink, the lines whose line break it
	// appends).
	Again int64 `json:"again"`
	// Pending: effects recorded whose inputs were not committed when the
	// outbox closed: not delivered by this run. The next run's Open
	// delivers them from the recording, and the next run that reads
	// their inputs again delivers none of its own for them (Suppressed).
	Pending int64 `json:"pending"`
	// Undelivered: effects recorded and committed that the outbox did not
	// deliver, its delivery having failed (Err): the next run's Open
	// delivers them first.
	Undelivered int64 `json:"undelivered"`
}

// The guarantees a sink gives (Status.Guarantee).
const (
	GuaranteeExactlyOnce = "exactly-once"
	GuaranteeIdempotent  = "idempotent"
	GuaranteeAtLeastOnce = "at-least-once"
)

// Outbox delivers the outputs of a recorded run to a sink only once the
// recording holds them and their inputs are committed, and remembers in
// its marks file what it delivered, so that a restart delivers first what
// earlier runs recorded and committed but did not deliver, and nothing
// twice. Open it (which recovers), Begin the run, give the recorder
// Written and the engine Observer, Close after the recorder's Close. Its
// methods are safe for concurrent use, but for Written, whose calls must
// not overlap one another (the recorder makes them one at a time, in the
// recording's order); one goroutine of its own delivers,
// from Begin to Close.
type Outbox struct {
	cfg   Config
	log   *slog.Logger
	marks *os.File

	mmu       sync.Mutex // serialises marks writes
	run       int        // this run's index among the marks' runs
	rn        Run
	recording string // rn's name in free effects' keys

	// Written's own, outside mu (the recorder's lock serialises Written):
	// the parser (its copy set by Begin, before the run writes rows) and
	// the items of the rows Written is given.
	parser *parser
	items  []*item
	sup    suppress

	mu     sync.Mutex
	queues map[class]*queue // positioned items awaiting their commit, with outputs
	// through: the highest seq each class's commits covered. A timer's
	// item is written after its input's cycle, possibly after the commit
	// that covers that input: it is ready at once.
	through map[class]int64
	commits map[string]bool // whether a feed's source commits, as first asked
	// liveCommits: the highest offset this run committed per position
	// space (Close prunes the suppression set with them, unless a move
	// back came: movedBackLast).
	liveCommits map[posKey]int64
	// seqs: the highest seq of each feed's inputs written so far; back:
	// at the feed's last move back (acted): Close then keeps the marks.
	seqs, back map[string]int64
	// beforeCompact, set by tests only (export_test.go), runs right before
	// a clean Close rewrites the marks.
	beforeCompact func()
	ready         []effect // committed, or free: to deliver
	batch         int64
	st            Status
	err           error
	closing       bool
	wake          chan struct{}
	done          chan struct{}
	failed        chan struct{}
}

// Written is the recorder's Options.Written: it reads the rows just
// written and keeps their outputs until their inputs are committed
// (outputs of cycles without a source position: until the next delivery,
// which makes the recording durable first). Outputs of an input at a
// position an earlier run recorded are not delivered again. Its calls
// must not overlap one another (the recorder's lock serialises them): the
// rows are read in the order given, outside the outbox's lock.
func (o *Outbox) Written(rows []store.Entry) {
	// Parse outside mu: the outbox's goroutine and the commits need it.
	items := o.items[:0]
	for i := range rows {
		if it := o.parser.row(&rows[i]); it != nil && len(it.effects) > 0 {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return
	}
	var free bool
	o.mu.Lock()
	for _, it := range items {
		for j := range it.effects {
			it.effects[j].recording = o.recording
			it.effects[j].checked = o.rn.CompactJSON
		}
		if !it.Free {
			o.seqs[it.Feed] = max(o.seqs[it.Feed], it.seq)
		}
		if !it.Free && o.uncommitted(it.Feed) {
			it.free()
		}
		switch {
		case it.Free:
			o.ready = append(o.ready, it.effects...)
			free = true
		case o.sup.covers(it):
			o.st.Suppressed += int64(len(it.effects))
		case it.timer && it.seq <= o.through[it.class]:
			o.ready = append(o.ready, it.effects...)
			free = true
		default:
			q := o.queues[it.class]
			if q == nil {
				q = &queue{}
				o.queues[it.class] = q
			}
			q.add(it)
		}
	}
	o.mu.Unlock()
	clear(items)
	o.items = items[:0]
	if free {
		o.poke()
	}
}

// queue is the items of one class awaiting their commit, in the order
// written: positioned inputs and the timers that take their place. Not
// safe for concurrent use (Outbox.mu guards it).
type queue struct {
	items []*item
	// A position read again in this run (a Kafka partition revoked and
	// assigned back before its commit) comes at an offset at or below
	// that of an input queued before it: hi is the highest offset of the
	// inputs queued (of any epoch; inputs: there is one). Past it, an
	// input cannot have been queued before. at, made at the first input
	// at or below hi and dropped once the queue is empty, is the queued
	// inputs by position, their last reading's.
	inputs bool
	hi     int64
	at     map[posAt]*item
}

// add queues it. An earlier reading of its position still queued is
// never committed (the commit of this one covers it by seq): only the
// last reading's outputs count.
func (q *queue) add(it *item) {
	q.items = append(q.items, it)
	if it.timer {
		return
	}
	if q.at == nil && q.inputs && it.offset <= q.hi {
		q.at = map[posAt]*item{}
		for _, old := range q.items[:len(q.items)-1] {
			if !old.timer {
				q.at[posAt{old.key(), old.offset}] = old
			}
		}
	}
	if q.at != nil {
		pa := posAt{it.key(), it.offset}
		if old := q.at[pa]; old != nil {
			old.effects = nil
		}
		q.at[pa] = it
	}
	if !q.inputs || it.offset > q.hi {
		q.inputs, q.hi = true, it.offset
	}
}

// commit takes out the items through seq, in order, and returns their
// effects appended to ready.
func (q *queue) commit(seq int64, ready []effect) []effect {
	kept := q.items[:0]
	for _, it := range q.items {
		if it.seq > seq {
			kept = append(kept, it)
			continue
		}
		ready = append(ready, it.effects...)
		if q.at != nil && !it.timer {
			if pa := (posAt{it.key(), it.offset}); q.at[pa] == it {
				delete(q.at, pa)
			}
		}
	}
	clear(q.items[len(kept):])
	q.items = kept
	if len(kept) == 0 { // none queued: any offset comes first
		q.inputs, q.at = false, nil
	}
	return ready
}

// acted is the outbox's Observer.Acted: a backwards seek (a seek whose
// After is below its Before, docs/GUARANTEES.md "Seek") lowers the feed's
// source commit to its target, and the items after it are read again.
// Close then keeps the marks (the next Open recovers from the run's
// recording, and reads the move back from the seek's CONTROL row there):
// the commits made before the seek cover nothing it forgets, the last
// commit after it covers what is below it; a restart reads the items
// after that again and delivers none of their outputs again. Called with
// the engine's locks held: it takes only the outbox's.
func (o *Outbox) acted(a engine.OperatorAction) error {
	if a.Action == engine.ActionSeek && a.After < a.Before {
		o.mu.Lock()
		o.back[a.Feed] = max(o.seqs[a.Feed], a.Before)
		o.mu.Unlock()
	}
	return nil
}

// Observer returns the engine hooks of the outbox: Committed writes a
// commit mark and makes the committed outputs deliverable; Acted notes a
// backwards seek (a move back: see acted). Combine it before an observer
// that may refuse an action (Observer.Then).
func (o *Outbox) Observer() engine.Observer {
	return engine.Observer{Committed: o.committed, Acted: o.acted}
}

// uncommitted reports whether feed's source commits nothing, marking it
// the first time (o.mu held).
func (o *Outbox) uncommitted(feed string) bool {
	if v, ok := o.commits[feed]; ok {
		return !v
	}
	v := o.rn.Commits == nil || o.rn.Commits(feed)
	o.commits[feed] = v
	if !v {
		if err := o.mark(line{Uncommitted: &uncommittedMark{Run: o.run, Feed: feed}}); err != nil {
			o.failLocked(err)
		}
	}
	return !v
}

func (o *Outbox) committed(feed string, c engine.Commit) {
	if err := o.mark(line{Commit: &commitMark{Run: o.run, Feed: feed, Key: c.Position.Key, Seq: c.Seq,
		Epoch: c.Epoch, Offset: c.Position.Offset}}); err != nil {
		o.fail(err)
		return
	}
	cl := class{Feed: feed, Key: c.Position.Key}
	o.mu.Lock()
	pk := posKey{Feed: feed, Key: c.Position.Key, Epoch: c.Epoch}
	o.liveCommits[pk] = max(o.liveCommits[pk], c.Position.Offset)
	o.through[cl] = max(o.through[cl], c.Seq)
	if q := o.queues[cl]; q != nil {
		o.ready = q.commit(c.Seq, o.ready)
	}
	o.mu.Unlock()
	o.poke()
}

func (o *Outbox) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// mark appends one line to the marks file, synced with Config.Durable.
func (o *Outbox) mark(l line) error {
	o.mmu.Lock()
	defer o.mmu.Unlock()
	if o.marks == nil {
		return ErrClosed
	}
	if _, err := o.marks.Write(encodeLine(l)); err != nil {
		return fmt.Errorf("outbox: writing %s: %w", o.cfg.Marks, err)
	}
	if o.cfg.Durable {
		if err := o.marks.Sync(); err != nil {
			return fmt.Errorf("outbox: syncing %s: %w", o.cfg.Marks, err)
		}
	}
	return nil
}

// Run is the run an outbox delivers for: its recording and the engine's
// feeds. A plain value.
type Run struct {
	// Path and Created name the recording: its path and META's creation
	// instant (recorder.Recorder.Created).
	Path    string
	Created time.Time
	// Sync makes the recording durable (recorder.Recorder.Sync).
	Sync func() error
	// Commits reports whether a feed's source commits
	// (engine.Feed.Commits): the outputs of a feed whose source does not
	// are delivered once recorded, as those of timers are.
	Commits func(feed string) bool
	// CompactJSON says that the payloads Written is given are the
	// recorder's JSON codec's (recorder.JSONCodec, which recorder.Start
	// says): compact JSON, one line, each a slice of its own that nothing
	// writes to once encoded. The outbox then neither copies them nor
	// checks them again before a *File appends them. Without it, and for
	// every output recovery reads back from a recording, the file sink
	// checks each payload and refuses one that is not one line of JSON.
	CompactJSON bool
}

// Begin starts the run r: it writes the run's mark and starts delivering.
func (o *Outbox) Begin(r Run) error {
	abs, err := absPath(r.Path)
	if err != nil {
		return err
	}
	r.Path = abs
	o.mu.Lock()
	o.rn, o.recording = r, recordingName(r.Created)
	o.parser.copy = !r.CompactJSON // the codec's payloads are its own: nothing reuses them
	o.mu.Unlock()
	if err := o.mark(line{Run: &runMark{Path: abs, Created: r.Created}}); err != nil {
		return err
	}
	go o.loop()
	return nil
}

// loop delivers what is ready, batch after batch, until Close.
func (o *Outbox) loop() {
	defer close(o.done)
	for {
		o.mu.Lock()
		closing := o.closing
		o.mu.Unlock()
		if err := o.deliverReady(); err != nil {
			o.fail(err)
			return
		}
		if closing {
			return
		}
		<-o.wake
	}
}

// deliverReady delivers the ready effects as one batch: the recording
// made durable first (with Config.Durable), the batch's mark, then the
// sink.
func (o *Outbox) deliverReady() error {
	o.mu.Lock()
	ready := o.ready
	o.ready = nil
	o.mu.Unlock()
	if len(ready) == 0 {
		return nil
	}
	var err error
	if o.cfg.Durable && o.rn.Sync != nil {
		if err = o.rn.Sync(); err != nil {
			err = fmt.Errorf("outbox: making the recording durable: %w", err)
		}
	}
	if err == nil {
		err = o.send(newBatch(o.run, ready), false)
	}
	o.mu.Lock()
	if err != nil {
		o.ready = append(ready, o.ready...) // not delivered: Status counts them
	} else if o.ready == nil {
		clear(ready)
		o.ready = ready[:0] // delivered: its array takes the next batch's
	}
	o.mu.Unlock()
	return err
}

// send writes b's mark and gives its effects to the sink.
func (o *Outbox) send(b *batch, recovered bool) error {
	o.mu.Lock()
	o.batch++
	n := o.batch
	o.mu.Unlock()
	effects := b.effects()
	var size int64
	if f, ok := o.cfg.Sink.(*File); ok {
		size = f.size
	}
	if err := o.mark(line{Batch: &batchMark{N: n, Size: size, To: b.to}}); err != nil {
		return err
	}
	if killpoint.Armed(killpoint.OutMarked) { // tests only: dormant unless armed
		v := n
		if f, ok := o.cfg.Sink.(*File); ok {
			v = f.linesAfter(int64(len(effects)))
		}
		killpoint.ReachAt(killpoint.OutMarked, v)
	}
	var err error
	if f, ok := o.cfg.Sink.(*File); ok {
		err = f.deliver(effects, b.checked)
	} else {
		err = o.cfg.Sink.Deliver(n, effects)
	}
	if err != nil {
		return fmt.Errorf("outbox: delivering batch %d: %w", n, err)
	}
	o.mu.Lock()
	o.st.Batches++
	o.st.Delivered += int64(len(effects))
	if recovered {
		o.st.Recovered += int64(len(effects))
	}
	o.mu.Unlock()
	return nil
}

func (o *Outbox) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failLocked(err)
}

func (o *Outbox) failLocked(err error) {
	if o.err == nil {
		o.err = err
		close(o.failed)
	}
}

// Failed is closed once a delivery failed (Err says why): the run should
// stop. What was not delivered stays in the recording, committed: the next
// run delivers it.
func (o *Outbox) Failed() <-chan struct{} { return o.failed }

// Err is the delivery failure, nil while there is none.
func (o *Outbox) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Status is what the outbox did so far.
func (o *Outbox) Status() Status {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.st
	st.Undelivered = int64(len(o.ready))
	for _, q := range o.queues {
		for _, it := range q.items {
			st.Pending += int64(len(it.effects))
		}
	}
	return st
}

// Close delivers what is ready (call it after the recorder's Close, so
// that the last commits are in), stops the delivering goroutine and closes
// the marks file. It returns the delivery failure, if any.
func (o *Outbox) Close() error {
	o.mu.Lock()
	if o.closing {
		o.mu.Unlock()
		return o.Err()
	}
	o.closing = true
	started := o.rn.Path != ""
	o.mu.Unlock()
	if started {
		o.poke()
		<-o.done
	}
	o.mmu.Lock()
	var err error
	if o.marks != nil {
		err = o.marks.Close()
		o.marks = nil
	}
	o.mmu.Unlock()
	if started && err == nil && o.Err() == nil && o.settled() && !o.movedBackLast() {
		// Every output this run recorded is delivered and every input it
		// read committed: the next Open needs none of its recording.
		for k, off := range o.liveCommits {
			o.sup.prune(k, off)
		}
		if o.beforeCompact != nil {
			o.beforeCompact() // tests: the marks as a crash right before it leaves them
		}
		err = o.compact()
	}
	return errors.Join(o.Err(), err)
}

// movedBackLast reports whether a feed was moved back in this run
// (acted): its source's commit came down below what this run's commits
// said, and a restart may read again items this run recorded (those past
// its last commit): the next Open needs the run's recording (the marks
// are kept as they are; its recovery reads the move back there).
func (o *Outbox) movedBackLast() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.back) > 0
}

// settled reports whether nothing is left to deliver: no output waits for
// its commit or its batch.
func (o *Outbox) settled() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ready) > 0 {
		return false
	}
	for _, q := range o.queues {
		for _, it := range q.items {
			if len(it.effects) > 0 {
				return false
			}
		}
	}
	return true
}

// compact rewrites the marks file, whole or not at all, as a header alone:
// the last batch's number, the file sink's size, the suppression set (the
// marks file closed).
func (o *Outbox) compact() error {
	kind, format := sinkKind(o.cfg.Sink)
	h := header{Version: marksVersion, Sink: kind, Format: format, Batch: o.batch, Suppress: o.sup.list()}
	if f, ok := o.cfg.Sink.(*File); ok {
		h.Size = f.size
	}
	if err := writeFile(o.cfg.Marks, encodeLine(h)); err != nil {
		return fmt.Errorf("outbox: rewriting %s: %w", o.cfg.Marks, err)
	}
	return nil
}

// batch is effects to deliver together, grouped by (stream, class) in
// the order of their first appearance, each group's in row order: the
// order a batch mark's entries give back on recovery. checked: every
// payload is known to be one line of JSON (effect.checked).
type batch struct {
	to      []entry
	groups  [][]effect
	n       int
	checked bool
}

// newBatch groups ready, which it may reorder and keep: the caller gives
// it up.
func newBatch(run int, ready []effect) *batch {
	b := &batch{n: len(ready), checked: true}
	if len(ready) == 0 {
		return b
	}
	// Most batches are of one (stream, class): one group, ready itself.
	first := entry{Run: run, Stream: ready[0].stream, class: ready[0].class}
	one := true
	for i := range ready {
		ef := &ready[i]
		b.checked = b.checked && ef.checked
		if one && (ef.stream != first.Stream || ef.class != first.class) {
			one = false
		}
		first.Row = max(first.Row, ef.row)
	}
	if one {
		b.to, b.groups = []entry{first}, [][]effect{ready}
	} else {
		at := map[entry]int{}
		for _, ef := range ready {
			k := entry{Run: run, Stream: ef.stream, class: ef.class}
			i, ok := at[k]
			if !ok {
				i = len(b.to)
				at[k] = i
				b.to = append(b.to, k)
				b.groups = append(b.groups, nil)
			}
			b.groups[i] = append(b.groups[i], ef)
			b.to[i].Row = max(b.to[i].Row, ef.row)
		}
	}
	byRow := func(x, y effect) int { return cmp.Compare(x.row, y.row) }
	for _, g := range b.groups {
		if !slices.IsSortedFunc(g, byRow) {
			slices.SortFunc(g, byRow)
		}
	}
	return b
}

// effects is the batch's effects to deliver, in order.
func (b *batch) effects() []core.Effect {
	out := make([]core.Effect, 0, b.n)
	for _, g := range b.groups {
		for _, ef := range g {
			out = append(out, ef.effect())
		}
	}
	return out
}

// effect is ef as the sink sees it.
func (ef effect) effect() core.Effect {
	key := core.EffectKey{Index: ef.k}
	if ef.Free || ef.timer {
		key.Recording, key.Stream, key.Row = ef.recording, ef.stream, ef.row
	} else {
		key.Feed, key.Epoch, key.Position = ef.Feed, ef.epoch, core.Position{Key: ef.Key, Offset: ef.offset}
	}
	return core.Effect{Key: key, Stream: ef.stream, Sink: ef.sink, Payload: ef.payload}
}

// recordingName names a recording in the key of an effect without a
// source position: META's creation instant, RFC 3339 in UTC to the
// nanosecond.
func recordingName(created time.Time) string { return created.UTC().Format(time.RFC3339Nano) }

// posKey is a position space: a feed's key in one epoch.
type posKey struct {
	Feed, Key string
	Epoch     int64
}

// posAt is one position.
type posAt struct {
	posKey
	offset int64
}

// suppress is, per position space, the offsets of inputs an earlier run
// recorded whole without a commit covering them: the outbox delivered
// their outputs from that recording, so a later run that reads them again
// delivers none of its own. timers counts, per position, the timers an
// earlier run recorded whole after that input (item.timer): a later run's
// timer after it is suppressed only while such a count is left, so that
// a timer the earlier run did not record is delivered.
type suppress struct {
	inputs map[posKey]map[int64]struct{}
	timers map[posKey]map[int64]int
}

func newSuppress() suppress {
	return suppress{inputs: map[posKey]map[int64]struct{}{}, timers: map[posKey]map[int64]int{}}
}

// covers reports whether it's outputs are suppressed; a timer covered uses
// up one of its position's count.
func (s suppress) covers(it *item) bool {
	if it.Free {
		return false
	}
	if it.timer {
		m := s.timers[it.key()]
		if m[it.offset] == 0 {
			return false
		}
		m[it.offset]--
		return true
	}
	_, ok := s.inputs[it.key()][it.offset]
	return ok
}

// add notes it, recorded whole, as delivered from its recording.
func (s suppress) add(it *item) {
	k := it.key()
	if it.timer {
		if s.timers[k] == nil {
			s.timers[k] = map[int64]int{}
		}
		s.timers[k][it.offset]++
		return
	}
	if s.inputs[k] == nil {
		s.inputs[k] = map[int64]struct{}{}
	}
	s.inputs[k][it.offset] = struct{}{}
}

// prune forgets the offsets of k a commit through off covers: they are
// never read again.
func (s suppress) prune(k posKey, off int64) {
	for o := range s.inputs[k] {
		if o <= off {
			delete(s.inputs[k], o)
		}
	}
	for o := range s.timers[k] {
		if o <= off {
			delete(s.timers[k], o)
		}
	}
	if len(s.inputs[k]) == 0 {
		delete(s.inputs, k)
	}
	if len(s.timers[k]) == 0 {
		delete(s.timers, k)
	}
}

func (s suppress) clone() suppress {
	c := newSuppress()
	for k, m := range s.inputs {
		c.inputs[k] = maps.Clone(m)
	}
	for k, m := range s.timers {
		c.timers[k] = maps.Clone(m)
	}
	return c
}

// list is s as the marks header holds it, sorted: a timer's offset once
// per count.
func (s suppress) list() []suppressed {
	at := map[posKey]*suppressed{}
	get := func(k posKey) *suppressed {
		if at[k] == nil {
			at[k] = &suppressed{Feed: k.Feed, Key: k.Key, Epoch: k.Epoch, Offsets: []int64{}}
		}
		return at[k]
	}
	for k, m := range s.inputs {
		get(k).Offsets = slices.Sorted(maps.Keys(m))
	}
	for k, m := range s.timers {
		sp := get(k)
		for _, off := range slices.Sorted(maps.Keys(m)) {
			for range m[off] {
				sp.Timers = append(sp.Timers, off)
			}
		}
		if len(sp.Timers) == 0 && len(sp.Offsets) == 0 {
			delete(at, k)
		}
	}
	var l []suppressed
	for _, sp := range at {
		l = append(l, *sp)
	}
	slices.SortFunc(l, func(a, b suppressed) int {
		return cmp.Or(cmp.Compare(a.Feed, b.Feed), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Epoch, b.Epoch))
	})
	return l
}
