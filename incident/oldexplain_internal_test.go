package incident

// oldExplain is Explain as it was before it kept its inputs compact (every
// input a struct behind a pointer, positions compared in maps): the oracle
// TestExplainAnswersAsBeforeOnRandomCrashes compares Explain with. Its
// commit lag follows the rule of Explain since (per position key, a key's
// positions compared whatever the epoch); the random crashes give every
// position epoch 1.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/blackbox-audit/blackbox/store"
)

// oldExplain reads the recordings of a crashed run and its restarts, in the
// order they ran (as `blackbox diff` stitches them), and answers what the
// crashes did (Findings). It reads each recording in storage order, keeping
// of each input its seq, position, row index and output count (no payload),
// then reads once more the recordings holding rows it reports, for their
// lines, times and outputs, and looks up the JOURNAL rows of INDEXED
// inputs. Its memory grows with the number of inputs (their positions are
// compared across runs), by about 150 bytes each. A recording that cannot be read, or a row that cannot be, makes
// the Findings not Complete; oldExplain returns an error only when given no
// recording.
func oldExplain(recs []Recording, opts Options) (*Findings, error) {
	if len(recs) == 0 {
		return nil, ErrNoRecording
	}
	x := &oldExplainer{f: &Findings{Complete: true, Runs: []Run{}, Answers: []Answers{}, Losses: []Loss{}}, strings: map[string]string{}}
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

type oldExplainer struct {
	f       *Findings
	runs    []*oldRunData
	strings map[string]string // interned names: one copy per name, not per row
}

// intern returns the one copy of s the oldExplainer keeps.
func (x *oldExplainer) intern(s string) string {
	if v, ok := x.strings[s]; ok {
		return v
	}
	x.strings[s] = s
	return s
}

// oldInputRec is what oldExplain keeps of an input row while it reads: no
// payload and no instant (fill reads those of the inputs it reports), so
// that its memory per input stays small.
type oldInputRec struct {
	pair
	stream   string
	seq      int64
	pos      *Position
	n        int64 // outputs the input row declares
	outs     int64 // its OUTPUT rows, at index+1 ... index+outs
	index    int64 // the input row's; its DELIVERY, if any, is at index-1
	failed   int64 // the index of the FAILED row of its completion; 0 for none
	delivery bool
	indexed  bool
}

// refs are the input's rows: its DELIVERY, the input row, and the FAILED
// row of a completion.
func (in *oldInputRec) refs(run int) []Ref {
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
func (in *oldInputRec) row(run int) Ref {
	kind := store.KindInline
	if in.indexed {
		kind = store.KindIndexed
	}
	return Ref{Run: run, Processor: in.stream, Index: in.index, Kind: kind}
}

// output is the Ref of the input's k-th OUTPUT row (k from 1).
func (in *oldInputRec) output(run int, k int64) Ref {
	return Ref{Run: run, Processor: in.stream, Index: in.index + k, Kind: store.KindOutput}
}

type oldCommitRec struct {
	seq int64
	pos Position
	ref Ref
}

type oldRangeRec struct {
	pair
	seq, n int64 // seqs seq ... seq+n-1
	offset int64
	detail string
	ref    Ref
}

type oldRunData struct {
	run      int
	r        store.Reader
	inputs   []*oldInputRec
	journal  map[string]map[int64]Ref  // feed -> seq -> JOURNAL row
	commits  map[string][]oldCommitRec // feed -> COMMIT rows in order
	dropped  []oldRangeRec
	failed   []oldRangeRec // n = 1; a completion's FAILED row is not here (it marks its input)
	problems []store.Problem
	crashed  bool
}

// read reads one recording in storage order.
func (x *oldExplainer) read(run int, rec Recording) *oldRunData {
	d := &oldRunData{run: run, r: rec.Reader, journal: map[string]map[int64]Ref{}, commits: map[string][]oldCommitRec{}}
	sum := Run{Run: run, File: rec.File, Format: rec.Reader.Meta().Format, Counts: map[string]int64{}, Problems: []store.Problem{}}
	type streamState struct {
		delivery *store.Entry
		dref     Ref
		last     *oldInputRec // the input the next OUTPUT rows belong to
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
	readErr := false
	for e, err := range rec.Reader.Rows() {
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
			d.commits[e.Source] = append(d.commits[e.Source], oldCommitRec{seq: e.Seq, pos: Position{Epoch: e.Epoch, Key: e.Key, Offset: e.Offset}, ref: ref})
			continue
		case store.KindMeta:
			continue
		}
		if e.Processor == "" {
			continue
		}
		s := st(e.Processor)
		proc := store.BaseStream(e.Processor)
		switch e.Kind {
		case store.KindDelivery:
			c := e
			c.Payload, c.Reads = nil, nil
			s.delivery, s.dref = &c, ref
			continue
		case store.KindIndexed, store.KindInline:
			in := &oldInputRec{pair: pair{x.intern(e.Source), x.intern(proc)}, stream: x.intern(e.Processor), seq: e.Seq, n: e.N,
				index: e.Index, indexed: e.Kind == store.KindIndexed}
			if dl := s.delivery; dl != nil && dl.Source == e.Source && dl.Seq == e.Seq && s.dref.Index == e.Index-1 {
				in.pos = &Position{Epoch: dl.Epoch, Key: x.intern(dl.Key), Offset: dl.Offset}
				in.delivery = true
			}
			d.inputs = append(d.inputs, in)
			s.last = in
		case store.KindTimer:
			s.last = nil
		case store.KindOutput:
			if in := s.last; in != nil && e.Index == in.index+in.outs+1 {
				in.outs++
			}
			s.delivery = nil
			continue
		case store.KindDropped:
			d.dropped = append(d.dropped, oldRangeRec{pair: pair{e.Source, proc}, seq: e.Seq, n: e.N, offset: e.Offset, detail: e.Detail, ref: ref})
		case store.KindFailed:
			if in := s.last; in != nil && in.feed == e.Source && in.seq == e.Seq && e.Source != "" {
				in.failed = e.Index // a completion of the input before failed
			} else if e.Source != "" {
				d.failed = append(d.failed, oldRangeRec{pair: pair{e.Source, proc}, seq: e.Seq, n: 1, detail: e.Detail, ref: ref})
			} else {
				x.f.Losses = append(x.f.Losses, Loss{Kind: LossFailed, Run: run, Detail: e.Detail, Rows: []Ref{ref}})
			}
			s.last = nil
		case store.KindEnd:
			s.ended = true
			s.last = nil
		default:
			s.last = nil
		}
		s.delivery = nil
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
func (x *oldExplainer) answer() {
	pairs := map[pair]bool{}
	for _, d := range x.runs {
		for _, in := range d.inputs {
			pairs[in.pair] = true
		}
		for _, r := range d.dropped {
			pairs[r.pair] = true
		}
		for _, r := range d.failed {
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
			x.f.Complete = false
			switch p.Kind {
			case store.ProblemMissingInput, store.ProblemFailed:
				continue // answered per feed and processor
			}
			x.f.Losses = append(x.f.Losses, Loss{Kind: string(p.Kind), Run: d.run, Detail: p.Detail,
				Rows: []Ref{{Run: d.run, Processor: p.Processor, Index: p.Index, Kind: p.Row}}})
		}
	}
}

func (x *oldExplainer) answers(p pair) Answers {
	a := Answers{Feed: p.feed, Processor: p.proc, Crashes: []Crash{}, Redelivered: []Redelivery{}, Lost: []Loss{}, Duplicates: []Duplicate{}}
	for _, d := range x.runs {
		if d.crashed {
			a.Crashes = append(a.Crashes, x.crash(d, p))
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
		for _, in := range d.inputs {
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
func (in *oldInputRec) complete() bool { return in.outs == in.n && in.failed == 0 }

// input is in as the Findings show it; fill reads its line and time.
func (x *oldExplainer) input(d *oldRunData, in *oldInputRec) Input {
	return Input{Run: d.run, Seq: in.seq, Position: in.pos, Outputs: in.outs, Rows: in.refs(d.run)}
}

// crash answers 1, 2 and 3 for one crashed run.
func (x *oldExplainer) crash(d *oldRunData, p pair) Crash {
	c := Crash{Run: d.run, InFlight: []Input{}}
	var last *oldInputRec
	handled := map[int64]bool{}
	journalled := false
	for _, in := range d.inputs {
		if in.pair != p {
			continue
		}
		handled[in.seq] = true
		journalled = journalled || in.indexed
		if in.complete() && (last == nil || in.seq > last.seq) {
			last = in
		}
	}
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
			if !handled[seq] && !lost.has(seq) {
				in := Input{Run: d.run, Seq: seq, Rows: []Ref{ref}}
				c.InFlight = append(c.InFlight, in) // fill reads its line
			}
		}
	}
	for _, in := range d.inputs {
		if in.pair == p && in.outs < in.n {
			c.InFlight = append(c.InFlight, x.input(d, in)) // its rows were cut
		}
	}
	slices.SortFunc(c.InFlight, func(a, b Input) int { return cmp.Compare(a.Seq, b.Seq) })
	c.Lag = x.lag(d, p, last)
	if last != nil && last.pos == nil {
		return c
	}
	// The batch semantics of MaybeInFlight (group commit), written the
	// simple way: every past input of every later run, the earliest run's
	// for a position, sorted by offset, the first MaxBatch.
	type atRun struct {
		in  *oldInputRec
		run *oldRunData
	}
	var past []atRun
	seen := map[Position]bool{}
	for _, next := range x.runs[d.run:] { // the runs after d (numbered from 1)
		for _, in := range next.inputs {
			if in.pair == p && in.pos != nil && !seen[*in.pos] && (last == nil || in.pos.Epoch == last.pos.Epoch && in.pos.Key == last.pos.Key &&
				in.pos.Offset > last.pos.Offset) {
				seen[*in.pos] = true
				past = append(past, atRun{in, next})
			}
		}
	}
	slices.SortFunc(past, func(a, b atRun) int {
		return cmp.Or(cmp.Compare(a.in.pos.Offset, b.in.pos.Offset), cmp.Compare(a.in.pos.Epoch, b.in.pos.Epoch), cmp.Compare(a.in.pos.Key, b.in.pos.Key))
	})
	if len(past) > 0 {
		past = past[:min(len(past), MaxBatch)]
		in := x.input(past[0].run, past[0].in)
		c.MaybeInFlight = &in
		c.MaybeInFlightInputs = len(past)
		for _, a := range past {
			c.MaybeInFlightOutputs += a.in.outs
		}
	}
	return c
}

// lag answers 3: the inputs processed past the committed position, which
// the next run shows exactly (where it resumed), else the last COMMIT row.
func (x *oldExplainer) lag(d *oldRunData, p pair, last *oldInputRec) *Lag {
	if last == nil {
		return nil
	}
	// Per position key (a Kafka member's partitions), from each key's
	// last processed input, summed; one key: that key's lag.
	lasts := map[string]*oldInputRec{}
	if last.pos != nil {
		for _, in := range d.inputs {
			if in.pair == p && in.pos != nil && in.complete() {
				if l := lasts[in.pos.Key]; l == nil || in.seq > l.seq {
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
		if l := x.keyLag(d, p, lasts[k]); l != nil {
			total.Items += l.Items
			total.Bytes += l.Bytes
			total.Keys = append(total.Keys, KeyLag{Key: k, Lag: *l})
		}
	}
	return total
}

func (x *oldExplainer) keyLag(d *oldRunData, p pair, last *oldInputRec) *Lag {
	if l := x.lagFromRestart(d, p, last); l != nil {
		return l
	}
	key := ""
	if last.pos != nil {
		key = last.pos.Key
	}
	ofKey := func(in *oldInputRec) bool { return key == "" || in.pos != nil && in.pos.Key == key }
	var c *oldCommitRec
	for i, o := range d.commits[p.feed] { // the last commit of the last input's key
		if last.pos == nil || o.pos.Key == key {
			c = &d.commits[p.feed][i]
		}
	}
	if c == nil {
		if !hasCommits(d.r.Meta().Format) {
			return nil
		}
		l := &Lag{From: LagFromCommitRow, Rows: []Ref{last.row(d.run)}}
		for _, in := range d.inputs {
			if in.pair == p && in.complete() && ofKey(in) {
				l.Items++
			}
		}
		return l
	}
	l := &Lag{From: LagFromCommitRow, Committed: &c.pos, CommitSeq: c.seq, Rows: []Ref{c.ref, last.row(d.run)}}
	for _, in := range d.inputs {
		if in.pair == p && in.complete() && in.seq > c.seq && ofKey(in) {
			l.Items++
		}
	}
	if last.pos != nil && last.pos.Key == c.pos.Key && (key != "" || last.pos.Epoch == c.pos.Epoch) {
		l.Bytes = max(0, last.pos.Offset-c.pos.Offset)
	}
	return l
}

// lagFromRestart is the lag the next run shows: it resumed just after the
// committed position, so the input of the crashed run (or an earlier one)
// just before its first input of last's epoch and key is the committed one.
// Nil when there is no next run, or it delivered nothing of that key.
func (x *oldExplainer) lagFromRestart(d *oldRunData, p pair, last *oldInputRec) *Lag {
	if last.pos == nil || d.run >= len(x.runs) {
		return nil
	}
	same := func(in *oldInputRec) bool {
		return in.pair == p && in.pos != nil && in.pos.Key == last.pos.Key && (in.pos.Key != "" || in.pos.Epoch == last.pos.Epoch)
	}
	var next *oldRunData
	var first *oldInputRec
	for _, r := range x.runs[d.run:] { // runs are numbered from 1; skip those that delivered nothing of p
		any := false
		for _, in := range r.inputs {
			any = any || in.pair == p
			if same(in) && (first == nil || in.seq < first.seq) {
				first = in
			}
		}
		if first != nil {
			next = r
			break
		}
		if any && last.pos.Key == "" {
			return nil // another epoch: not comparable (a partition's key: a run not assigned it)
		}
	}
	if first == nil {
		return nil
	}
	committed := Position{Epoch: last.pos.Epoch, Key: last.pos.Key}
	l := &Lag{From: LagFromRestart, Committed: &committed, Rows: []Ref{first.refs(next.run)[0]}}
	var at *Ref
	for _, e := range x.runs[:d.run] {
		for _, in := range e.inputs {
			if same(in) && in.pos.Offset < first.pos.Offset && in.pos.Offset >= committed.Offset {
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
	for _, in := range d.inputs {
		if same(in) && in.complete() && in.pos.Offset > committed.Offset {
			l.Items++
		}
	}
	l.Bytes = max(0, last.pos.Offset-committed.Offset)
	return l
}

// inNoRun answers part of 5: the recording's missing-input problems, as
// Explain's inNoRun (the store's rule, not the layout this oracle checks).
func (x *oldExplainer) inNoRun(d *oldRunData, p pair) []Loss {
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
func (x *oldExplainer) redelivered(p pair, a *Answers) {
	type seen struct {
		d  *oldRunData
		in *oldInputRec
	}
	latest, emitted := map[Position]seen{}, map[Position]seen{}
	for _, d := range x.runs {
		var here []seen
		for _, in := range d.inputs {
			if in.pair != p || in.pos == nil {
				continue
			}
			here = append(here, seen{d, in})
			e, ok := latest[*in.pos]
			if !ok {
				continue
			}
			rd := Redelivery{Position: *in.pos, Earlier: x.input(e.d, e.in), Again: x.input(d, in)}
			prev, out := emitted[*in.pos]
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
				dup := Duplicate{Position: *in.pos, K: k, Again: in.output(d.run, k)} // fill reads the rest
				if k <= prev.in.outs {
					r := prev.in.output(prev.d.run, k)
					dup.Earlier = &r
				}
				a.Duplicates = append(a.Duplicates, dup)
			}
		}
		for _, s := range here { // a position twice in one run: its first
			if e, ok := latest[*s.in.pos]; !ok || e.d != d {
				latest[*s.in.pos] = s
			}
			if s.in.outs > 0 {
				if e, ok := emitted[*s.in.pos]; !ok || e.d != d {
					emitted[*s.in.pos] = s
				}
			}
		}
	}
}

// onDisk compares the pointer and state given with the recordings.
func (x *oldExplainer) onDisk(opts Options) {
	if opts.Pointer == nil && opts.State == nil {
		return
	}
	feed := opts.Feed
	if feed == "" {
		feeds := map[string]bool{}
		for _, d := range x.runs {
			for _, in := range d.inputs {
				if in.pos != nil {
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
			for _, in := range d.inputs {
				if in.feed == feed && in.pos != nil && *in.pos == pos {
					i := x.input(d, in)
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
