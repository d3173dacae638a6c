package incident

import (
	"errors"
	"fmt"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store"
)

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

// commitRec is a COMMIT row: the seq and position a feed committed.
type commitRec struct {
	seq int64
	pos Position
	ref Ref
}

// moveBack is a recorded move back: the operator moved a group of feed
// back to seq to (the source read the items after it again, its commit
// lowered to it: docs/GUARANTEES.md "Seek").
type moveBack struct {
	feed string
	to   int64
	ref  Ref
	// at is the target's position (known: the run holds its input),
	// looked up once (resolved) by explainer.movedBack.
	at              Position
	known, resolved bool
}

// rangeRec is a DROPPED or FAILED row of a feed's seqs for a processor.
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

// doneRec is a COMPLETED row: items not handed to a processor, its group
// having completed them in an earlier run.
type doneRec struct {
	pair
	c   store.Completed
	ref Ref
}

// runData is what Explain keeps of one run (one recording) once read.
type runData struct {
	run     int
	r       store.Reader
	inputs  inputLog
	journal map[string]map[int64]Ref // feed -> seq -> JOURNAL row
	commits map[string][]commitRec   // feed -> COMMIT rows in order
	dropped []rangeRec
	failed  []rangeRec // n = 1; a completion's FAILED row is not here (it marks its input)
	lost    []lostRec
	done    []doneRec // COMPLETED rows
	// movesBack are the run's recorded moves back (the CONTROL row of a
	// seek whose after is below its before), in order.
	movesBack []moveBack
	problems  []store.Problem // the recording's (the run's Run.Problems)
	crashed   bool
	// undrained: the pairs whose END rows list items the clean stop left
	// unprocessed (store.Unprocessed): answered as a crash's in flight.
	undrained map[pair]bool
	// killed: why the run was killed, from its END rows (store.End); ""
	// for a stop.
	killed string
	// outbox: the run's outputs went through an outbox (META's "sink"
	// option names its guarantee): a position an earlier such run
	// recorded whole had its outputs delivered once, from that run.
	outbox bool
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

// read reads one recording, run number run, in storage order, once (Scan,
// which checks it in the same pass): it keeps the run's inputs, JOURNAL
// and COMMIT rows, DROPPED, FAILED and LOST rows (runReader.row), appends
// the run's summary to the Findings' Runs and a FAILED row of no feed to
// their Losses, and says whether the run crashed (runReader.end).
func (x *explainer) read(run int, rec Recording) *runData {
	rr := &runReader{x: x,
		d: &runData{run: run, r: rec.Reader, inputs: inputLog{names: x.names}, journal: map[string]map[int64]Ref{}, commits: map[string][]commitRec{}},
		sum: Run{Run: run, File: rec.File, Format: rec.Reader.Meta().Format, Sink: rec.Reader.Meta().Options[store.OptionSink],
			Counts: map[string]int64{}, Problems: []store.Problem{}},
		streams: map[string]*streamState{}}
	rr.d.outbox = rr.sum.Sink != "" && rr.sum.Sink != core.SinkLive
	readErr := false
	for e, err := range rec.Reader.Scan() {
		if err != nil {
			var p *store.Problem
			if errors.As(err, &p) {
				continue // a row that cannot be read: Problems lists it
			}
			readErr = true
			rr.sum.Problems = append(rr.sum.Problems, store.Unreadable(rec.File, err)...)
			break
		}
		rr.row(&e)
	}
	for _, s := range rr.streams {
		rr.settle(s)
	}
	rr.end(rec.Reader, readErr)
	x.f.Runs = append(x.f.Runs, rr.sum)
	return rr.d
}

// runReader is one read of a recording: the run's data and summary so
// far, and the state of each of its streams. It is used by one goroutine.
type runReader struct {
	x       *explainer
	d       *runData
	sum     Run
	streams map[string]*streamState
}

// streamState is what read keeps of a stream between its rows.
type streamState struct {
	delivery *store.Entry // points to dl when the last row was a DELIVERY
	dl       store.Entry  // its fields of a position (no payload)
	dref     Ref
	last     *inputRec // the input the next OUTPUT rows belong to
	lastRec  int       // its record in d.inputs
	in       inputRec  // last points here
	ended    bool
}

// stream is the state of the stream name, made on first use.
func (rr *runReader) stream(name string) *streamState {
	s := rr.streams[name]
	if s == nil {
		s = &streamState{}
		rr.streams[name] = s
	}
	return s
}

// settle keeps the OUTPUT rows the stream's last input wrote, and forgets
// it: the next rows of the stream belong to no input, or to the next.
func (rr *runReader) settle(s *streamState) {
	if in := s.last; in != nil {
		rr.d.inputs.setOuts(s.lastRec, in.n, in.outs)
		s.last = nil
	}
}

// row takes in e, the next row of the recording: a row of no stream
// (JOURNAL, COMMIT, META) here, a row of a processor's stream in
// streamRow. It counts every row in the run's summary.
func (rr *runReader) row(e *store.Entry) {
	d := rr.d
	rr.sum.Rows++
	rr.sum.Counts[string(e.Kind)]++
	ref := Ref{Run: d.run, Processor: e.Processor, Index: e.Index, Kind: e.Kind}
	switch e.Kind {
	case store.KindJournal:
		m := d.journal[e.Source]
		if m == nil {
			m = map[int64]Ref{}
			d.journal[e.Source] = m
		}
		m[e.Seq] = ref
		return
	case store.KindCommit:
		d.commits[e.Source] = append(d.commits[e.Source], commitRec{seq: e.Seq, pos: Position{Epoch: e.Epoch, Key: e.Key, Offset: e.Offset}, ref: ref})
		return
	case store.KindState:
		if st, err := store.StateOf(*e); err == nil { // else Problems lists it
			rr.sum.States = append(rr.sum.States, StateChange{Feed: st.Feed, Group: st.Group, From: st.From, To: st.To,
				Reason: st.Reason, At: st.At, Observed: st.Observed, Row: ref})
		}
		return
	case store.KindControl:
		if c, err := store.ControlOf(*e); err == nil { // else Problems lists it
			rr.sum.Controls = append(rr.sum.Controls, ControlActionOf(c, ref))
			if c.Processed > 0 {
				// Their rows stand (no line is lost by them), but the
				// operator gave up the wait for what applied them to be
				// saved: the run's status counted them, not lossless.
				rr.x.f.Losses = append(rr.x.f.Losses, Loss{Kind: LossReleasedHeld, Run: d.run, Count: c.Processed,
					Detail: fmt.Sprintf("the operator's %s of group %q on feed %q took %d processed items that still held the commit (their rows stand; what applied them may not have been saved)", c.Action, c.Group, c.Feed, c.Processed),
					Rows:   []Ref{ref}})
			}
			if c.Action == "seek" && c.After < c.Before {
				d.movesBack = append(d.movesBack, moveBack{feed: c.Feed, to: c.After, ref: ref})
			}
		}
		return
	case store.KindMeta:
		return
	}
	if e.Processor == "" {
		return
	}
	rr.streamRow(rr.stream(e.Processor), e, ref)
}

// streamRow takes in e, the next row of stream s (ref names it): a
// DELIVERY is kept for the input row right after it, which gets its
// position; an input row is added to the run's inputs, and its OUTPUT
// rows counted until the stream's next input, timer or completion; a
// completion's FAILED row marks its input. An END row says the stream
// ended.
func (rr *runReader) streamRow(s *streamState, e *store.Entry, ref Ref) {
	d := rr.d
	proc := core.BaseStream(e.Processor)
	switch e.Kind {
	case store.KindDelivery:
		s.dl = store.Entry{Source: e.Source, Seq: e.Seq, Epoch: e.Epoch, Key: e.Key, Offset: e.Offset}
		s.delivery, s.dref = &s.dl, ref
		return
	case store.KindIndexed, store.KindInline:
		rr.settle(s)
		s.in = inputRec{pair: pair{e.Source, proc}, stream: e.Processor, seq: e.Seq, n: e.N,
			index: e.Index, indexed: e.Kind == store.KindIndexed}
		if dl := s.delivery; dl != nil && dl.Source == e.Source && dl.Seq == e.Seq && s.dref.Index == e.Index-1 {
			s.in.pos = Position{Epoch: dl.Epoch, Key: dl.Key, Offset: dl.Offset}
			s.in.delivery = true
		}
		s.last, s.lastRec = &s.in, d.inputs.add(s.in)
	case store.KindTimer:
		rr.settle(s)
	case store.KindOutput:
		if in := s.last; in != nil && e.Index == in.index+in.outs+1 {
			in.outs++
		}
		s.delivery = nil
		return
	case store.KindDropped:
		d.dropped = append(d.dropped, rangeRec{pair: pair{e.Source, proc}, seq: e.Seq, n: e.N, offset: e.Offset, detail: e.Detail, ref: ref})
	case store.KindLost:
		d.lost = append(d.lost, lostRec{pair: pair{e.Source, proc}, lost: store.LostOf(*e), ref: ref})
	case store.KindCompleted:
		if c, err := store.CompletedOf(*e); err == nil { // else Problems lists it
			d.done = append(d.done, doneRec{pair: pair{e.Source, proc}, c: c, ref: ref})
		}
	case store.KindFailed:
		if in := s.last; in != nil && in.feed == e.Source && in.seq == e.Seq && e.Source != "" {
			d.inputs.setFailed(s.lastRec, e.Index) // a completion of the input before failed
		} else if e.Source != "" {
			d.failed = append(d.failed, rangeRec{pair: pair{e.Source, proc}, seq: e.Seq, n: 1, detail: e.Detail, ref: ref})
		} else {
			rr.x.f.Losses = append(rr.x.f.Losses, Loss{Kind: LossFailed, Run: d.run, Detail: e.Detail, Rows: []Ref{ref}})
		}
		rr.settle(s)
	case store.KindEnd:
		s.ended = true
		rr.settle(s)
		if end, err := store.EndOf(*e); err == nil { // else Problems lists it
			if d.killed == "" {
				d.killed = end.Killed
			}
			for _, u := range end.Unprocessed {
				if d.undrained == nil {
					d.undrained = map[pair]bool{}
				}
				d.undrained[pair{u.Feed, proc}] = true
			}
		}
	default:
		rr.settle(s)
	}
	s.delivery = nil
}

// end closes the read of r (readErr: a read error stopped it): the run's
// problems are r's (when it was read to its end), and the run crashed
// unless every stream of r ended and no problem is a torn or unfinished
// stream; a read error alone does not make it crashed.
func (rr *runReader) end(r store.Reader, readErr bool) {
	d, sum := rr.d, &rr.sum
	if !readErr {
		sum.Problems = append(sum.Problems, r.Problems()...)
	}
	for _, p := range r.Processors() {
		rr.stream(p)
	}
	ended := len(rr.streams) > 0 && !readErr
	for _, s := range rr.streams {
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
	sum.Ended, sum.Crashed, sum.Killed = ended, d.crashed, d.killed
	rr.x.f.Losses = append(rr.x.f.Losses, latched(d.run, sum.States)...)
}

// latched is a loss for each binding whose last STATE row of the run is a
// change to LATCHED: never cleared in the run, which then lost what the
// binding's policy promised to keep (a refusal, a downgraded drop).
func latched(run int, states []StateChange) []Loss {
	type binding struct{ feed, group string }
	last := map[binding]int{}
	var order []binding
	for i, c := range states {
		b := binding{c.Feed, c.Group}
		if _, ok := last[b]; !ok {
			order = append(order, b)
		}
		last[b] = i
	}
	var out []Loss
	for _, b := range order {
		if c := states[last[b]]; c.To == store.StateLatched {
			out = append(out, Loss{Kind: LossLatched, Run: run, Rows: []Ref{c.Row},
				Detail: fmt.Sprintf("feed %q group %q latched at %s and never cleared: %s", c.Feed, c.Group, store.FormatInstant(c.At), c.Reason)})
		}
	}
	return out
}
