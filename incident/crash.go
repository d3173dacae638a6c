package incident

import (
	"cmp"
	"maps"
	"slices"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store"
)

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
	var lost spans // dropped or failed, or not handed: completed in an earlier run
	for _, r := range append(slices.Clip(d.dropped), d.failed...) {
		if r.pair == p {
			lost.addRange(r.seq, r.n)
		}
	}
	for _, r := range d.done {
		if r.pair == p {
			lost.addRange(r.c.Seq, r.c.Items)
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
