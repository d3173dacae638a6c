package incident

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store"
)

// ErrNoRecording: Explain was given no recording.
var ErrNoRecording = errors.New("incident: no recording")

// Recording is one run to explain: its file (for the Findings) and its
// reader. Explain reads it; the caller closes it.
type Recording struct {
	File   string
	Reader store.Reader
}

// Options are what is on disk now, to compare with the recordings.
type Options struct {
	// Feed is the feed Pointer and State describe; "" for the feed of the
	// recordings' positioned inputs when they have only one.
	Feed string
	// Pointer is the committed position a file source's pointer file
	// holds now (filesource.ReadPointer); nil for none.
	Pointer *Position
	// State is what the app's durable state holds now (core.Durable); nil
	// for none.
	State *core.DurableState
}

// Explain reads the recordings of a crashed run and its restarts, in the
// order they ran (as `blackbox diff` stitches them), and answers what the
// crashes did (Findings). It reads each recording in storage order, once
// (Scan, which checks it in the same pass), keeping of each input its
// seq, position, row index and output count (no payload) in a compact log
// of about a dozen bytes per input (consecutive seqs, indexes and offsets
// cost a byte or two each), then reads once more the recordings holding
// rows it reports, for their lines, times and outputs, and looks up the
// JOURNAL rows of INDEXED inputs. Positions are compared across runs in a
// map of the inputs of every run but the last (no later run delivers
// those again): a single recording of 1M inputs is explained in about 12
// MB. A recording with a problem a later run does not explain (a row that
// cannot be read, a gap, a recorded failure ...) makes the Findings not
// Complete. Explain returns an error when given no recording, and when the
// recordings cannot be consecutive runs of one source (store.CheckRuns: a
// run given twice or a copy of it, runs out of order; the error wraps
// store.ErrRuns, a *store.RunsError says which runs), or cannot be read to
// check that.
func Explain(recs []Recording, opts Options) (*Findings, error) {
	if len(recs) == 0 {
		return nil, ErrNoRecording
	}
	rs := make([]store.Reader, len(recs))
	for i, rec := range recs {
		rs[i] = rec.Reader
	}
	if err := store.CheckRuns(rs); err != nil {
		return nil, fmt.Errorf("incident: %w", err)
	}
	x := &explainer{f: &Findings{Complete: true, Runs: []Run{}, Answers: []Answers{}, Losses: []Loss{}}, names: &names{id: map[string]uint64{}}}
	for i, rec := range recs {
		x.runs = append(x.runs, x.read(i+1, rec))
	}
	x.answer()
	x.onDisk(opts)
	readers := make([]store.Reader, len(recs))
	for i, rec := range recs {
		readers[i] = rec.Reader
	}
	fill(x.f, readers)
	x.f.Lost = len(x.f.Losses) > 0
	for _, a := range x.f.Answers {
		if len(a.Lost) > 0 {
			x.f.Lost = true
		}
	}
	return x.f, nil
}

type explainer struct {
	f     *Findings
	runs  []*runData
	names *names // the names of the runs' inputs: one copy each
}

// pair is one feed and processor (a processor's base name: its worker
// streams merged).
type pair struct{ feed, proc string }

// inputRec is what Explain knows of an input row: no payload and no
// instant (fill reads those of the inputs it reports). A run keeps its
// inputs in an inputLog, compact, and decodes them as it answers.
type inputRec struct {
	pair
	stream   string
	seq      int64
	pos      Position // when delivery
	n        int64    // outputs the input row declares
	outs     int64    // its OUTPUT rows, at index+1 ... index+outs
	index    int64    // the input row's; its DELIVERY, if any, is at index-1
	failed   int64    // the index of the FAILED row of its completion; 0 for none
	delivery bool     // its DELIVERY row, and so its position, is known
	indexed  bool
}

