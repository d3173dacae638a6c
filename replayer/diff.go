package replayer

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"

	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// DefaultDiffLimit is how many inputs a ProcessorDiff lists at most in each
// of its lists when DiffOptions.Limit is 0. The counts are always exact.
const DefaultDiffLimit = 1000

// DiffOptions configure Diff. Diff only reads them.
type DiffOptions struct {
	// Codec decodes the OUTPUT payloads of both sides. Default recorder.JSON.
	Codec recorder.Codec
	// Ignore lists JSON object keys left out when outputs are compared, at
	// any depth of the decoded value: for example "at", the clock reading
	// the built-in apps put in their outputs, which two independent runs
	// reading a system clock never share. Want and Got still show the
	// outputs whole.
	Ignore []string
	// Limit bounds each list of a ProcessorDiff (OnlyA, OnlyB, Different,
	// Twice, DuplicateOutputs); 0 means DefaultDiffLimit, negative no limit.
	Limit int
	// Concurrent says of side A (0) and side B (1) that its recordings
	// are runs that ran at the same time, the members of one consumer
	// group (their order is the order they were created, not the order
	// in which they processed a record), rather than consecutive runs (a
	// crashed run and its restarts). It changes which re-deliveries the
	// runs explain: see Diff.
	Concurrent [2]bool
}

// DiffVerdict is a Diff's verdict.
type DiffVerdict string

// The verdicts of Diff.
const (
	// DiffSame: both sides are complete and no processor differs.
	DiffSame DiffVerdict = "same"
	// DiffDifferent: both sides are complete and a processor differs.
	DiffDifferent DiffVerdict = "different"
	// DiffNotComplete: a side has an integrity problem that the stitching
	// of its runs does not explain, holds no processor stream, or does not
	// hold the outputs of an input (ProcessorDiff.Cut); the differences
	// found, if any, are listed too.
	DiffNotComplete DiffVerdict = "not complete"
)

// DiffReport is the result of Diff. Same (Verdict DiffSame) only when both
// sides are complete and equal: no input is missing from either side, every
// input aligned on both sides has the same outputs, and no input was
// processed more than once within one run. Inputs processed once per run
// of a stitched side (Twice), and re-deliveries that emitted the same
// outputs again (DuplicateOutputs), do not make the sides differ. A side is
// complete when its recordings have no integrity problem but the one a
// stitched crashed run has: every run but the last is unfinished (no END).
// A DiffReport is a plain value, safe to read from several goroutines once
// returned.
type DiffReport struct {
	Same    bool        `json:"same"`
	Verdict DiffVerdict `json:"verdict"`
	// Complete: neither side has an integrity problem that the stitching
	// does not explain, each holds a processor stream, and each holds the
	// outputs of every input it holds (no ProcessorDiff.Cut).
	Complete bool `json:"complete"`
	// Why says why the verdict is not "same", one reason a line: a side
	// that is not complete, a processor that differs.
	Why        []string        `json:"why"`
	Processors []ProcessorDiff `json:"processors"`
	// Problems are the integrity problems of the recordings of both sides
	// (each names its file), explained or not.
	Problems []store.Problem `json:"problems"`
	// Expected counts the Problems the stitching explains: the unfinished
	// streams of a side's runs but its last (a killed run and its restart).
	Expected int `json:"expectedProblems"`
}

