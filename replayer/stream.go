package replayer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// ctxEvery is how many rows are replayed between two looks at the context.
const ctxEvery = 1024

// replay is the replay of one processor's stream. It is used by one
// goroutine.
type replay struct {
	ctx   context.Context
	r     store.Reader
	job   job
	codec recorder.Codec
	opts  Options
	rep   *ProcessorReport

	proc   core.Processor
	host   *core.Host
	clock  playback
	timers map[int]time.Duration // pending timers: number -> delay

	started  bool // START seen
	delivery core.Delivery
	hasDel   bool // a DELIVERY waits for its input
	delRow   int64
	cur      input
	// after is the input whose rows the last rows read were (its input row
	// and OUTPUT rows); zero after any other row. A FAILED row right after
	// them, for the same feed and seq, is a completion callback's failure.
	after   inputRef
	stopped bool
	last    int64 // the index of the last row replayed
	// next is, for each feed, the seq of the stream's first row of it
	// (DELIVERY, input, DROPPED, FAILED) after the first divergence: where
	// the stream stood in the feed then (pastMissing).
	next map[string]int64
}

// input is the input being replayed: its row, what the replay emitted, and
// the recorded OUTPUT rows read so far.
type input struct {
	open     bool
	index    int64
	timer    bool
	source   string
	seq      int64
	n        int64 // the OUTPUT rows the input row says it has
	delivery *core.Delivery
	del      core.Delivery // storage of delivery
	payload  []byte        // the input's payload text
	got      []output
	want     []output
	reads    int    // clock readings recorded
	read     int    // clock readings the replay took
	timerErr string // a timer the replay cannot fire
}

type output struct {
	sink    string
	payload []byte
}

type inputRef struct {
	index  int64 // 0: none
	source string
	seq    int64
}

func newReplay(ctx context.Context, r store.Reader, j job, codec recorder.Codec, opts Options, rep *ProcessorReport) *replay {
	return &replay{ctx: ctx, r: r, job: j, codec: codec, opts: opts, rep: rep, timers: map[int]time.Duration{}}
}

// timerBase is what the replay's timer clock always reads: a timer's due
// time minus it is the delay the processor asked for.
var timerBase = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type fixedClock struct{}

func (fixedClock) Now() time.Time { return timerBase }

// begin builds the processor and its host; a processor that cannot be
// built stops the replay.
func (rp *replay) begin() {
	p, err := rp.newProcessor()
	if err != nil {
		rp.stop(0, StopError, "%v", err)
		return
	}
	rp.proc = p
	rp.host = core.NewHost(rp.job.proc, p, &rp.clock, core.WithTimers(fixedClock{}, func(n int, due time.Time) {
		rp.timers[n] = due.Sub(timerBase)
	}))
	rp.host.SetClock(&rp.clock)
}

// newProcessor builds the app's processor, recovering a panic.
func (rp *replay) newProcessor() (p core.Processor, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return rp.job.app.Build(rp.job.options)
}

// stop ends the processor's replay with a reason.
func (rp *replay) stop(index int64, kind, format string, args ...any) {
	if rp.stopped {
		return
	}
	rp.stopped = true
	rp.cur.open = false
	rp.rep.Stop = fmt.Sprintf(format, args...)
	rp.rep.StopKind, rp.rep.StopIndex = kind, index
}

func (rp *replay) row(e *store.Entry) {
	if e.Kind == store.KindOutput {
		if rp.cur.open {
			rp.cur.want = appendOutput(rp.cur.want, e.Source, e.Payload)
		}
		// An OUTPUT row with no input is an orphan the store reports.
		return
	}
	rp.finish()
	if rp.stopped {
		return
	}
	if e.Kind != store.KindIndexed && e.Kind != store.KindInline {
		rp.hasDel = false // a DELIVERY attaches only to the input right after it
	}
	after := rp.after
	rp.after = inputRef{}
	switch e.Kind {
	case store.KindStart:
		rp.start(e)
	case store.KindDelivery:
		rp.delivery = core.Delivery{Feed: e.Source, Sequence: e.Seq, Epoch: e.Epoch,
			Position: core.Position{Key: e.Key, Offset: e.Offset}, Attempt: int(e.N)}
		rp.hasDel, rp.delRow = true, e.Index
	case store.KindIndexed, store.KindInline:
		rp.input(e)
		rp.after = inputRef{index: e.Index, source: e.Source, seq: e.Seq}
	case store.KindTimer:
		rp.timer(e)
	case store.KindDropped, store.KindLost:
		rp.loss(e)
	case store.KindFailed:
		// A failed attempt of an input is recorded instead of its rows; a
		// completion callback's failure comes after the input's rows, which
		// were written before the completions ran (recordings written
		// before that order hold it instead of the rows, read as the former).
		what := fmt.Sprintf("input of feed %q seq %d", e.Source, e.Seq)
		switch {
		case e.Source == "":
			what = fmt.Sprintf("timer %d", e.Seq)
		case after.index != 0 && after.source == e.Source && after.seq == e.Seq:
			what = fmt.Sprintf("a completion callback of the input at index %d, feed %q seq %d", after.index, e.Source, e.Seq)
		}
		rp.stop(e.Index, StopFailed, "recorded failure at index %d (%s): %s", e.Index, what, e.Detail)
	}
}