// refs are the input's rows: its DELIVERY, the input row, and the FAILED
// row of a completion.
func (in *inputRec) refs(run int) []Ref {
	kind := store.KindInline
	if in.indexed {
		kind = store.KindIndexed
	}
	var rs []Ref
	if in.delivery {
		rs = append(rs, Ref{Run: run, Processor: in.stream, Index: in.index - 1, Kind: store.KindDelivery})
	}
	rs = append(rs, Ref{Run: run, Processor: in.stream, Index: in.index, Kind: kind})
	if in.failed != 0 {
		rs = append(rs, Ref{Run: run, Processor: in.stream, Index: in.failed, Kind: store.KindFailed})
	}
	return rs
}

// row is the input row's Ref.
func (in *inputRec) row(run int) Ref {
	kind := store.KindInline
	if in.indexed {
		kind = store.KindIndexed
	}
	return Ref{Run: run, Processor: in.stream, Index: in.index, Kind: kind}
}

// output is the Ref of the input's k-th OUTPUT row (k from 1).
func (in *inputRec) output(run int, k int64) Ref {
	return Ref{Run: run, Processor: in.stream, Index: in.index + k, Kind: store.KindOutput}
}

type commitRec struct {
	seq int64
	pos Position
	ref Ref
}

type rangeRec struct {
	pair
	seq, n int64 // seqs seq ... seq+n-1
	offset int64
	detail string
	ref    Ref
}

// lostRec is a LOST row: input the feed's source lost.
type lostRec struct {
	pair
	lost store.Lost
	ref  Ref
}

type runData struct {
	run      int
	r        store.Reader
	inputs   inputLog
	journal  map[string]map[int64]Ref // feed -> seq -> JOURNAL row
	commits  map[string][]commitRec   // feed -> COMMIT rows in order
	dropped  []rangeRec
	failed   []rangeRec // n = 1; a completion's FAILED row is not here (it marks its input)
	lost     []lostRec
	problems []store.Problem // the recording's (the run's Run.Problems)
	crashed  bool
	// undrained: the pairs whose END rows list items the clean stop left
	// unprocessed (store.Unprocessed): answered as a crash's in flight.
	undrained map[pair]bool
}

// hasInputsOfKey reports whether the run has an input of p delivered at a
// position with key (for a file, key "": any input of p).
func (d *runData) hasInputsOfKey(p pair, key string) bool {
	for in := range d.inputs.all() {
		if in.pair == p && (key == "" || in.delivery && in.pos.Key == key) {
			return true
		}
	}
	return false
}

// place is pos as an identity: a position is one place within its
// position space, its epoch and key. A file's epoch (key "") changes with
// a new file or a reset; a Kafka partition's (key "topic/partition") is
// its topic's incarnation, the same for every generation and restart
// reading it, another once the topic is deleted and created again (its
// offsets start at 0 again).
func place(pos Position) Position { return pos }

// sameSpace reports whether positions a and b can be compared by offset:
// the same epoch and key.
func sameSpace(a, b Position) bool {
	return a.Key == b.Key && a.Epoch == b.Epoch
}