// ProcessorDiff is the comparison of one processor's inputs on both sides.
// The lists hold at most DiffOptions.Limit inputs each, in stream order;
// Counts are exact (Twice and DuplicateOutputs list one ref per side that
// had the input more than once). A plain value, safe to read concurrently.
type ProcessorDiff struct {
	Processor string `json:"processor"`
	// WorkersA and WorkersB count the streams of the processor's workers
	// (core.ParseWorkerStream) merged into it on each side, 0 for a processor
	// recorded as one stream.
	WorkersA int   `json:"workersA,omitempty"`
	WorkersB int   `json:"workersB,omitempty"`
	InputsA  int64 `json:"inputsA"` // inputs (deliveries) read on side A
	InputsB  int64 `json:"inputsB"`
	Common   int64 `json:"common"` // distinct inputs present on both sides
	// OnlyA and OnlyB are inputs present on one side only.
	OnlyA []InputRef `json:"onlyA"`
	OnlyB []InputRef `json:"onlyB"`
	// Different are inputs aligned on both sides whose outputs differ,
	// and changed inputs (Changed: an input of A and one of B at the same
	// place, between the same aligned inputs, whose payloads differ).
	Different []InputDiff `json:"different"`
	// Twice are inputs delivered more than once on one side (a crashed run
	// and its restart: "processed twice, once per run") whose outputs, all
	// deliveries together, equal the other side's. The ref is the second
	// delivery's; Side names the side.
	Twice []InputRef `json:"twice"`
	// DuplicateOutputs are the inputs of Twice whose re-delivery emitted
	// the same outputs again (a processor that does not skip re-deliveries):
	// a sink that does not de-duplicate received them twice.
	DuplicateOutputs []InputRef `json:"duplicateOutputs"`
	// Repeated are inputs processed more often than their side's runs
	// explain: twice within one run, or again in another run when the
	// runs committed it (a source delivers again only what was not
	// committed; without COMMIT rows or positions, only a killed run's
	// inputs are delivered again, by its restart): see Diff. A
	// difference. The ref is the unexplained delivery's; Side names the
	// side.
	Repeated []InputRef `json:"repeated"`
	// EpochChanges are the places where a side's epoch of a feed's key
	// changed part-way (a file replaced or reset: key ""; a Kafka topic
	// deleted and created again: its partitions' keys): inputs after it
	// are aligned as the next epoch segment of that key.
	EpochChanges []string `json:"epochChanges"`
	// Notes are the chunks left unaligned by content (more than
	// maxAlignEdits edits): their inputs are listed only in A and only in B.
	Notes []string `json:"notes"`
	// Cut are inputs whose outputs a side does not hold: every delivery of
	// the input on that side has fewer OUTPUT rows than its n (an orphan
	// the store reports: a crash cut the write of its rows). Their outputs
	// are not compared (a cut says nothing of what the input emitted), and
	// the diff is not complete. The ref is that side's first delivery;
	// Side names the side.
	Cut []InputRef `json:"cut"`
	// Lost lists each side's DROPPED and LOST rows of the processor (at
	// most Limit; Counts.Lost counts them): items it never saw, which take
	// no part in the alignment (an input one side lost and the other
	// handled is only in the other). Not a difference by itself: replay
	// and explain judge the losses.
	Lost   []string   `json:"lost"`
	Counts DiffCounts `json:"counts"`
	// OptionsA and OptionsB are the options the processor's app was built
	// with on each side, as its recordings hold them (store.Meta.AppOptions:
	// of the first of its streams, in run order, that has them); nil when
	// none holds them. Options that differ are no difference by themselves
	// (the outputs are compared), but say why outputs may differ: the
	// text names them.
	OptionsA map[string]string `json:"optionsA,omitempty"`
	OptionsB map[string]string `json:"optionsB,omitempty"`
}

// DiffCounts are the exact sizes of a ProcessorDiff's lists (inputs, not
// refs). A plain value.
type DiffCounts struct {
	OnlyA            int64 `json:"onlyA"`
	OnlyB            int64 `json:"onlyB"`
	Different        int64 `json:"different"`
	Changed          int64 `json:"changed"` // the changed inputs among Different
	Twice            int64 `json:"twice"`
	DuplicateOutputs int64 `json:"duplicateOutputs"`
	Repeated         int64 `json:"repeated"`
	Cut              int64 `json:"cut"`  // inputs whose outputs a side does not hold (Cut)
	Lost             int64 `json:"lost"` // DROPPED and LOST rows, both sides
}

// InputRef names an input of a side. Feed, Key and Offset are its source
// identity when it was delivered with a position; an input without one is
// named by Feed and Seq (Offset 0); a timer by Key "timer", Offset its
// ordinal among the side's timers of the processor (every run's, every
// worker's, in the order read; Stream names a worker's) and Seq its number.
// Run is the 1-based
// position, in its side's list, of the recording that holds it; Seq is that
// run's sequence. A plain value.
type InputRef struct {
	Side   string `json:"side,omitempty"` // "A" or "B", in Twice and DuplicateOutputs
	Feed   string `json:"feed"`
	Key    string `json:"key"`
	Offset int64  `json:"offset"`
	Epoch  int64  `json:"epoch"`
	Seq    int64  `json:"seq"`
	Run    int    `json:"run"`
	// Stream is the worker's stream that holds the delivery, when the
	// processor's workers were merged (ProcessorDiff.WorkersA, WorkersB).
	Stream string `json:"stream,omitempty"`
	Input  string `json:"input"` // the input's payload text
}