func (rp *replay) start(e *store.Entry) {
	if rp.started {
		return // a second START: malformed, reported by the store
	}
	rp.started = true
	if len(e.Payload) == 0 {
		return
	}
	s, ok := rp.proc.(core.Snapshotter)
	if !ok {
		rp.stop(e.Index, StopError, "START (index %d) holds a snapshot but app %q cannot restore one (no core.Snapshotter)", e.Index, rp.job.app.Name)
		return
	}
	if err := protect(func() error { return s.Restore(bytes.Clone(e.Payload)) }); err != nil {
		rp.stop(e.Index, StopError, "restoring the START snapshot (index %d): %v", e.Index, err)
	}
}

// decode decodes an input's payload with the app, turning a panic into an
// error (as protect does, without a closure to allocate per input).
func (rp *replay) decode(b []byte) (item any, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return rp.job.app.Decode(b)
}

// protect runs f, turning a panic into an error.
func protect(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return f()
}

func (rp *replay) input(e *store.Entry) {
	c := &rp.cur
	c.reset(e)
	if rp.hasDel && rp.delivery.Feed == e.Source && rp.delivery.Sequence == e.Seq {
		c.del = rp.delivery
		c.delivery = &c.del
	}
	rp.hasDel = false
	payload := e.Payload
	if e.Kind == store.KindIndexed {
		j, err := rp.r.Journal(e.Source, e.Seq)
		if err != nil {
			rp.stop(e.Index, StopError, "INDEXED input at index %d: journal row of feed %q seq %d: %v", e.Index, e.Source, e.Seq, err)
			return
		}
		payload = j.Payload
	}
	c.payload = append(c.payload[:0], payload...)
	item, err := rp.decode(c.payload)
	if err != nil {
		rp.stop(e.Index, StopError, "input at index %d does not decode: %v", e.Index, err)
		return
	}
	rp.clock.load(e.Reads)
	t := rp.host.Handle(c.delivery, item)
	rp.handled(e, t)
}

func (rp *replay) timer(e *store.Entry) {
	c := &rp.cur
	c.reset(e)
	c.timer = true
	c.payload = fmt.Appendf(c.payload[:0], "timer %d", e.Seq)
	n := int(e.Seq)
	if int64(n) != e.Seq || !rp.host.PendingTimer(n) {
		c.timerErr = fmt.Sprintf("the recording fires timer %d, which the replayed processor did not set or already fired", e.Seq)
		c.open = true
		return
	}
	d := rp.timers[n]
	for m, dm := range rp.timers {
		if m < n && dm <= d {
			c.timerErr = fmt.Sprintf("the recording fires timer %d (delay %s) while timer %d (delay %s), set before it, never fired: "+
				"the engine fires timers in order of their due time", n, d, m, dm)
			c.open = true
			return
		}
	}
	delete(rp.timers, n)
	rp.clock.load(e.Reads)
	t := rp.host.Fire(n)
	rp.handled(e, t)
}

// handled takes what the input (or timer) did in the replay: completions
// run, outputs captured.
func (rp *replay) handled(e *store.Entry, t *core.Trace) {
	c := &rp.cur
	if t.Err != nil {
		var pe *core.PanicError
		if errors.As(t.Err, &pe) {
			rp.stop(e.Index, StopError, "%s at index %d panicked in replay (it did not live): %v", e.Kind, e.Index, pe.Value)
		} else {
			rp.stop(e.Index, StopError, "%s at index %d failed in replay (it did not live): %v", e.Kind, e.Index, t.Err)
		}
		return
	}
	c.read, c.reads = rp.clock.taken(), len(e.Reads)
	for _, o := range t.Outputs {
		b, err := rp.codec.Encode(o.Value)
		if err != nil {
			rp.stop(e.Index, StopError, "output of %s at index %d to sink %q does not encode: %v", e.Kind, e.Index, o.Sink, err)
			return
		}
		c.got = append(c.got, output{sink: o.Sink, payload: b})
	}
	// Completions: after the input and all its reentrant cycles, in
	// registration order, as live (the trace holds each once).
	for _, f := range t.Completions {
		if err := rp.host.Complete(f, c.delivery); err != nil {
			rp.stop(e.Index, StopError, "a completion callback of the input at index %d failed in replay (it did not live): %v", e.Index, err)
			return
		}
	}
	c.open = true
	rp.rep.Inputs++
	if rp.opts.Progress != nil && rp.rep.Inputs%ProgressEvery == 0 {
		rp.opts.Progress(rp.job.proc, rp.rep.Inputs)
	}
}

