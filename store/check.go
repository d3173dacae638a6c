package store

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// DefaultProblemLimit is the number of Problems a Checker keeps when its
// Limit is 0. Past it, problems are counted and summarised by one last
// Problem, so a garbage file of a million lines does not cost a million
// Problems of memory.
const DefaultProblemLimit = 10000

// pendingLimit bounds the INDEXED rows a Checker remembers one by one while
// their JOURNAL row has not been seen yet. Past it, further unresolved
// references are kept as intervals of seqs per feed.
const pendingLimit = 4096

// Checker checks the integrity rules of docs/FORMAT.md over a recording fed
// row by row, in storage order. Every backend runs the same Checker when it
// opens a recording, so every backend reports the same Problems for the same
// logical rows; only Line differs (CSV physical line, SQLite rowid, Memory
// position).
//
// Its memory grows with the number of processors, of feeds, of gaps in a
// feed's journal seqs and of problems (up to Limit), never with the number
// of rows.
//
// Choices where the rules are silent:
//   - a first row that is not META is malformed (the row is then checked as
//     usual); so is a later META row, a META, JOURNAL or COMMIT row with a
//     processor, a COMMIT row in a recording of a version without them
//     and a row of another kind without one;
//   - a row after its stream's END is an orphan;
//   - a second START in a stream is malformed;
//   - an END whose n is not the number of the stream's INDEXED, INLINE and
//     TIMER rows is a gap (not judged in a stream with a malformed row,
//     whose inputs cannot all be counted);
//   - the first row, when it is META, is decoded (DecodeMeta): a META that
//     does not decode is malformed; one that does lists the streams the
//     recording must hold (Meta.ExpectedStreams), and a listed stream with
//     no row or a stream with rows that is not listed is a missing-stream
//     problem; a recording of no processor stream at all is one, whatever
//     its META;
//   - a stream whose first row is not START is one gap problem (it covers
//     the indexes missing before that row);
//   - a malformed row whose processor and index could be read keeps its
//     index (no gap is reported for it) and hides the structure around it:
//     a pending DELIVERY and the OUTPUT rows that follow it are not judged,
//     since the malformed row may have been their input. A row whose index
//     could not be read leaves a gap.
//
// Two rules say what the rows prove, beyond their structure (Coverage):
//   - missing-input: a COMMIT row of a feed claims that every item of the
//     feed up to its seq was handled, and a handled item's rows are written
//     before it counts as dispatched; so every processor that takes the
//     feed (its own stream and its workers' streams together: a stream
//     with an input, DROPPED, FAILED or LOST row of the feed) holds, for
//     every seq up to the last COMMIT row's, an input, DROPPED or FAILED
//     row. In a recording that ended (every stream has END, no torn line)
//     the same holds up to the highest seq of the feed any input or
//     JOURNAL row holds: a clean stop handled what it published, but for
//     the seqs the processor's END rows say it left unprocessed (its
//     drain ran out of time: Unprocessed) and no COMMIT row covers. Each run
//     of seqs without a row is one problem, naming the processor, the feed
//     and the seqs, at the last COMMIT row (or the last END row). A
//     processor with a row that cannot be read (malformed) is not judged:
//     that row may have been the one;
//   - failed: a FAILED row (an attempt of an input, a completion or a
//     timer that failed) ends what its stream proves: the processor's
//     state past it is not in the recording (the failed attempt's effects,
//     a retry that succeeded), so a replay stops there. The first FAILED
//     row of each stream is one problem.
//
// A Checker is not safe for concurrent use. The zero value is ready to use.
type Checker struct {
	// File is copied into every Problem.
	File string
	// Limit is the number of Problems kept; 0 means DefaultProblemLimit.
	Limit int

	rows     int64
	global   stream // META, JOURNAL and COMMIT rows: Processor ""
	streams  map[string]*stream
	order    []string
	journal  map[string]*intervals // feed -> seqs of JOURNAL rows seen
	pending  map[journalKey][]rowRef
	npending int
	overflow map[string]*intervals // feed -> seqs referenced, unresolved, past pendingLimit

	meta     *rowRef  // the first row, when it is a META row that decodes
	format   string   // its format ("" before it: every kind is allowed)
	expect   []string // the streams META lists (Meta.ExpectedStreams)
	problems []Problem
	dropped  int
	dropKind ProblemKind

	controls []Control // the CONTROL rows that decode, in order

	cov     coverage
	torn    bool   // a torn last line: the recording did not end cleanly
	lastEnd rowRef // the last END row: what a clean end is cited by
}