// InputDiff is an input whose outputs differ, or a changed input: its
// InputRef is side A's input; B is side B's when it is another input
// (aligned by content at another position, or Changed) or when side B's
// processor is merged from its workers' streams (B.Stream names the
// worker's); Want are side A's
// outputs, Got side B's ("sink: payload", all its deliveries together),
// Diff a readable diff (-want +got) of the decoded outputs ("" when they are
// equal: a changed input with the same outputs). A plain value.
type InputDiff struct {
	InputRef
	B       *InputRef `json:"b,omitempty"`
	Changed bool      `json:"changed"`
	Want    []string  `json:"want"`
	Got     []string  `json:"got"`
	Diff    string    `json:"diff"`
}

// Diff compares two runs, a and b, processor by processor. Each side is one
// recording or several recordings of consecutive runs stitched in order (a
// crashed run and its restarts; every run's missing END but the last's is
// expected).
//
// The streams of a processor's workers (named by core.WorkerStream, read
// by core.ParseWorkerStream: "ledger#w0", "ledger#w1" ...) are one processor
// ("ledger") on their side: within each run their inputs are merged into
// the feed's order (the lowest seq first, each stream's order kept), then
// aligned as one stream's are, so a
// run on one worker and a run of the same input on eight compare input by
// input, timers included (see below). ProcessorDiff
// says how many worker streams were merged on each side (WorkersA,
// WorkersB), and InputRef.Stream which one held an input.
//
// Inputs are aligned first by source identity, (feed, key, offset), where a
// DELIVERY row gives one, otherwise by (feed, seq), the seqs of a later run
// of a side counted on from the last seq of the run before: two inputs at
// the same place align when their payloads agree too. Epochs differ
// between independent runs (a file's), or between clusters (a Kafka
// topic's), so their values take no part in the match. A position is
// meaningful within its epoch: a side whose epoch of a feed's key changes
// part-way (a file replaced or reset, key ""; a Kafka topic deleted and
// created again, whose partitions' offsets start at 0 again) is aligned
// per epoch segment of that key (the k-th epoch of a feed's key on one
// side with the k-th on the other) and the change is listed in
// EpochChanges. A Kafka partition's epoch is its topic's incarnation, the
// same for every restart and rebalance: a crashed-then-restarted or
// rebalanced run aligns with a clean one record by record. A TIMER input
// is identified by what it emitted: the k-th timer of a side whose outputs
// (DiffOptions.Ignore left out) are those aligns with the k-th of the other
// side that emitted the same, whichever worker fired it, whatever its
// number and whenever it fired (timer numbers count per processor
// instance, and a timer fires when its clock says, so neither matches
// across worker counts); the timers left over align in order, each pair
// an input whose outputs differ. FAILED and DROPPED rows take no part.
//
// Where positions disagree (a line of another length shifts every later
// offset; a line inserted or removed), the inputs left over are aligned by
// content, as a text diff aligns lines: per lane (feed, key and epoch
// segment) and per chunk (the inputs between two inputs aligned by
// position), a shortest edit script over the hashes of the inputs'
// payloads (Myers' algorithm, bounded by maxAlignEdits edits per chunk:
// beyond it the chunk stays unaligned and a Note says so). Inputs it
// matches are compared by their outputs like inputs aligned by position;
// between two matches, the k-th removed input of A and the k-th inserted
// input of B are one changed input (listed in Different, Changed); the
// removed and inserted inputs left over are only in A and only in B. A
// line replaced by another is therefore one changed input.
//
// An input delivered more than once on one side is compared by the outputs
// of all its deliveries together: a re-delivery the processor skipped (no
// outputs) agrees, and one that emitted the same outputs again agrees and is
// listed in DuplicateOutputs; either way the input is listed in Twice when
// its runs explain each delivery after the first, and in Repeated (a
// difference) otherwise. A delivery in the run of the one before it is
// never explained. An input with a position (a DELIVERY row) in runs whose
// format has COMMIT rows is delivered again only where it was not
// committed (a COMMIT row of its feed, key and epoch at its position or
// past it covers it): of consecutive runs, a delivery is explained when
// the run of the delivery before it did not commit it (a killed run's
// uncommitted tail, a clean stop whose last commit did not land); of
// concurrent runs (DiffOptions.Concurrent: a group's members, a partition
// moved from one to another by a rebalance or by a member's death), whose
// order in time the recordings do not give, when at most one of the runs
// that delivered it committed it (the one that took it last: a member
// that committed it before the partition moved moved the group's commit
// past it, and no later owner reads it again). A duplicate a COMMIT
// covered in the run before (consecutive), or in two of the runs
// (concurrent), is Repeated. An input without a position, a timer, or a
// run without COMMIT rows (versions 2 and 1) falls back to what the runs'
// ends say: a delivery is explained when the run before it was killed (its
// stream of the processor unfinished). Outputs are compared after
// decoding with the codec, leaving out the keys of DiffOptions.Ignore.
//
// Memory: Diff reads each side as a stream, processor by processor, and
// holds for the processor being compared one index entry per distinct
// input of both sides (its identity, its deliveries and 64-bit hashes of
// its payload and outputs) and, while it aligns them, each side's inputs
// in stream order: a fixed cost an input, whatever the payloads' sizes
// (the figure measured is in docs/PERFORMANCE.md, "The memory of Diff"),
// plus, for the content alignment of one chunk, 8 bytes an input of the
// chunk and Myers' trace (at most 16 MB, see maxAlignEdits), and the
// inputs it lists (at most Limit per list, with their outputs). It does
// not grow with the number of processors or with the size of outputs. It
// reads each side twice when it lists inputs (once to index, once to fetch
// the listed inputs' payloads and outputs).
//
// The error is for I/O problems and a cancelled ctx; a nil ctx, or a side
// without a recording, is ErrUsage; a side whose recordings cannot be
// consecutive runs (store.CheckRuns: a run given twice, a copy of one, runs
// out of order) wraps store.ErrRuns.
func Diff(ctx context.Context, a, b []store.Reader, opts DiffOptions) (*DiffReport, error) {
	if err := checkSides(ctx, a, b); err != nil {
		return nil, err
	}
	d := newDiffer(ctx, opts)
	for si, side := range [][]store.Reader{a, b} {
		c, err := d.commits("AB"[si:si+1], side)
		if err != nil {
			return nil, err
		}
		d.committed[si] = c
	}
	rep := &DiffReport{Complete: true, Why: []string{}, Processors: []ProcessorDiff{}, Problems: []store.Problem{}}
	for si, side := range [][]store.Reader{a, b} {
		rep.addSide("AB"[si:si+1], side)
	}
	differs := false
	for _, l := range logicals([2][]store.Reader{a, b}) {
		pd, err := d.processor(l, a, b)
		if err != nil {
			return nil, err
		}
		differs = rep.addProcessor(pd) || differs
	}
	switch {
	case !rep.Complete:
		rep.Verdict = DiffNotComplete
	case differs:
		rep.Verdict = DiffDifferent
	default:
		rep.Verdict = DiffSame
	}
	rep.Same = rep.Verdict == DiffSame
	return rep, nil
}