// kindName names the input for a person: "input" or "timer".
func (c *input) kindName() string {
	if c.timer {
		return "timer"
	}
	return "input"
}

func (c *input) reset(e *store.Entry) {
	c.open = false
	c.index, c.source, c.seq, c.n = e.Index, e.Source, e.Seq, e.N
	c.timer, c.delivery, c.timerErr = false, nil, ""
	c.got, c.want = c.got[:0], c.want[:0]
	c.reads, c.read = 0, 0
}

// finish compares the open input's outputs with its OUTPUT rows. An input
// with fewer OUTPUT rows than its n is not compared: the recording is cut
// there (the store reports the orphan), which says nothing of what the
// input emitted, so the stream's replay stops there as incomplete.
func (rp *replay) finish() {
	c := &rp.cur
	if !c.open {
		return
	}
	c.open = false
	if int64(len(c.want)) < c.n {
		rp.stop(c.index, StopIncomplete, "the recording holds %d of the %d OUTPUT rows of the %s at index %d: cut there, its outputs are not known",
			len(c.want), c.n, c.kindName(), c.index)
		return
	}
	rp.rep.Outputs += int64(len(c.want))
	var kind, diff string
	clock := c.read != c.reads
	switch {
	case c.timerErr != "":
		kind, diff = KindTimer, c.timerErr
	case clock && len(c.want) == len(c.got):
		kind = KindClock
		diff = fmt.Sprintf("the recording holds %d clock readings for this input, the replay read the clock %d times", c.reads, c.read)
	default:
		kind, diff = rp.compare(c.want, c.got)
		if clock {
			diff += fmt.Sprintf("\nand the recording holds %d clock readings for this input, the replay read the clock %d times", c.reads, c.read)
		}
	}
	if kind == "" {
		return
	}
	rp.rep.Divergences++
	if rp.rep.First == nil {
		d := &Divergence{Processor: rp.job.proc, Index: c.index, Kind: kind, Source: c.source, Seq: c.seq,
			Input: string(c.payload), Want: texts(c.want), Got: texts(c.got), Diff: diff}
		if c.delivery != nil {
			del := *c.delivery
			d.Delivery = &del
		}
		if kind == KindClock && diff != "" {
			if _, od := rp.compare(c.want, c.got); od != "" {
				d.Diff += "\n" + od
			}
		}
		rp.rep.First = d
	}
	switch {
	case clock:
		rp.stop(c.index, StopDivergence, "clock divergence at index %d: %s", c.index, diff)
	case kind == KindTimer:
		rp.stop(c.index, StopDivergence, "timer divergence at index %d: %s", c.index, diff)
	case !rp.opts.KeepGoing:
		rp.stop(c.index, StopDivergence, "stopped at the first divergence (%s at index %d)", kind, c.index)
	}
}

// compare compares recorded and replayed outputs: equal bytes are equal;
// otherwise both sides are decoded with the codec and compared with go-cmp.
// It returns the divergence's kind and a readable diff, or "" when equal.
func (rp *replay) compare(want, got []output) (kind, diff string) {
	same := len(want) == len(got)
	for k := 0; same && k < len(want); k++ {
		same = want[k].sink == got[k].sink && bytes.Equal(want[k].payload, got[k].payload)
	}
	if same {
		return "", ""
	}
	w, g := decodeAll(rp.codec, want, nil), decodeAll(rp.codec, got, nil)
	diff = diffOutputs(w, g)
	switch {
	case len(want) != len(got):
		return KindCount, diff
	case diff != "":
		return KindOutput, diff
	}
	return "", "" // equal once decoded
}

func texts(os []output) []string {
	s := make([]string, len(os))
	for i, o := range os {
		s[i] = o.sink + ": " + string(o.payload)
	}
	return s
}