// read reads one recording in storage order.
func (x *explainer) read(run int, rec Recording) *runData {
	d := &runData{run: run, r: rec.Reader, inputs: inputLog{names: x.names}, journal: map[string]map[int64]Ref{}, commits: map[string][]commitRec{}}
	sum := Run{Run: run, File: rec.File, Format: rec.Reader.Meta().Format, Counts: map[string]int64{}, Problems: []store.Problem{}}
	type streamState struct {
		delivery *store.Entry // points to dl when the last row was a DELIVERY
		dl       store.Entry  // its fields of a position (no payload)
		dref     Ref
		last     *inputRec // the input the next OUTPUT rows belong to
		lastRec  int       // its record in d.inputs
		in       inputRec  // last points here
		ended    bool
	}
	streams := map[string]*streamState{}
	st := func(name string) *streamState {
		s := streams[name]
		if s == nil {
			s = &streamState{}
			streams[name] = s
		}
		return s
	}
	// settle keeps the OUTPUT rows the stream's last input wrote, and
	// forgets it: the next rows of the stream belong to no input, or to
	// the next.
	settle := func(s *streamState) {
		if in := s.last; in != nil {
			d.inputs.setOuts(s.lastRec, in.n, in.outs)
			s.last = nil
		}
	}
	readErr := false
	for e, err := range rec.Reader.Scan() {
		if err != nil {
			var p *store.Problem
			if errors.As(err, &p) {
				continue // a row that cannot be read: Problems lists it
			}
			readErr = true
			sum.Problems = append(sum.Problems, store.Unreadable(rec.File, err)...)
			break
		}
		sum.Rows++
		sum.Counts[string(e.Kind)]++
		ref := Ref{Run: run, Processor: e.Processor, Index: e.Index, Kind: e.Kind}
		switch e.Kind {
		case store.KindJournal:
			m := d.journal[e.Source]
			if m == nil {
				m = map[int64]Ref{}
				d.journal[e.Source] = m
			}
			m[e.Seq] = ref
			continue
		case store.KindCommit:
			d.commits[e.Source] = append(d.commits[e.Source], commitRec{seq: e.Seq, pos: Position{Epoch: e.Epoch, Key: e.Key, Offset: e.Offset}, ref: ref})
			continue
		case store.KindMeta:
			continue
		}
		if e.Processor == "" {
			continue
		}
		s := st(e.Processor)
		proc := core.BaseStream(e.Processor)
		switch e.Kind {
		case store.KindDelivery:
			s.dl = store.Entry{Source: e.Source, Seq: e.Seq, Epoch: e.Epoch, Key: e.Key, Offset: e.Offset}
			s.delivery, s.dref = &s.dl, ref
			continue
		case store.KindIndexed, store.KindInline:
			settle(s)
			s.in = inputRec{pair: pair{e.Source, proc}, stream: e.Processor, seq: e.Seq, n: e.N,
				index: e.Index, indexed: e.Kind == store.KindIndexed}
			if dl := s.delivery; dl != nil && dl.Source == e.Source && dl.Seq == e.Seq && s.dref.Index == e.Index-1 {
				s.in.pos = Position{Epoch: dl.Epoch, Key: dl.Key, Offset: dl.Offset}
				s.in.delivery = true
			}
			s.last, s.lastRec = &s.in, d.inputs.add(s.in)
		case store.KindTimer:
			settle(s)
		case store.KindOutput:
			if in := s.last; in != nil && e.Index == in.index+in.outs+1 {
				in.outs++
			}
			s.delivery = nil
			continue
		case store.KindDropped:
			d.dropped = append(d.dropped, rangeRec{pair: pair{e.Source, proc}, seq: e.Seq, n: e.N, offset: e.Offset, detail: e.Detail, ref: ref})
		case store.KindLost:
			d.lost = append(d.lost, lostRec{pair: pair{e.Source, proc}, lost: store.LostOf(e), ref: ref})
		case store.KindFailed:
			if in := s.last; in != nil && in.feed == e.Source && in.seq == e.Seq && e.Source != "" {
				d.inputs.setFailed(s.lastRec, e.Index) // a completion of the input before failed
			} else if e.Source != "" {
				d.failed = append(d.failed, rangeRec{pair: pair{e.Source, proc}, seq: e.Seq, n: 1, detail: e.Detail, ref: ref})
			} else {
				x.f.Losses = append(x.f.Losses, Loss{Kind: LossFailed, Run: run, Detail: e.Detail, Rows: []Ref{ref}})
			}
			settle(s)
		case store.KindEnd:
			s.ended = true
			settle(s)
			if us, err := store.UnprocessedOf(e); err == nil { // else Problems lists it
				for _, u := range us {
					if d.undrained == nil {
						d.undrained = map[pair]bool{}
					}
					d.undrained[pair{u.Feed, proc}] = true
				}
			}
		default:
			settle(s)
		}
		s.delivery = nil
	}
	for _, s := range streams {
		settle(s)
	}
	if !readErr {
		sum.Problems = append(sum.Problems, rec.Reader.Problems()...)
	}
	for _, p := range rec.Reader.Processors() {
		st(p)
	}
	ended := len(streams) > 0 && !readErr
	for _, s := range streams {
		ended = ended && s.ended
	}
	for _, p := range sum.Problems {
		switch p.Kind {
		case store.ProblemTorn, store.ProblemUnfinished:
			ended = false
			d.crashed = true
		}
	}
	d.problems = sum.Problems
	if !ended && !readErr {
		d.crashed = true
	}
	sum.Ended, sum.Crashed = ended, d.crashed
	x.f.Runs = append(x.f.Runs, sum)
	return d
}