type journalKey struct {
	feed string
	seq  int64
}

// rowRef locates a row in a Problem.
type rowRef struct {
	processor string
	index     int64
	kind      Kind
	line      int64
}

type stream struct {
	name   string
	next   int64 // next expected index; 0 before the first row
	ended  bool
	failed bool // a FAILED row was met: the stream proves nothing past it

	// The coverage of the feed of the stream's last input (most streams
	// read one feed): the seqs its processor handled, the feed's cover.
	covFeed string
	covSeqs *intervals
	cover   *feedCover
	unknown bool // a malformed row hides the structure until the next input
	damaged bool // a row of the stream is malformed: its inputs cannot all be counted
	inputs  int64
	first   rowRef
	last    rowRef

	delivery    bool // a DELIVERY waits for its input
	dref        rowRef
	dsource     string
	dseq        int64
	input       bool // an input takes OUTPUT rows
	iref        rowRef
	ineed, ihad int64 // the input's n; the highest k seen
}

// Processors lists the processors seen so far, in the order their streams
// start.
func (c *Checker) Processors() []string {
	return slices.Clone(c.order)
}

// Controls returns the CONTROL rows added so far that decode
// (ControlOf), in order: the operator's actions.
func (c *Checker) Controls() []Control {
	return slices.Clone(c.controls)
}

func (c *Checker) report(p Problem) {
	limit := c.Limit
	if limit <= 0 {
		limit = DefaultProblemLimit
	}
	if len(c.problems) >= limit {
		if c.dropped == 0 {
			c.dropKind = p.Kind
		}
		c.dropped++
		return
	}
	p.File = c.File
	c.problems = append(c.problems, p)
}

func (c *Checker) problem(kind ProblemKind, r rowRef, format string, args ...any) {
	c.report(Problem{Kind: kind, Processor: r.processor, Index: r.index, Row: r.kind, Line: r.line,
		Detail: fmt.Sprintf(format, args...)})
}

func (c *Checker) stream(name string) *stream {
	if c.streams == nil {
		c.streams = make(map[string]*stream)
	}
	s := c.streams[name]
	if s == nil {
		s = &stream{name: name}
		c.streams[name] = s
		c.order = append(c.order, name)
	}
	return s
}

// Report records a row the backend could not read: a malformed row (its
// Processor and Index set when they could be read, Index 0 otherwise) or a
// torn last line. Line must be set.
func (c *Checker) Report(p Problem) {
	if p.Kind != ProblemTorn {
		c.rows++
	} else {
		c.torn = true
	}
	c.unreadable(p)
}

func (c *Checker) unreadable(p Problem) {
	c.report(p)
	if p.Kind == ProblemTorn || p.Index <= 0 {
		return
	}
	ref := rowRef{processor: p.Processor, index: p.Index, kind: p.Row, line: p.Line}
	if p.Processor == "" {
		c.index(&c.global, ref)
		return
	}
	s := c.stream(p.Processor)
	if s.next == 0 {
		s.next, s.first = 1, ref
	}
	c.index(s, ref)
	s.damaged = true
	if s.ended {
		return
	}
	s.last = ref
	s.delivery, s.input, s.unknown = false, false, true
}