// follow notes, past the first divergence, the seq of the stream's first
// row of each feed (rp.next), read or not.
func (rp *replay) follow(e *store.Entry) {
	d := rp.rep.First
	if d == nil || e.Index <= d.Index || e.Source == "" {
		return
	}
	switch e.Kind {
	case store.KindDelivery, store.KindIndexed, store.KindInline, store.KindDropped, store.KindFailed:
	default:
		return
	}
	if _, ok := rp.next[e.Source]; !ok {
		if rp.next == nil {
			rp.next = map[string]int64{}
		}
		rp.next[e.Source] = e.Seq
	}
}

// pastMissing takes back a divergence found past a missing input: an
// input the recording claims (a COMMIT row, a clean end) but holds no row
// of (a missing-input problem of the processor, its worker streams
// together). The processor's state there is not in the recording, so what
// the replay computes past it proves nothing either way: the processor's
// replay stops at the first divergence as incomplete, not diverged (with
// Options.KeepGoing too: every later divergence is past it as well).
//
// A missing seq of a feed is past the divergence only when the stream
// shows it came later: the diverging input is of the feed and has a lower
// seq, or the stream's first row of the feed after the divergence (a
// timer's, or an input's of another feed) has a lower seq, as a stream
// takes its feed in seq order. Otherwise (no row of the feed after a
// timer, or the missing seq below the next one) the input may have come
// before the divergence, and the divergence proves nothing.
func (rp *replay) pastMissing(problems []store.Problem) {
	pr := rp.rep
	d := pr.First
	if d == nil {
		return
	}
	for _, p := range problems {
		if p.Kind != store.ProblemMissingInput || p.Processor != core.BaseStream(pr.Processor) {
			continue
		}
		next, ok := rp.next[p.Feed]
		if d.Source == p.Feed {
			next, ok = d.Seq, true
		}
		if ok && p.First >= next {
			continue
		}
		at := fmt.Sprintf("timer %d", d.Seq)
		if d.Source != "" {
			at = fmt.Sprintf("feed %q seq %d", d.Source, d.Seq)
		}
		pr.Stop = fmt.Sprintf("stopped at index %d (%s): seqs %d-%d of feed %q have no row and may come before it, so the processor's state there is not in the recording",
			d.Index, at, p.First, p.Last, p.Feed)
		pr.StopKind, pr.StopIndex = StopIncomplete, d.Index
		pr.First, pr.Divergences = nil, 0
		return
	}
}

// loss reports a DROPPED or LOST row as a loss of the processor's stream
// (any other row is not one).
func (rp *replay) loss(e *store.Entry) {
	switch e.Kind {
	case store.KindDropped:
		rp.dropped(e)
	case store.KindLost:
		l := store.LostOf(*e)
		rp.rep.Losses = append(rp.rep.Losses, Loss{Kind: LossSource, Feed: e.Source, Index: e.Index, Count: l.Items,
			Reason: l.Reason, Source: &l})
	}
}

func (rp *replay) dropped(e *store.Entry) {
	l := Loss{Kind: LossDropped, Feed: e.Source, Index: e.Index, Count: e.N, First: e.Seq, Last: e.Seq + max(e.N, 1) - 1, Reason: e.Detail}
	var d struct {
		First       *int64 `json:"first"`
		Last        *int64 `json:"last"`
		Reason      string `json:"reason"`
		Approximate bool   `json:"approximate"`
	}
	if err := json.Unmarshal([]byte(e.Detail), &d); err == nil {
		if d.First != nil {
			l.First = *d.First
		}
		if d.Last != nil {
			l.Last = *d.Last
		}
		l.Reason, l.Approximate = d.Reason, d.Approximate
	}
	rp.rep.Losses = append(rp.rep.Losses, l)
}

// playback is the clock of a replayed input: it plays back the recorded
// readings in order. Past them it repeats the last one (the zero time if
// there was none) and counts the extra readings, which the replay reports as
// a clock divergence. It belongs to one replay, on one goroutine.
type playback struct {
	reads []time.Time
	next  int
}

func (p *playback) load(reads []time.Time) { p.reads, p.next = reads, 0 }

func (p *playback) taken() int { return p.next }

// Now returns the next recorded reading.
func (p *playback) Now() time.Time {
	i := p.next
	p.next++
	switch {
	case i < len(p.reads):
		return p.reads[i]
	case len(p.reads) > 0:
		return p.reads[len(p.reads)-1]
	}
	return time.Time{}
}

// appendOutput appends a copy of (sink, payload), reusing the slot's buffer
// when the slice has one.
func appendOutput(os []output, sink string, payload []byte) []output {
	if len(os) < cap(os) {
		os = os[:len(os)+1]
		o := &os[len(os)-1]
		o.sink, o.payload = sink, append(o.payload[:0], payload...)
		return os
	}
	return append(os, output{sink: sink, payload: bytes.Clone(payload)})
}