// answer fills the Answers and the recording losses.
func (x *explainer) answer() {
	pairs := map[pair]bool{}
	for _, d := range x.runs {
		for in := range d.inputs.all() {
			pairs[in.pair] = true
		}
		for _, r := range d.dropped {
			pairs[r.pair] = true
		}
		for _, r := range d.failed {
			pairs[r.pair] = true
		}
		for _, r := range d.lost {
			pairs[r.pair] = true
		}
	}
	keys := make([]pair, 0, len(pairs))
	for p := range pairs {
		keys = append(keys, p)
	}
	slices.SortFunc(keys, func(a, b pair) int { return cmp.Or(cmp.Compare(a.proc, b.proc), cmp.Compare(a.feed, b.feed)) })
	for _, p := range keys {
		x.f.Answers = append(x.f.Answers, x.answers(p))
	}
	last := x.runs[len(x.runs)-1].run
	for i, d := range x.runs {
		var tail []store.Problem
		if d.run != last {
			tail = store.CrashTail(d.r, d.problems) // a crash a restart followed: its answers are in Crashes
		}
		for _, p := range x.f.Runs[i].Problems {
			if slices.Contains(tail, p) {
				continue
			}
			// Any other problem leaves something unproven: the recordings
			// are not complete (as verify, replay and diff say).
			x.f.Complete = false
			switch p.Kind {
			case store.ProblemMissingInput, store.ProblemFailed:
				continue // answered per feed and processor (in no run; the FAILED rows)
			}
			x.f.Losses = append(x.f.Losses, Loss{Kind: string(p.Kind), Run: d.run, Detail: p.Detail,
				Rows: []Ref{{Run: d.run, Processor: p.Processor, Index: p.Index, Kind: p.Row}}})
		}
	}
}

func (x *explainer) answers(p pair) Answers {
	a := Answers{Feed: p.feed, Processor: p.proc, Crashes: []Crash{}, Redelivered: []Redelivery{}, Lost: []Loss{}, Duplicates: []Duplicate{}}
	for _, d := range x.runs {
		if d.crashed {
			a.Crashes = append(a.Crashes, x.crash(d, p))
		} else if d.undrained[p] {
			// A clean stop whose drain ran out: what it left in flight is
			// known exactly (no batch may have lost its rows).
			c := x.crash(d, p)
			c.Stopped, c.MaybeInFlight, c.MaybeInFlightInputs, c.MaybeInFlightOutputs = true, nil, 0, 0
			a.Crashes = append(a.Crashes, c)
		}
		for _, r := range d.dropped {
			if r.pair == p {
				a.Lost = append(a.Lost, Loss{Kind: LossDropped, Run: d.run, Count: r.n, Detail: r.detail, Rows: []Ref{r.ref}})
			}
		}
		for _, r := range d.failed {
			if r.pair == p {
				a.Lost = append(a.Lost, Loss{Kind: LossFailed, Run: d.run, Count: 1, Detail: r.detail, Rows: []Ref{r.ref}})
			}
		}
		for _, r := range d.lost {
			if r.pair == p {
				a.Lost = append(a.Lost, Loss{Kind: LossSource, Run: d.run, Count: r.lost.Items, Detail: r.lost.String(), Rows: []Ref{r.ref}})
			}
		}
		for in := range d.inputs.all() {
			if in.pair == p && in.failed != 0 {
				a.Lost = append(a.Lost, Loss{Kind: LossFailed, Run: d.run, Count: 0, Detail: fmt.Sprintf("a completion of seq %d failed", in.seq), Rows: in.refs(d.run)})
			}
		}
		a.Lost = append(a.Lost, x.inNoRun(d, p)...)
	}
	x.redelivered(p, &a)
	return a
}