// Add checks the next row, found at line (CSV physical line, SQLite rowid,
// Memory position).
func (c *Checker) Add(e Entry, line int64) {
	first := c.rows == 0
	c.rows++
	ref := rowRef{processor: e.Processor, index: e.Index, kind: e.Kind, line: line}
	if !e.Kind.Valid() {
		c.unreadable(Problem{Kind: ProblemMalformed, Processor: e.Processor, Index: e.Index, Line: line,
			Detail: fmt.Sprintf("unknown kind %q", e.Kind)})
		return
	}
	if first && e.Kind != KindMeta {
		c.problem(ProblemMalformed, ref, "first row is %s, want META", e.Kind)
	}
	if e.Processor == "" {
		c.addGlobal(e, ref, first)
		return
	}
	if e.Kind.IsGlobal() {
		c.unreadable(Problem{Kind: ProblemMalformed, Processor: e.Processor, Index: e.Index, Row: e.Kind, Line: line,
			Detail: fmt.Sprintf("%s row with processor %q, want none", e.Kind, e.Processor)})
		return
	}
	if (e.Kind == KindLost || e.Kind == KindCompleted) && !e.Kind.In(c.format) { // the stream kinds not of every version
		c.unreadable(Problem{Kind: ProblemMalformed, Processor: e.Processor, Index: e.Index, Row: e.Kind, Line: line,
			Detail: fmt.Sprintf("%s row in a %s recording, which has none", e.Kind, c.format)})
		return
	}
	s := c.stream(e.Processor)
	if s.next == 0 {
		s.next, s.first = 1, ref
		if e.Kind != KindStart {
			missing := ""
			if e.Index > 1 {
				missing = fmt.Sprintf(" (indexes 1-%d missing)", e.Index-1)
			}
			c.problem(ProblemGap, ref, "stream has no START: it begins with %s at index %d%s", e.Kind, e.Index, missing)
			s.next = max(e.Index+1, 1)
		} else {
			c.index(s, ref)
		}
	} else {
		c.index(s, ref)
	}
	if s.ended {
		c.problem(ProblemOrphan, ref, "%s row after the stream's END (index %d)", e.Kind, s.last.index)
		return
	}
	prev := s.last
	s.last = ref
	c.cover(s, e, ref)
	if s.unknown && e.Kind == KindOutput {
		return
	}
	s.unknown = false

	switch e.Kind {
	case KindOutput:
		c.flushDelivery(s, ref)
		c.output(s, e, ref)
		return
	case KindIndexed, KindInline:
		c.closeInput(s)
		if s.delivery {
			if s.dsource != e.Source || s.dseq != e.Seq {
				c.problem(ProblemOrphan, s.dref, "DELIVERY of feed %q seq %d is followed by %s of feed %q seq %d",
					s.dsource, s.dseq, e.Kind, e.Source, e.Seq)
			}
			s.delivery = false
		}
		c.openInput(s, e, ref)
		s.inputs++
		if e.Kind == KindIndexed {
			c.reference(e, ref)
		}
		return
	}
	c.closeInput(s)
	c.flushDelivery(s, ref)
	switch e.Kind {
	case KindStart:
		if prev.line != 0 || prev.index != 0 {
			c.problem(ProblemMalformed, ref, "START in the middle of the stream (after index %d)", prev.index)
		}
	case KindDelivery:
		s.delivery, s.dref, s.dsource, s.dseq = true, ref, e.Source, e.Seq
	case KindTimer:
		c.openInput(s, e, ref)
		s.inputs++
	case KindEnd:
		s.ended = true
		c.lastEnd = ref
		c.endDetail(s, e, ref)
		if e.N != s.inputs && !s.damaged {
			c.problem(ProblemGap, ref, "END counts %d inputs, the stream holds %d (INDEXED, INLINE and TIMER rows)", e.N, s.inputs)
		}
	}
}

