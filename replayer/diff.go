package replayer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"iter"
	"maps"
	"math"
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
	// explain: twice within one run, or again in a run after one that
	// stopped cleanly (only a killed run's inputs are delivered again, by
	// its restart). A difference. The ref is the unexplained delivery's;
	// Side names the side.
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
// ordinal among the side's timers (among its worker's, for a worker's
// timer: Stream names the worker) and Seq its number. Run is the 1-based
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
// input. Each worker's timers are its own (they align with the timers of
// the same worker's stream on the other side, by ordinal). ProcessorDiff
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
// rebalanced run aligns with a clean one record by record. TIMER inputs are aligned by their ordinal among the side's
// timers. FAILED and DROPPED rows take no part.
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
// each delivery is in another run of the side, each run but the last of
// them killed (its stream of the processor unfinished), and in Repeated (a
// difference) otherwise: twice in one run, or again after a run that
// stopped cleanly. Outputs are compared after decoding with the codec,
// leaving out the keys of DiffOptions.Ignore.
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
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrUsage)
	}
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("%w: diff needs at least one recording on each side", ErrUsage)
	}
	for i, side := range [][]store.Reader{a, b} {
		if slices.Contains(side, nil) {
			return nil, fmt.Errorf("%w: nil reader", ErrUsage)
		}
		if err := store.CheckRuns(side); err != nil {
			return nil, fmt.Errorf("replayer: diff: side %s: %w", "AB"[i:i+1], err)
		}
	}
	d := &differ{ctx: ctx, codec: opts.Codec, limit: opts.Limit, seed: maphash.MakeSeed()}
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
	rep := &DiffReport{Complete: true, Why: []string{}, Processors: []ProcessorDiff{}, Problems: []store.Problem{}}
	for si, side := range [][]store.Reader{a, b} {
		name := "AB"[si : si+1]
		kinds := map[store.ProblemKind]int{}
		unexplained, lastUnfinished, streams := 0, false, 0
		for ri, r := range side {
			if r == nil {
				return nil, fmt.Errorf("%w: nil reader", ErrUsage)
			}
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
	differs := false
	for _, l := range logicals([2][]store.Reader{a, b}) {
		pd, err := d.processor(l, a, b)
		if err != nil {
			return nil, err
		}
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

// differ is one Diff call. It is used by one goroutine.
type differ struct {
	ctx    context.Context
	codec  recorder.Codec
	ignore map[string]bool
	limit  int
	seed   maphash.Seed
	canon  bytes.Buffer
	names  []string // interned feed and key names
	ids    map[string]uint32
	// unreadable numbers the inputs whose payload could not be read.
	unreadable int64
	rows       int64 // rows read, for the checks of ctx
	// lost, when set, is told of each DROPPED and LOST row deliveries
	// reads (the first walk of a processor's side), in run lostRun.
	lost    func(run int, e *store.Entry)
	lostRun int
}

// ikey is an input's identity on its side: 24 bytes, names interned.
type ikey struct {
	feed   uint32 // differ.names index
	key    uint32 // differ.names index
	seg    int32  // epoch segment of the feed on its side (0, 1, ...)
	pos    bool   // positioned: offset is a source offset; else a seq
	timer  bool
	offset int64
}

// intern returns the index of name in d.names.
func (d *differ) intern(name string) uint32 {
	if i, ok := d.ids[name]; ok {
		return i
	}
	if d.ids == nil {
		d.ids = map[string]uint32{}
	}
	i := uint32(len(d.names))
	d.names = append(d.names, name)
	d.ids[name] = i
	return i
}

// sideAgg is what one side did with an input: its deliveries and hashes of
// its payload and their outputs.
type sideAgg struct {
	n, nonEmpty int32
	run, rerun  int32  // runs of the first and second delivery
	last        int32  // run of the last delivery
	reprun      int32  // run of the first delivery its runs do not explain
	repnth      int32  // that delivery's number (0: the first)
	in          uint64 // hash of the first delivery's input payload
	first       uint64 // hash of the first delivery with outputs
	concat      uint64 // hash of every delivery's outputs, in order
	cut         int32  // deliveries whose outputs were cut (delivery.cut)
	ord         int64  // the side's ordinal of the input's first delivery
	seq, epoch  int64  // the first delivery's
	reseq       int64  // the second delivery's
	repseq      int64  // the repeated delivery's (reprun)
	mixed       bool   // deliveries with outputs differ
}

// hashInit starts a combination of hashes with mix.
const hashInit = 0

// mixSeed seeds mix; like the differ's seed, it lives for the process
// only: no combined hash is stored.
var mixSeed = maphash.MakeSeed()

// mix combines the hash h of a sequence with the hash x of its next
// element (order matters).
func mix(h, x uint64) uint64 { return maphash.Comparable(mixSeed, [2]uint64{h, x}) }

func (s *sideAgg) effective() uint64 {
	switch {
	case s.nonEmpty == 0:
		return 0
	case s.mixed:
		return s.concat
	}
	return s.first
}

type agg struct{ a, b sideAgg }

// delivery is one input read from a side's stream, with its outputs.
type delivery struct {
	key     ikey
	run     int
	stream  string // the stream that holds it
	seq     int64
	epoch   int64
	kind    store.Kind
	src     string
	n       int64  // the OUTPUT rows its input row says it has
	cut     bool   // fewer OUTPUT rows than n: its outputs are not known
	payload []byte // an INLINE input's payload
	outs    []output
	del     store.Entry // the DELIVERY row before the input, when hasDel
	hasDel  bool
}

// deliveries reads stream s of r in order and yields each input with its
// outputs, or the error that ends the reading. The delivery yielded is
// reused: it is valid until the next is asked for.
func (d *differ) deliveries(r store.Reader, s string) iter.Seq2[*delivery, error] {
	return func(yield func(*delivery, error) bool) {
		var cur delivery
		open := false
		var del store.Entry
		hasDel := false
		flush := func() bool {
			if !open {
				return true
			}
			open = false
			cur.cut = int64(len(cur.outs)) < cur.n
			return yield(&cur, nil)
		}
		for e, err := range r.Stream(s) {
			if d.rows++; d.rows%ctxEvery == 0 {
				if err := d.ctx.Err(); err != nil {
					yield(nil, err)
					return
				}
			}
			if err != nil {
				var pb *store.Problem
				if errors.As(err, &pb) {
					if !flush() {
						return
					}
					hasDel = false
					continue // an unreadable row: listed in Problems
				}
				yield(nil, err)
				return
			}
			if e.Kind == store.KindOutput {
				if open {
					cur.outs = appendOutput(cur.outs, e.Source, e.Payload)
				}
				continue
			}
			if !flush() {
				return
			}
			if (e.Kind == store.KindDropped || e.Kind == store.KindLost) && d.lost != nil {
				d.lost(d.lostRun, &e)
			}
			switch e.Kind {
			case store.KindDelivery:
				del, hasDel = e, true
				continue
			case store.KindIndexed, store.KindInline, store.KindTimer:
				cur = delivery{seq: e.Seq, kind: e.Kind, src: e.Source, n: e.N, outs: cur.outs[:0], payload: append(cur.payload[:0], e.Payload...)}
				if e.Kind != store.KindTimer && hasDel && del.Source == e.Source && del.Seq == e.Seq {
					cur.del, cur.hasDel = del, true
				}
				open = true
			}
			hasDel = false
		}
		flush()
	}
}

// merged reads the streams ss of one run and calls f for each input, with
// the index in ss of its stream. One stream is read in its order. Several
// (a processor's own stream and its workers') are merged into the order
// of the feed: each stream's inputs stay in their order, and of the inputs
// at the heads of the streams a timer goes first, then the lowest seq (the
// feed's sequence, which a processor's inputs follow on every worker),
// then the first stream's.
func (d *differ) merged(r store.Reader, ss []string, f func(dl *delivery, stream int)) error {
	if len(ss) == 1 {
		for dl, err := range d.deliveries(r, ss[0]) {
			if err != nil {
				return fmt.Errorf("stream %q: %w", ss[0], err)
			}
			f(dl, 0)
		}
		return nil
	}
	type head struct {
		next func() (*delivery, error, bool)
		dl   *delivery // nil: the stream is read to its end
	}
	hs := make([]head, len(ss))
	advance := func(i int) error {
		dl, err, ok := hs[i].next()
		if err != nil {
			return fmt.Errorf("stream %q: %w", ss[i], err)
		}
		hs[i].dl = nil
		if ok {
			hs[i].dl = dl
		}
		return nil
	}
	for i, s := range ss {
		next, stop := iter.Pull2(d.deliveries(r, s))
		defer stop()
		hs[i].next = next
		if err := advance(i); err != nil {
			return err
		}
	}
	for {
		best := -1
		for i := range hs {
			dl := hs[i].dl
			if dl == nil {
				continue
			}
			if dl.kind == store.KindTimer {
				best = i
				break
			}
			if best < 0 || dl.seq < hs[best].dl.seq {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		f(hs[best].dl, best)
		if err := advance(best); err != nil {
			return err
		}
	}
}

// walk reads a side's streams of processor p in order (streams[r] are run
// r's, merged: see merged) and calls f for each input with its outputs.
// epochs receives each epoch change.
func (d *differ) walk(side string, rs []store.Reader, p string, streams [][]string, f func(*delivery), epochs func(string)) error {
	type feedState struct {
		epoch  int64
		seg    int32
		seen   bool
		base   int64 // seq base of unpositioned inputs in this run
		maxSeq int64
	}
	feeds := map[string]*feedState{}
	fs := func(name string) *feedState {
		s := feeds[name]
		if s == nil {
			s = &feedState{}
			feeds[name] = s
		}
		return s
	}
	timers := map[string]int64{} // per stream of a worker; "" the processor's own
	for run, r := range rs {
		for _, s := range feeds {
			s.base += s.maxSeq
			s.maxSeq = 0
		}
		if len(streams[run]) == 0 {
			continue
		}
		d.lostRun = run + 1
		err := d.merged(r, streams[run], func(dl *delivery, si int) {
			dl.run, dl.stream = run+1, streams[run][si]
			switch {
			case dl.kind == store.KindTimer:
				lane := ""
				if dl.stream != p {
					lane = dl.stream // a worker's timers are its own
				}
				timers[lane]++
				dl.key = ikey{feed: d.intern(lane), key: d.intern("timer"), timer: true, offset: timers[lane]}
			case dl.hasDel:
				// A position space is an epoch of a feed's key: a file's
				// epoch changes with a new file or a reset, a Kafka
				// partition's (key "topic/partition") with a topic
				// created again. Segments are counted per key: the
				// partitions of a topic interleave.
				st := fs(dl.src + "\x00" + dl.del.Key)
				if st.seen && st.epoch != dl.del.Epoch {
					st.seg++
					what := fmt.Sprintf("feed %q", dl.src)
					if dl.del.Key != "" {
						what += fmt.Sprintf(" key %q", dl.del.Key)
					}
					epochs(fmt.Sprintf("side %s run %d: %s epoch %d -> %d at seq %d (offset %d): later inputs are epoch segment %d",
						side, run+1, what, st.epoch, dl.del.Epoch, dl.seq, dl.del.Offset, st.seg+1))
				}
				st.seen, st.epoch = true, dl.del.Epoch
				dl.epoch = dl.del.Epoch
				dl.key = ikey{feed: d.intern(dl.src), key: d.intern(dl.del.Key), seg: st.seg, pos: true, offset: dl.del.Offset}
			default:
				st := fs(dl.src)
				st.maxSeq = max(st.maxSeq, dl.seq)
				dl.key = ikey{feed: d.intern(dl.src), key: d.intern(""), offset: st.base + dl.seq}
			}
			f(dl)
		})
		if err != nil {
			if cerr := d.ctx.Err(); cerr != nil && errors.Is(err, cerr) {
				return fmt.Errorf("replayer: diff: %w", cerr)
			}
			return fmt.Errorf("replayer: diff: reading processor %q of side %s run %d: %w", p, side, run+1, err)
		}
	}
	return nil
}

// hashOutput hashes an output after decoding and canonical re-encoding.
func (d *differ) hashOutput(o output) uint64 {
	var mh maphash.Hash
	mh.SetSeed(d.seed)
	mh.WriteString(o.sink)
	mh.WriteByte(0)
	v, err := d.codec.Decode(o.payload)
	if err != nil {
		mh.WriteByte(1)
		mh.Write(o.payload)
		return mh.Sum64()
	}
	d.canon.Reset()
	enc := json.NewEncoder(&d.canon)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(strip(v, d.ignore)); err != nil {
		mh.WriteByte(2)
		fmt.Fprintf(&mh, "%#v", v)
		return mh.Sum64()
	}
	mh.Write(d.canon.Bytes())
	return mh.Sum64()
}

// add counts a delivery whose input payload hashes to in and whose outputs
// hash to h (xs: each output's hash). killed[r] says whether run r+1 of the
// side was killed (may be delivered again by the next run). A cut delivery
// (its outputs not known) counts as a delivery, not its outputs.
func (s *sideAgg) add(dl *delivery, in, h uint64, xs []uint64, ord int64, killed []bool) {
	s.n++
	switch s.n {
	case 1:
		s.ord, s.run, s.seq, s.epoch, s.in = ord, int32(dl.run), dl.seq, dl.epoch, in
		s.concat = hashInit
	case 2:
		s.rerun, s.reseq = int32(dl.run), dl.seq
	}
	if s.n > 1 && s.reprun == 0 && (s.last == int32(dl.run) || !killed[s.last-1]) {
		s.reprun, s.repseq, s.repnth = int32(dl.run), dl.seq, s.n-1
	}
	s.last = int32(dl.run)
	if dl.cut {
		s.cut++
		return
	}
	if len(xs) == 0 {
		return
	}
	s.nonEmpty++
	if s.nonEmpty == 1 {
		s.first = h
	} else if h != s.first {
		s.mixed = true
	}
	for _, x := range xs {
		s.concat = mix(s.concat, x)
	}
}

// unknown reports whether the side's outputs of the input are not known:
// every delivery of it was cut.
func (s *sideAgg) unknown() bool { return s.n > 0 && s.cut == s.n }

// sideKey is an input of one side: its identity and what the side did with
// it (g nil: no input).
type sideKey struct {
	k ikey
	g *sideAgg
}

// aligned is an input of A aligned with one of B; a.g or b.g is nil for an
// input only on the other side. changed: a changed input, the payloads
// differ.
type aligned struct {
	a, b    sideKey
	changed bool
}

// leftover is an input not aligned by position, in its side's stream order.
type leftover struct {
	sideKey
	chunk int32 // how many inputs of its lane before it were aligned by position
}

// lane is k without its place: inputs of one lane may align by content.
func lane(k ikey) ikey {
	k.offset = 0
	return k
}

// inputHash hashes an input's payload: the row's, or its journal row's for
// an INDEXED input. Timers all hash alike (they align by ordinal); an input
// whose payload cannot be read hashes like no other.
func (d *differ) inputHash(r store.Reader, dl *delivery) uint64 {
	var mh maphash.Hash
	mh.SetSeed(d.seed)
	switch dl.kind {
	case store.KindTimer:
		mh.WriteString("timer")
	case store.KindIndexed:
		j, err := r.Journal(dl.src, dl.seq)
		if err != nil {
			d.unreadable++
			fmt.Fprintf(&mh, "unreadable %d", d.unreadable)
			break
		}
		mh.WriteByte(0)
		mh.Write(j.Payload)
	default:
		mh.WriteByte(0)
		mh.Write(dl.payload)
	}
	return mh.Sum64()
}

func (d *differ) processor(l *logical, a, b []store.Reader) (*ProcessorDiff, error) {
	p := l.name
	pd := &ProcessorDiff{Processor: p, WorkersA: l.workers[0], WorkersB: l.workers[1], OnlyA: []InputRef{}, OnlyB: []InputRef{}, Different: []InputDiff{},
		Twice: []InputRef{}, DuplicateOutputs: []InputRef{}, Repeated: []InputRef{}, Cut: []InputRef{}, EpochChanges: []string{}, Notes: []string{},
		Lost: []string{}}
	idx := map[ikey]*agg{}
	epochs := func(s string) { pd.EpochChanges = append(pd.EpochChanges, s) }
	pick := func(g *agg, side int) *sideAgg {
		if side == 0 {
			return &g.a
		}
		return &g.b
	}
	var xs []uint64
	for si, side := range []struct {
		rs []store.Reader
		n  *int64
	}{{a, &pd.InputsA}, {b, &pd.InputsB}} {
		killed := make([]bool, len(side.rs)) // the runs whose stream of p (of a worker of p) is unfinished
		for r, rd := range side.rs {
			for _, pb := range rd.Problems() {
				if pb.Kind == store.ProblemUnfinished && (pb.Processor == "" || slices.Contains(l.streams[si][r], pb.Processor)) {
					killed[r] = true
				}
			}
		}
		d.lost = func(run int, e *store.Entry) {
			pd.Counts.Lost++
			if d.limit < 0 || len(pd.Lost) < d.limit {
				pd.Lost = append(pd.Lost, lostText("AB"[si:si+1], run, e))
			}
		}
		err := d.walk("AB"[si:si+1], side.rs, p, l.streams[si], func(dl *delivery) {
			*side.n++
			g := idx[dl.key]
			if g == nil {
				g = &agg{}
				idx[dl.key] = g
			}
			xs = xs[:0]
			h := uint64(hashInit)
			for _, o := range dl.outs {
				x := d.hashOutput(o)
				xs = append(xs, x)
				h = mix(h, x)
			}
			pick(g, si).add(dl, d.inputHash(side.rs[dl.run-1], dl), h, xs, *side.n, killed)
		}, epochs)
		d.lost = nil
		if err != nil {
			return nil, err
		}
	}

	// Align by position: the inputs at the same place on both sides with
	// the same payload. Walk each side in stream order to collect, per
	// lane, the inputs left over and the chunk each lies in.
	byPosition := func(g *agg) bool { return g.a.n > 0 && g.b.n > 0 && g.a.in == g.b.in }
	lanes := map[ikey]*[2][]leftover{}
	for si := range 2 {
		type ordKey struct {
			ord int64
			k   ikey
		}
		var order []ordKey
		for k, g := range idx {
			if s := pick(g, si); s.n > 0 {
				order = append(order, ordKey{s.ord, k})
			}
		}
		slices.SortFunc(order, func(x, y ordKey) int { return cmp.Compare(x.ord, y.ord) })
		chunks := map[ikey]int32{}
		for _, o := range order {
			g, l := idx[o.k], lane(o.k)
			if byPosition(g) {
				chunks[l]++
				continue
			}
			ls := lanes[l]
			if ls == nil {
				ls = &[2][]leftover{}
				lanes[l] = ls
			}
			ls[si] = append(ls[si], leftover{sideKey{o.k, pick(g, si)}, chunks[l]})
		}
	}

	// Classify, then list in stream order.
	type item struct {
		al   aligned
		ord  int64
		side int // the side of ord
	}
	var onlyA, onlyB, diff, twice, dup, repeated, cut []item
	classify := func(al aligned) {
		it := item{al: al}
		if al.a.g != nil {
			it.ord = al.a.g.ord
		} else {
			it.ord, it.side = al.b.g.ord, 1
		}
		rep := (al.a.g != nil && al.a.g.reprun != 0) || (al.b.g != nil && al.b.g.reprun != 0)
		if rep {
			repeated = append(repeated, it)
		}
		switch {
		case al.b.g == nil:
			onlyA = append(onlyA, it)
		case al.a.g == nil:
			onlyB = append(onlyB, it)
		case al.changed:
			diff = append(diff, it)
		default:
			ga, gb := al.a.g, al.b.g
			pd.Common++
			switch {
			case ga.unknown() || gb.unknown():
				if ga.unknown() {
					cut = append(cut, it)
				}
				if gb.unknown() {
					cut = append(cut, item{al: al, ord: gb.ord, side: 1})
				}
			case ga.effective() != gb.effective():
				diff = append(diff, it)
			case rep:
			default:
				if ga.n > 1 || gb.n > 1 {
					twice = append(twice, it)
				}
				if (ga.nonEmpty > 1 && !ga.mixed) || (gb.nonEmpty > 1 && !gb.mixed) {
					dup = append(dup, it)
				}
			}
		}
	}
	for k, g := range idx {
		if byPosition(g) {
			classify(aligned{a: sideKey{k, &g.a}, b: sideKey{k, &g.b}})
		}
	}
	for l, ls := range lanes {
		alignByContent(ls[0], ls[1], classify, func(na, nb int) {
			what := fmt.Sprintf("feed %q", d.names[l.feed])
			if l.timer {
				what = "timers"
			}
			pd.Notes = append(pd.Notes, fmt.Sprintf("%s: %d inputs of A and %d of B between the same inputs aligned by position need more than %d edits to align by content: they are listed only in A and only in B",
				what, na, nb, maxAlignEdits))
		})
	}
	slices.Sort(pd.Notes)
	var changed int64
	for _, it := range diff {
		if it.al.changed {
			changed++
		}
	}
	pd.Counts = DiffCounts{OnlyA: int64(len(onlyA)), OnlyB: int64(len(onlyB)), Different: int64(len(diff)), Changed: changed,
		Twice: int64(len(twice)), DuplicateOutputs: int64(len(dup)), Repeated: int64(len(repeated)), Cut: int64(len(cut))}
	limit := func(items []item) []item {
		slices.SortFunc(items, func(x, y item) int { return cmp.Or(cmp.Compare(x.ord, y.ord), cmp.Compare(x.side, y.side)) })
		if d.limit > 0 && len(items) > d.limit {
			items = items[:d.limit]
		}
		return items
	}
	onlyA, onlyB, diff, twice, dup, repeated, cut = limit(onlyA), limit(onlyB), limit(diff), limit(twice), limit(dup), limit(repeated), limit(cut)
	if len(onlyA)+len(onlyB)+len(diff)+len(twice)+len(dup)+len(repeated)+len(cut) == 0 {
		return pd, nil
	}

	// Second pass: the listed inputs' payloads and outputs.
	type detail struct {
		input    string
		inputSet bool
		outs     [][]output // each delivery's outputs
		streams  []string   // each delivery's stream
	}
	want := [2]map[ikey]*detail{{}, {}}
	for _, list := range [][]item{onlyA, onlyB, diff, twice, dup, repeated, cut} {
		for _, it := range list {
			for si, sk := range [2]sideKey{it.al.a, it.al.b} {
				if sk.g != nil {
					want[si][sk.k] = &detail{}
				}
			}
		}
	}
	for si, rs := range [][]store.Reader{a, b} {
		err := d.walk("AB"[si:si+1], rs, p, l.streams[si], func(dl *delivery) {
			dt := want[si][dl.key]
			if dt == nil {
				return
			}
			if !dt.inputSet {
				dt.inputSet = true
				dt.input = d.inputText(rs[dl.run-1], dl)
			}
			outs := make([]output, len(dl.outs))
			for i, o := range dl.outs {
				outs[i] = output{sink: o.sink, payload: bytes.Clone(o.payload)}
			}
			dt.outs = append(dt.outs, outs)
			dt.streams = append(dt.streams, dl.stream)
		}, func(string) {})
		if err != nil {
			return nil, err
		}
	}
	// ref names the input sk of side si by its delivery number nth (0:
	// the first).
	ref := func(si int, sk sideKey, nth int) InputRef {
		s := sk.g
		r := InputRef{Feed: d.names[sk.k.feed], Key: d.names[sk.k.key], Offset: sk.k.offset, Epoch: s.epoch, Seq: s.seq, Run: int(s.run)}
		if !sk.k.pos && !sk.k.timer {
			r.Offset = 0
		}
		if sk.k.timer {
			r.Feed = ""
		}
		if dt := want[si][sk.k]; dt != nil {
			r.Input = dt.input
			if nth < len(dt.streams) && dt.streams[nth] != p {
				r.Stream = dt.streams[nth]
			}
		}
		return r
	}
	// again are the refs of the delivery that came again on each side that
	// had one: the second (Twice, DuplicateOutputs) or the first repeated
	// without a kill to explain it (Repeated).
	again := func(it item, list *[]InputRef, ok func(*sideAgg) bool, run func(*sideAgg) (int32, int64, int32)) {
		for si, sk := range [2]sideKey{it.al.a, it.al.b} {
			if sk.g == nil || !ok(sk.g) {
				continue
			}
			rr, rs, nth := run(sk.g)
			r := ref(si, sk, int(nth))
			r.Side, r.Run, r.Seq = "AB"[si:si+1], int(rr), rs
			*list = append(*list, r)
		}
	}
	second := func(s *sideAgg) (int32, int64, int32) { return s.rerun, s.reseq, 1 }
	for _, it := range onlyA {
		pd.OnlyA = append(pd.OnlyA, ref(0, it.al.a, 0))
	}
	for _, it := range onlyB {
		pd.OnlyB = append(pd.OnlyB, ref(1, it.al.b, 0))
	}
	for _, it := range cut {
		sk := [2]sideKey{it.al.a, it.al.b}[it.side]
		r := ref(it.side, sk, 0)
		r.Side = "AB"[it.side : it.side+1]
		pd.Cut = append(pd.Cut, r)
	}
	for _, it := range twice {
		again(it, &pd.Twice, func(s *sideAgg) bool { return s.n > 1 }, second)
	}
	for _, it := range dup {
		again(it, &pd.DuplicateOutputs, func(s *sideAgg) bool { return s.nonEmpty > 1 && !s.mixed }, second)
	}
	for _, it := range repeated {
		again(it, &pd.Repeated, func(s *sideAgg) bool { return s.reprun != 0 },
			func(s *sideAgg) (int32, int64, int32) { return s.reprun, s.repseq, s.repnth })
	}
	for _, it := range diff {
		ga, gb := it.al.a, it.al.b
		w, g := effectiveOutputs(want[0][ga.k].outs, ga.g.mixed), effectiveOutputs(want[1][gb.k].outs, gb.g.mixed)
		id := InputDiff{InputRef: ref(0, ga, 0), Changed: it.al.changed, Want: texts(w), Got: texts(g)}
		if rb := ref(1, gb, 0); it.al.changed || ga.k != gb.k || rb.Stream != "" {
			id.B = &rb // another input, or the worker that had it
		}
		id.Diff = diffOutputs(decodeAll(d.codec, w, d.ignore), decodeAll(d.codec, g, d.ignore))
		if id.Diff == "" && !id.Changed {
			id.Diff = "equal once decoded (the outputs hash differently: a codec that does not decode to comparable values?)"
		}
		pd.Different = append(pd.Different, id)
	}
	return pd, nil
}

// alignByContent aligns the inputs of one lane that positions did not
// align, la of A and lb of B in stream order, chunk by chunk: see Diff. It
// calls emit for each input (or pair), and note for a chunk left unaligned.
func alignByContent(la, lb []leftover, emit func(aligned), note func(na, nb int)) {
	for i, j := 0, 0; i < len(la) || j < len(lb); {
		c := int32(math.MaxInt32)
		if i < len(la) {
			c = la[i].chunk
		}
		if j < len(lb) {
			c = min(c, lb[j].chunk)
		}
		i2, j2 := i, j
		for i2 < len(la) && la[i2].chunk == c {
			i2++
		}
		for j2 < len(lb) && lb[j2].chunk == c {
			j2++
		}
		alignChunk(la[i:i2], lb[j:j2], emit, note)
		i, j = i2, j2
	}
}

// alignChunk aligns one chunk's inputs by their payloads' hashes: matches
// are aligned inputs, and between two matches the k-th removed input of A
// and the k-th inserted input of B are a changed input.
func alignChunk(la, lb []leftover, emit func(aligned), note func(na, nb int)) {
	var matches [][2]int
	if len(la) > 0 && len(lb) > 0 {
		ha, hb := make([]uint64, len(la)), make([]uint64, len(lb))
		for i := range la {
			ha[i] = la[i].g.in
		}
		for j := range lb {
			hb[j] = lb[j].g.in
		}
		var ok bool
		if matches, ok = lcsMatches(ha, hb, maxAlignEdits); !ok {
			note(len(la), len(lb))
			for _, x := range la {
				emit(aligned{a: x.sideKey})
			}
			for _, x := range lb {
				emit(aligned{b: x.sideKey})
			}
			return
		}
	}
	i, j := 0, 0
	for _, m := range append(matches, [2]int{len(la), len(lb)}) {
		removed, inserted := la[i:m[0]], lb[j:m[1]]
		n := min(len(removed), len(inserted))
		for k := range n {
			emit(aligned{a: removed[k].sideKey, b: inserted[k].sideKey, changed: true})
		}
		for _, x := range removed[n:] {
			emit(aligned{a: x.sideKey})
		}
		for _, x := range inserted[n:] {
			emit(aligned{b: x.sideKey})
		}
		if m[0] < len(la) {
			emit(aligned{a: la[m[0]].sideKey, b: lb[m[1]].sideKey})
		}
		i, j = m[0]+1, m[1]+1
	}
}

// effectiveOutputs are a side's outputs of an input: those of its first
// delivery with outputs, or of every delivery in order when they differ.
func effectiveOutputs(ds [][]output, mixed bool) []output {
	var out []output
	for _, o := range ds {
		if len(o) == 0 {
			continue
		}
		if !mixed {
			return o
		}
		out = append(out, o...)
	}
	return out
}

// inputText is the payload text of an input: the row's, or its journal
// row's for an INDEXED input; "timer N" for a timer.
func (d *differ) inputText(r store.Reader, dl *delivery) string {
	switch dl.kind {
	case store.KindTimer:
		return fmt.Sprintf("timer %d", dl.seq)
	case store.KindIndexed:
		j, err := r.Journal(dl.src, dl.seq)
		if err != nil {
			return fmt.Sprintf("(journal row of feed %q seq %d: %v)", dl.src, dl.seq, err)
		}
		return string(j.Payload)
	}
	return string(dl.payload)
}

// lostText is a DROPPED or LOST row of a side's run for a person: "side A
// run 1 ledger:5 LOST oversized: 1 item of feed ...".
func lostText(side string, run int, e *store.Entry) string {
	at := fmt.Sprintf("side %s run %d %s:%d %s", side, run, e.Processor, e.Index, e.Kind)
	if e.Kind == store.KindLost {
		return at + " " + store.LostOf(*e).String()
	}
	return fmt.Sprintf("%s: %s of feed %q from seq %d: %s", at, plural(e.N, "item"), e.Source, e.Seq, e.Detail)
}