// complete: the input's rows were all written and none of its completions
// failed.
func (in *inputRec) complete() bool { return in.outs == in.n && in.failed == 0 }

// input is in as the Findings show it; fill reads its line and time.
func (x *explainer) input(d *runData, in *inputRec) Input {
	var pos *Position
	if in.delivery {
		p := in.pos
		pos = &p
	}
	return Input{Run: d.run, Seq: in.seq, Position: pos, Outputs: in.outs, Rows: in.refs(d.run)}
}

// crash answers 1, 2 and 3 for one crashed run.
func (x *explainer) crash(d *runData, p pair) Crash {
	c := Crash{Run: d.run, InFlight: []Input{}}
	var last *inputRec
	var handled spans
	journalled := false
	for in := range d.inputs.all() {
		if in.pair != p {
			continue
		}
		handled.add(in.seq)
		journalled = journalled || in.indexed
		if in.complete() && (last == nil || in.seq > last.seq) {
			last = &in
		}
	}
	handled.merge()
	if last != nil {
		li := x.input(d, last)
		c.LastProcessed = &li
	}
	var lost spans // dropped or failed
	for _, r := range append(slices.Clip(d.dropped), d.failed...) {
		if r.pair == p {
			lost.addRange(r.seq, r.n)
		}
	}
	lost.merge()
	if j := d.journal[p.feed]; len(j) > 0 || journalled {
		c.InFlightKnown = true
		for seq, ref := range j {
			if !handled.has(seq) && !lost.has(seq) {
				in := Input{Run: d.run, Seq: seq, Rows: []Ref{ref}}
				c.InFlight = append(c.InFlight, in) // fill reads its line
			}
		}
	}
	for in := range d.inputs.all() {
		if in.pair == p && in.outs < in.n {
			c.InFlight = append(c.InFlight, x.input(d, &in)) // its rows were cut
		}
	}
	slices.SortFunc(c.InFlight, func(a, b Input) int { return cmp.Compare(a.Seq, b.Seq) })
	c.Lag = x.lag(d, p, last)
	if last != nil && !last.delivery {
		return c
	}
	// past: a later run's input the crashed run may have been handling.
	past := func(in *inputRec) bool {
		return in.pair == p && in.delivery &&
			(last == nil || sameSpace(in.pos, last.pos) && in.pos.Offset > last.pos.Offset)
	}
	// The batch: the first core.MaxBatch positions past it that later runs
	// delivered (a later run may itself crash after a few of them), each
	// as the earliest later run recorded it.
	type atRun struct {
		in  inputRec
		run *runData
	}
	var batch []atRun
	for _, next := range x.runs[d.run:] { // the runs after d (numbered from 1)
		for in := range next.inputs.all() {
			if !past(&in) {
				continue
			}
			// After the entries at a lower or the same offset.
			i, found := slices.BinarySearchFunc(batch, in.pos, func(a atRun, at Position) int {
				if a.in.pos.Offset != at.Offset {
					return cmp.Compare(a.in.pos.Offset, at.Offset)
				}
				pa := place(a.in.pos)
				pb := place(at)
				return cmp.Or(cmp.Compare(pa.Epoch, pb.Epoch), cmp.Compare(pa.Key, pb.Key))
			})
			if found || i >= core.MaxBatch {
				continue // an earlier run's, or past the batch
			}
			batch = slices.Insert(batch, i, atRun{in, next})
			batch = batch[:min(len(batch), core.MaxBatch)]
		}
	}
	if len(batch) > 0 {
		in := x.input(batch[0].run, &batch[0].in)
		c.MaybeInFlight = &in
		c.MaybeInFlightInputs = len(batch)
		for i := range batch {
			c.MaybeInFlightOutputs += batch[i].in.outs
		}
	}
	return c
}