func (c *Checker) addGlobal(e Entry, ref rowRef, first bool) {
	switch e.Kind {
	case KindMeta:
		c.index(&c.global, ref)
		if !first {
			c.problem(ProblemMalformed, ref, "META row after the first row")
			return
		}
		m, err := DecodeMeta(e)
		if err != nil {
			c.problem(ProblemMalformed, ref, "%v", err)
			return
		}
		c.meta, c.expect, c.format = &ref, m.ExpectedStreams(), m.Format
	case KindJournal:
		c.index(&c.global, ref)
		c.journalRow(e.Source, e.Seq)
		f := c.cov.feed(e.Source)
		f.published = max(f.published, e.Seq)
	case KindCommit:
		c.index(&c.global, ref)
		if !e.Kind.In(c.format) {
			c.problem(ProblemMalformed, ref, "COMMIT row in a %s recording, which has none", c.format)
			return
		}
		f := c.cov.feed(e.Source)
		if e.Seq >= f.commit {
			f.commit, f.commitRef = e.Seq, ref
		}
	case KindState:
		c.index(&c.global, ref)
		if !e.Kind.In(c.format) {
			c.problem(ProblemMalformed, ref, "STATE row in a %s recording, which has none", c.format)
			return
		}
		if _, err := StateOf(e); err != nil {
			c.problem(ProblemMalformed, ref, "%v", err)
		}
	case KindControl:
		c.index(&c.global, ref)
		if !e.Kind.In(c.format) {
			c.problem(ProblemMalformed, ref, "CONTROL row in a %s recording, which has none", c.format)
			return
		}
		ct, err := ControlOf(e)
		if err != nil {
			c.problem(ProblemMalformed, ref, "%v", err)
			return
		}
		c.controls = append(c.controls, ct)
	default:
		c.problem(ProblemMalformed, ref, "%s row with no processor", e.Kind)
	}
}

// index checks that ref.index is the next index of s.
func (c *Checker) index(s *stream, ref rowRef) {
	if s.next == 0 {
		s.next = 1
	}
	switch want := s.next; {
	case ref.index == want:
	case ref.index > want:
		gap := rowRef{processor: ref.processor, index: want, line: ref.line}
		if ref.index == want+1 {
			c.problem(ProblemGap, gap, "index %d missing before %s index %d", want, kindName(ref.kind), ref.index)
		} else {
			c.problem(ProblemGap, gap, "indexes %d-%d missing before %s index %d", want, ref.index-1, kindName(ref.kind), ref.index)
		}
	default:
		c.problem(ProblemGap, ref, "index %d repeated or out of order: want %d", ref.index, want)
	}
	s.next = max(s.next, ref.index+1)
}

func kindName(k Kind) string {
	if k == "" {
		return "row"
	}
	return string(k)
}

func (c *Checker) openInput(s *stream, e Entry, ref rowRef) {
	s.input, s.iref, s.ineed, s.ihad = true, ref, e.N, 0
}

func (c *Checker) closeInput(s *stream) {
	if !s.input {
		return
	}
	s.input = false
	if s.ihad < s.ineed {
		if s.ihad+1 == s.ineed {
			c.problem(ProblemOrphan, s.iref, "has %d of its %d OUTPUT rows: k=%d missing", s.ihad, s.ineed, s.ineed)
		} else {
			c.problem(ProblemOrphan, s.iref, "has %d of its %d OUTPUT rows: k=%d..%d missing", s.ihad, s.ineed, s.ihad+1, s.ineed)
		}
	}
}

func (c *Checker) flushDelivery(s *stream, next rowRef) {
	if !s.delivery {
		return
	}
	s.delivery = false
	if next.line == 0 && next.index == 0 {
		c.problem(ProblemOrphan, s.dref, "DELIVERY is the stream's last row: no input follows")
		return
	}
	c.problem(ProblemOrphan, s.dref, "DELIVERY is not followed by its input: next row is %s index %d", next.kind, next.index)
}

func (c *Checker) output(s *stream, e Entry, ref rowRef) {
	if !s.input {
		c.problem(ProblemOrphan, ref, "OUTPUT k=%d with no preceding input", e.Seq)
		return
	}
	in := s.iref
	switch k := e.Seq; {
	case k == s.ihad+1 && k <= s.ineed:
		s.ihad = k
	case k > s.ineed || k < 1:
		c.problem(ProblemOrphan, ref, "OUTPUT k=%d beyond the %d outputs of %s index %d", k, s.ineed, in.kind, in.index)
	case k > s.ihad+1:
		c.problem(ProblemOrphan, ref, "OUTPUT k=%d follows k=%d of %s index %d: k=%d..%d missing", k, s.ihad, in.kind, in.index, s.ihad+1, k-1)
		s.ihad = k
	default:
		c.problem(ProblemOrphan, ref, "OUTPUT k=%d repeated after k=%d of %s index %d", k, s.ihad, in.kind, in.index)
	}
}

