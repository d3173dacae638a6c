package incident

import (
	"cmp"
	"errors"
	"fmt"
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
	// holds now: PositionOf(ptr.Epoch, ptr.Position()) of the ptr
	// filesource.ReadPointer reads; nil for none.
	Pointer *Position
	// State is what the app's durable state holds now (core.Durable); nil
	// for none.
	State *core.DurableState
	// Ignore lists JSON object keys left out, at any depth, when a
	// duplicate's output is compared with the earlier one
	// (Duplicate.Same): a clock reading such as the built-in apps' "at"
	// differs between two runs of the same input. An output that is not
	// JSON is compared byte for byte.
	Ignore []string
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
	fill(x.f, readers, opts.Ignore)
	x.f.Lost = len(x.f.Losses) > 0
	for _, a := range x.f.Answers {
		if len(a.Lost) > 0 {
			x.f.Lost = true
		}
	}
	return x.f, nil
}

// explainer is one Explain call: the Findings being answered, and what it
// read of each run. It is used by one goroutine.
type explainer struct {
	f     *Findings
	runs  []*runData
	names *names // the names of the runs' inputs: one copy each
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
		for _, r := range d.done {
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

// answers answers the questions of Findings.Answers for feed and processor p
// over every run: crashes, losses, re-deliveries and duplicates.
func (x *explainer) answers(p pair) Answers {
	a := Answers{Feed: p.feed, Processor: p.proc, Crashes: []Crash{}, Redelivered: []Redelivery{}, Lost: []Loss{}, Duplicates: []Duplicate{}}
	for _, d := range x.runs {
		if d.crashed {
			a.Crashes = append(a.Crashes, x.crash(d, p))
		} else if d.undrained[p] {
			// A clean stop whose drain ran out, or a kill: what it left in
			// flight is known exactly (no batch may have lost its rows).
			c := x.crash(d, p)
			c.Stopped, c.MaybeInFlight, c.MaybeInFlightInputs, c.MaybeInFlightOutputs = true, nil, 0, 0
			c.Killed = d.killed
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
		for _, r := range d.done {
			if r.pair == p {
				a.NotHandedAgain = append(a.NotHandedAgain, NotHandedAgain{Run: d.run, Completed: r.c, Rows: []Ref{r.ref}})
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