// lag answers 3: the inputs processed past the committed position, which
// the next run shows exactly (where it resumed), else the last COMMIT row;
// per position key when the run processed inputs of several (a Kafka
// member's partitions), each from its key's last processed input, summed.
func (x *explainer) lag(d *runData, p pair, last *inputRec) *Lag {
	if last == nil {
		return nil
	}
	lasts := map[string]inputRec{} // the last processed input of each key
	if last.delivery {
		for in := range d.inputs.all() {
			if in.pair == p && in.delivery && in.complete() {
				if l, ok := lasts[in.pos.Key]; !ok || in.seq > l.seq {
					lasts[in.pos.Key] = in
				}
			}
		}
	}
	if len(lasts) <= 1 {
		return x.keyLag(d, p, last)
	}
	total := x.keyLag(d, p, last)
	if total == nil {
		return nil
	}
	total.Items, total.Bytes = 0, 0
	for _, k := range slices.Sorted(maps.Keys(lasts)) {
		in := lasts[k]
		l := x.keyLag(d, p, &in)
		if l == nil {
			continue
		}
		total.Items += l.Items
		total.Bytes += l.Bytes
		total.Keys = append(total.Keys, KeyLag{Key: k, Lag: *l})
	}
	return total
}

// keyLag is the lag of last's key (of every input, for inputs without a
// position).
func (x *explainer) keyLag(d *runData, p pair, last *inputRec) *Lag {
	if l := x.lagFromRestart(d, p, last); l != nil {
		return l
	}
	// ofKey: an input of last's key, a partition's (any input for a file,
	// or when last has no position).
	ofKey := func(in *inputRec) bool { return last.pos.Key == "" || in.delivery && in.pos.Key == last.pos.Key }
	var c *commitRec // the last commit of the last input's key
	for i, o := range d.commits[p.feed] {
		if !last.delivery || o.pos.Key == last.pos.Key {
			c = &d.commits[p.feed][i]
		}
	}
	if c == nil {
		if !hasCommits(d.r.Meta().Format) {
			return nil
		}
		l := &Lag{From: LagFromCommitRow, Rows: []Ref{last.row(d.run)}}
		for in := range d.inputs.all() {
			if in.pair == p && in.complete() && ofKey(&in) {
				l.Items++
			}
		}
		return l
	}
	l := &Lag{From: LagFromCommitRow, Committed: &c.pos, CommitSeq: c.seq, Rows: []Ref{c.ref, last.row(d.run)}}
	for in := range d.inputs.all() {
		if in.pair == p && in.complete() && in.seq > c.seq && ofKey(&in) {
			l.Items++
		}
	}
	if last.delivery && sameSpace(last.pos, c.pos) {
		l.Bytes = max(0, last.pos.Offset-c.pos.Offset)
	}
	return l
}