func (c *Checker) journalRow(feed string, seq int64) {
	if c.journal == nil {
		c.journal = make(map[string]*intervals)
	}
	iv := c.journal[feed]
	if iv == nil {
		iv = &intervals{}
		c.journal[feed] = iv
	}
	iv.add(seq)
	if c.npending > 0 {
		k := journalKey{feed, seq}
		if refs, ok := c.pending[k]; ok {
			c.npending -= len(refs)
			delete(c.pending, k)
		}
	}
}

func (c *Checker) reference(e Entry, ref rowRef) {
	if iv := c.journal[e.Source]; iv != nil && iv.contains(e.Seq) {
		return
	}
	if c.npending < pendingLimit {
		if c.pending == nil {
			c.pending = make(map[journalKey][]rowRef)
		}
		k := journalKey{e.Source, e.Seq}
		c.pending[k] = append(c.pending[k], ref)
		c.npending++
		return
	}
	if c.overflow == nil {
		c.overflow = make(map[string]*intervals)
	}
	iv := c.overflow[e.Source]
	if iv == nil {
		iv = &intervals{}
		c.overflow[e.Source] = iv
	}
	iv.add(e.Seq)
}

// Finish ends the check and returns every problem found, ordered by line
// (problems with no line last). The Checker must not be used afterwards.
func (c *Checker) Finish() []Problem {
	for _, name := range c.order {
		s := c.streams[name]
		c.closeInput(s)
		c.flushDelivery(s, rowRef{})
		if !s.ended {
			c.problem(ProblemUnfinished, s.last, "stream has no END: its last row is %s index %d", kindName(s.last.kind), s.last.index)
		}
	}
	if c.rows == 0 {
		c.report(Problem{Kind: ProblemMalformed, Detail: "no rows: a recording begins with a META row"})
	}
	c.missingStreams()
	c.uncovered()
	// INDEXED rows whose journal row never came.
	type missing struct {
		k    journalKey
		refs []rowRef
	}
	var ms []missing
	for k, refs := range c.pending {
		ms = append(ms, missing{k, refs})
	}
	slices.SortFunc(ms, func(a, b missing) int { return cmp.Compare(a.refs[0].line, b.refs[0].line) })
	for _, m := range ms {
		for _, r := range m.refs {
			c.problem(ProblemMissingJournal, r, "no JOURNAL row for feed %q seq %d", m.k.feed, m.k.seq)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(c.overflow)) {
		for _, r := range c.overflow[f].minus(c.journal[f]) {
			c.report(Problem{Kind: ProblemMissingJournal, Row: KindIndexed, Detail: fmt.Sprintf(
				"no JOURNAL rows for feed %q seq %d-%d (the INDEXED rows naming them are not listed: more than %d unresolved references)",
				f, r.lo, r.hi, pendingLimit)})
		}
	}
	slices.SortStableFunc(c.problems, func(a, b Problem) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Line, b.Line)
	})
	if c.dropped > 0 {
		c.problems = append(c.problems, Problem{Kind: c.dropKind, File: c.File,
			Detail: fmt.Sprintf("%d more problems not listed", c.dropped)})
	}
	return c.problems
}

// missingStreams reports the streams META lists that hold no row, the
// streams that hold rows META does not list, and a recording of no stream at
// all (whatever its META says: a recording of nothing is never complete).
func (c *Checker) missingStreams() {
	at := rowRef{kind: KindMeta}
	if c.meta != nil {
		at = *c.meta
	}
	if len(c.order) == 0 {
		c.problem(ProblemMissingStream, at, "the recording holds no processor stream")
	}
	if c.meta == nil {
		return // no META to list the streams: the first row's problem says so
	}
	listed := make(map[string]bool, len(c.expect))
	for _, name := range c.expect {
		listed[name] = true
		if c.streams[name] == nil {
			ref := at
			ref.processor, ref.index = name, 0
			c.problem(ProblemMissingStream, ref, "META lists stream %q, the recording holds no row of it", name)
		}
	}
	for _, name := range c.order {
		if !listed[name] {
			c.problem(ProblemMissingStream, c.streams[name].first, "stream %q has rows, META does not list it", name)
		}
	}
}

const maxInt64 = 1<<63 - 1