// checkSides refuses what Diff cannot compare, side A first: a nil ctx, a
// side without a recording or with a nil one (ErrUsage), and a side whose
// recordings cannot be consecutive runs (store.CheckRuns, wrapped).
func checkSides(ctx context.Context, a, b []store.Reader) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrUsage)
	}
	if len(a) == 0 || len(b) == 0 {
		return fmt.Errorf("%w: diff needs at least one recording on each side", ErrUsage)
	}
	for i, side := range [][]store.Reader{a, b} {
		if slices.Contains(side, nil) {
			return fmt.Errorf("%w: nil reader", ErrUsage)
		}
		if err := store.CheckRuns(side); err != nil {
			return fmt.Errorf("replayer: diff: side %s: %w", "AB"[i:i+1], err)
		}
	}
	return nil
}

// newDiffer is a Diff call of opts, its defaults applied.
func newDiffer(ctx context.Context, opts DiffOptions) *differ {
	d := &differ{ctx: ctx, codec: opts.Codec, limit: opts.Limit, seed: maphash.MakeSeed(), concurrent: opts.Concurrent}
	if d.codec == nil {
		d.codec = recorder.JSON
	}
	if d.limit == 0 {
		d.limit = DefaultDiffLimit
	}
	if len(opts.Ignore) > 0 {
		d.ignore = map[string]bool{}
		for _, k := range opts.Ignore {
			d.ignore[k] = true
		}
	}
	return d
}