// lagFromRestart is the lag the next run shows: it resumed just after the
// committed position, so the input of the crashed run (or an earlier one)
// just before its first input of last's epoch and key is the committed one.
// Nil when there is no next run, or it delivered nothing of that key.
func (x *explainer) lagFromRestart(d *runData, p pair, last *inputRec) *Lag {
	if !last.delivery || d.run >= len(x.runs) {
		return nil
	}
	same := func(in *inputRec) bool {
		return in.pair == p && in.delivery && sameSpace(in.pos, last.pos)
	}
	// The first later run that delivered an input of the feed resumed
	// where the crashed run's source had committed: a run in between that
	// wrote no input's rows dispatched none, so it committed nothing. Of a
	// key (a Kafka partition), the first later run that delivered an input
	// of that key: a run in between that delivered others was not
	// assigned it, and committed nothing of it.
	var next *runData
	var first *inputRec
	for _, r := range x.runs[d.run:] { // runs are numbered from 1
		for in := range r.inputs.all() {
			if same(&in) && (first == nil || in.seq < first.seq) {
				first = &in
			}
		}
		if first != nil {
			next = r
			break
		}
		if r.hasInputsOfKey(p, last.pos.Key) {
			return nil // it delivered inputs of the key in another epoch: not comparable
		}
	}
	if first == nil {
		return nil
	}
	committed := Position{Epoch: last.pos.Epoch, Key: last.pos.Key}
	l := &Lag{From: LagFromRestart, Committed: &committed, Rows: []Ref{first.refs(next.run)[0]}}
	var at *Ref
	for _, e := range x.runs[:d.run] {
		for in := range e.inputs.all() {
			if same(&in) && in.pos.Offset < first.pos.Offset && in.pos.Offset >= committed.Offset {
				r := in.row(e.run)
				committed.Offset, at = in.pos.Offset, &r
				if e == d {
					l.CommitSeq = in.seq
				} else {
					l.CommitSeq = 0
				}
			}
		}
	}
	if at != nil {
		l.Rows = append(l.Rows, *at)
	}
	l.Rows = append(l.Rows, last.row(d.run))
	for in := range d.inputs.all() {
		if same(&in) && in.complete() && in.pos.Offset > committed.Offset {
			l.Items++
		}
	}
	l.Bytes = max(0, last.pos.Offset-committed.Offset)
	return l
}

// hasCommits reports whether a recording of format f records its commits.
func hasCommits(f string) bool { return store.KindCommit.In(f) }

// inNoRun answers part of 5: seqs a run's source committed (or, in a run
// that ended, published) with no input, DROPPED or FAILED row for the
// processor: the recording's missing-input problems (store.Checker, the
// rule verify, replay and diff read too), cited by the feed's last COMMIT
// row when the seqs are within it.
func (x *explainer) inNoRun(d *runData, p pair) []Loss {
	var out []Loss
	for _, pb := range d.problems {
		if pb.Kind != store.ProblemMissingInput || pb.Feed != p.feed || pb.Processor != p.proc {
			continue
		}
		rows := []Ref{}
		if commits := d.commits[p.feed]; pb.Row == store.KindCommit && len(commits) > 0 {
			rows = []Ref{commits[len(commits)-1].ref}
		}
		out = append(out, Loss{Kind: LossInNoRun, Run: d.run, Count: pb.Last - pb.First + 1,
			Detail: fmt.Sprintf("run %d: %s", d.run, pb.Detail), Rows: rows})
	}
	return out
}

// redelivered answers 4 and 6: inputs of a later run at the position of an
// earlier run's input. Each is paired with the latest earlier run that
// delivered it; its outputs with those of the latest earlier delivery that
// emitted some.
func (x *explainer) redelivered(p pair, a *Answers) {
	// seen is what the maps keep of an input: the fields its Input and
	// its OUTPUT rows' Refs need, its position being the key.
	type seen struct {
		run     int
		stream  string
		seq     int64
		index   int64
		outs    int64
		failed  int64
		epoch   int64 // its position's
		indexed bool
	}
	rec := func(s seen, pos Position) inputRec {
		pos.Epoch = s.epoch
		return inputRec{stream: s.stream, seq: s.seq, index: s.index, outs: s.outs, failed: s.failed,
			indexed: s.indexed, delivery: true, pos: pos}
	}
	type at struct {
		pos Position
		s   seen
	}
	latest, emitted := map[Position]seen{}, map[Position]seen{}
	for i, d := range x.runs {
		var here []at
		later := i < len(x.runs)-1 // a later run may deliver its inputs again
		for in := range d.inputs.all() {
			if in.pair != p || !in.delivery {
				continue
			}
			if later {
				here = append(here, at{in.pos, seen{d.run, in.stream, in.seq, in.index, in.outs, in.failed, in.pos.Epoch, in.indexed}})
			}
			e, ok := latest[place(in.pos)]
			if !ok {
				continue
			}
			earlier := rec(e, in.pos)
			rd := Redelivery{Position: in.pos, Earlier: x.input(x.runs[e.run-1], &earlier), Again: x.input(d, &in)}
			prev, out := emitted[place(in.pos)]
			switch {
			case in.outs > 0:
				rd.Outcome = OutcomeAppliedAgain
			case out:
				rd.Outcome = OutcomeSkipped
			default:
				rd.Outcome = OutcomeUndetermined
			}
			a.Redelivered = append(a.Redelivered, rd)
			for k := int64(1); out && k <= in.outs; k++ {
				dup := Duplicate{Position: in.pos, K: k, Again: in.output(d.run, k)} // fill reads the rest
				if k <= prev.outs {
					pr := rec(prev, in.pos)
					r := pr.output(prev.run, k)
					dup.Earlier = &r
				}
				a.Duplicates = append(a.Duplicates, dup)
			}
		}
		for _, h := range here { // a position twice in one run: its first
			at := place(h.pos)
			if e, ok := latest[at]; !ok || e.run != d.run {
				latest[at] = h.s
			}
			if h.s.outs > 0 {
				if e, ok := emitted[at]; !ok || e.run != d.run {
					emitted[at] = h.s
				}
			}
		}
	}
}

// onDisk compares the pointer and state given with the recordings.
func (x *explainer) onDisk(opts Options) {
	if opts.Pointer == nil && opts.State == nil {
		return
	}
	feed := opts.Feed
	if feed == "" {
		feeds := map[string]bool{}
		for _, d := range x.runs {
			for in := range d.inputs.all() {
				if in.delivery {
					feeds[in.feed] = true
				}
			}
		}
		if len(feeds) == 1 {
			for f := range feeds {
				feed = f
			}
		}
	}
	od := &OnDisk{Feed: feed}
	// find returns the last input of the feed at pos across the runs.
	find := func(pos Position) *Input {
		var found *Input
		for _, d := range x.runs {
			for in := range d.inputs.all() {
				if in.feed == feed && in.delivery && place(in.pos) == place(pos) {
					i := x.input(d, &in)
					found = &i
				}
			}
		}
		return found
	}
	if opts.Pointer != nil {
		od.Pointer = opts.Pointer
		od.PointerInput = find(*opts.Pointer)
		if od.PointerInput == nil && opts.Pointer.Offset != 0 {
			x.f.Losses = append(x.f.Losses, Loss{Kind: LossInNoRun, Detail: fmt.Sprintf(
				"the pointer holds epoch %d offset %d of feed %q, the position of no input of any run: the inputs before it may be in no run",
				opts.Pointer.Epoch, opts.Pointer.Offset, feed), Rows: []Ref{}})
		}
	}
	if s := opts.State; s != nil {
		pos := Position{Epoch: s.Epoch, Key: s.Position.Key, Offset: s.Position.Offset}
		od.State = &State{Applied: s.Applied, Position: pos}
		od.StateInput = find(pos)
		if od.StateInput == nil && s.Applied != 0 {
			x.f.Losses = append(x.f.Losses, Loss{Kind: LossInNoRun, Detail: fmt.Sprintf(
				"the state applied through epoch %d offset %d of feed %q, the position of no input of any run: it applied an input no recording holds",
				pos.Epoch, pos.Offset, feed), Rows: []Ref{}})
		}
	}
	x.f.OnDisk = od
}