// addSide adds the integrity problems of side name's recordings (its runs,
// in order) to rep.Problems, counts those the stitching explains (a killed
// run's tail: store.CrashTail, every run but the last) in rep.Expected,
// and makes rep not complete, saying why, when the others are not none or
// the side holds no processor stream.
func (rep *DiffReport) addSide(name string, side []store.Reader) {
	kinds := map[store.ProblemKind]int{}
	unexplained, lastUnfinished, streams := 0, false, 0
	for ri, r := range side {
		problems := r.Problems()
		var tail []store.Problem
		if ri < len(side)-1 {
			// A killed run, restarted by the next: its stream has no
			// END, and a CSV recording may end in half a line and,
			// before it, the first rows of the input whose write it
			// cut (the input was not committed, so the restart
			// delivers it again).
			tail = store.CrashTail(r, problems)
		}
		for _, pb := range problems {
			rep.Problems = append(rep.Problems, pb)
			if slices.Contains(tail, pb) {
				rep.Expected++
				continue
			}
			unexplained++
			kinds[pb.Kind]++
			lastUnfinished = lastUnfinished || pb.Kind == store.ProblemUnfinished
		}
		streams += len(r.Processors())
	}
	if unexplained > 0 {
		rep.Complete = false
		var ks []string
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			ks = append(ks, fmt.Sprintf("%d %s", kinds[k], k))
		}
		why := fmt.Sprintf("side %s is not complete: %s that the stitching of its runs does not explain (%s)",
			name, plural(int64(unexplained), "integrity problem"), strings.Join(ks, ", "))
		if lastUnfinished {
			why += "; its last run did not stop cleanly: stitch the run that restarted it after it"
		}
		rep.Why = append(rep.Why, why)
	}
	if streams == 0 {
		rep.Complete = false
		rep.Why = append(rep.Why, fmt.Sprintf("side %s is not complete: it holds no processor stream", name))
	}
}

// addProcessor appends pd to rep.Processors, says in rep.Why whether it
// differs and whether a side cut its outputs (then rep is not complete),
// and reports whether it differs.
func (rep *DiffReport) addProcessor(pd *ProcessorDiff) (differs bool) {
	if c := pd.Counts; c.OnlyA+c.OnlyB+c.Different+c.Repeated > 0 {
		differs = true
		rep.Why = append(rep.Why, fmt.Sprintf("processor %s differs: %s", pd.title(), differences(c)))
	}
	if pd.Counts.Cut > 0 {
		rep.Complete = false
		rep.Why = append(rep.Why, fmt.Sprintf("processor %s: %s whose OUTPUT rows a side's recording cut short (fewer than the input's n): outputs not known, not compared",
			pd.title(), plural(pd.Counts.Cut, "input")))
	}
	rep.Processors = append(rep.Processors, *pd)
	return differs
}

// title is the processor's quoted name and, when workers were merged, how
// many on each side: `"ledger" (8 workers in B)`.
func (p *ProcessorDiff) title() string {
	if w := workersText(p.WorkersA, p.WorkersB); w != "" {
		return fmt.Sprintf("%q (%s)", p.Processor, w)
	}
	return fmt.Sprintf("%q", p.Processor)
}

// differences says which of c's counts of differences are not zero.
func differences(c DiffCounts) string {
	different := fmt.Sprintf("%d different", c.Different)
	if c.Changed > 0 {
		different = fmt.Sprintf("%d different (%s)", c.Different, plural(c.Changed, "changed input"))
	}
	var parts []string
	for _, x := range []struct {
		n    int64
		text string
	}{
		{c.OnlyA, fmt.Sprintf("%d only in A", c.OnlyA)}, {c.OnlyB, fmt.Sprintf("%d only in B", c.OnlyB)},
		{c.Different, different}, {c.Repeated, fmt.Sprintf("%d processed more often than its runs explain", c.Repeated)},
	} {
		if x.n > 0 {
			parts = append(parts, x.text)
		}
	}
	return strings.Join(parts, ", ")
}
