package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// DefaultBuckets is the number of buckets a timeline has at most when
// Options.Buckets is 0.
const DefaultBuckets = 120

// ErrUsage: Build was called with arguments it cannot work with (no run, a
// nil reader, replay reports that do not match the runs).
var ErrUsage = errors.New("report: bad usage")

// Run is one recording of the runs a report shows: a crashed run, or one of
// its restarts, in the order they ran.
// Build reads Reader; the caller closes it. A plain value.
type Run struct {
	// Name is how the page names the recording (its path as given).
	Name   string
	Reader store.Reader
}

// Options are what Build shows besides the recordings.
// A plain value.
type Options struct {
	// Title heads the page; "" gives "blackbox report".
	Title string
	// Replays, when not nil, holds one replay report per run (in the
	// order of the runs; replayer.Replay of each): their divergences are
	// marked on the timelines and listed.
	Replays []*replayer.Report
	// Buckets is the number of buckets a timeline has at most, whatever
	// the recording's length; 0 means DefaultBuckets.
	Buckets int
	// Findings are the answers of incident.Explain over the same runs,
	// shown at the top of the page; nil leaves them out.
	Findings *incident.Findings
	// Progress, when not nil, is called every 65,536 rows read with the
	// run's number and the rows read of it so far, on Build's goroutine.
	Progress func(run int, rows int64)
}

// progressEvery is how many rows Build reads between two Progress calls.
const progressEvery = 1 << 16

// Report is what the page shows, built by Build: a plain value, safe to
// read from several goroutines once returned.
type Report struct {
	Title     string
	Runs      []RunSummary
	Timelines []Timeline
	// Replayed: Options.Replays was given; Divergences lists the first
	// divergence of every processor of every run.
	Replayed    bool
	Divergences []Divergence
	// Findings are Options.Findings.
	Findings *incident.Findings
}

// RunSummary is one run's table: its streams' counts and its integrity
// problems.
// A plain value, part of a Report.
type RunSummary struct {
	Number   int // from 1, in the order of the runs
	Name     string
	Format   string // the META format ("blackbox-recording/2")
	Created  string // the META creation instant, "-" when it has none
	Streams  []StreamSummary
	Problems []store.Problem
	// Kinds counts the run's rows per kind, as the Findings count them
	// (the kinds of store.Kinds with rows, in its order); nil without
	// Findings.
	Kinds []KindCount
	// Controls are the run's operator actions (its CONTROL rows, as the
	// Findings read them), each as a person reads it; nil without
	// Findings or without any.
	Controls []string
}

// KindCount is the number of rows of one kind.
// A plain value.
type KindCount struct {
	Kind store.Kind
	N    int64
}

// StreamSummary counts one processor stream's rows in one run.
// A plain value.
type StreamSummary struct {
	Processor   string
	App         string
	Inputs      int64 // INDEXED, INLINE and TIMER rows
	Outputs     int64
	Commits     int64 // COMMIT rows
	Dropped     int64 // items lost, the sum of the DROPPED rows' counts
	DroppedRows int64
	Lost        int64  // LOST rows: input the feed's source lost (never published)
	Failed      int64  // FAILED rows
	First, Last string // the first and last instants, "-" when none
	Ended       bool   // the stream has its END row: the run stopped cleanly
	Killed      string // its END says an operator killed the run, and why (store.End); "" for a stop
}

// Crashed reports whether the stream has no END: the run did not stop
// cleanly (a kill, a crash).
func (s StreamSummary) Crashed() bool { return !s.Ended }

// Timeline is one processor stream across the runs: its inputs, counted
// one after the other through the runs, are cut into buckets of Per inputs
// each (at most Options.Buckets of them, however long the recordings are);
// each bucket counts what happened while its inputs were handled.
// A plain value, part of a Report.
type Timeline struct {
	Processor string
	App       string
	Inputs    int64 // the stream's inputs in all runs
	Per       int64 // inputs per bucket (a power of two)
	Buckets   []Bucket
	Spans     []Span
	Marks     []Mark
}

// Bucket counts the rows of Per consecutive inputs of a timeline: the
// inputs, their outputs, the commits written after them, the items dropped,
// the source's losses (LOST rows) and the failures before the next input (a
// completion's FAILED row counts at its input). A plain value.
type Bucket struct {
	Inputs, Outputs, Commits, Dropped, Lost, Failed int64
}

// Span is the part of a timeline one run holds: its inputs From (counted
// from 0 through the runs) up to To, not included.
// A plain value.
type Span struct {
	Run      int
	From, To int64
	Ended    bool
}

// The kinds of Mark.
const (
	MarkCrash      = "crash"      // a run's stream ended without END: the process died after input At-1
	MarkRestart    = "restart"    // a run after the first starts, at input At
	MarkDivergence = "divergence" // the replay of input At gave other outputs than the recorded ones
)

// Mark is one event a timeline marks at an input: a crash, a restart, a
// divergence.
// A plain value.
type Mark struct {
	Kind  string
	Run   int
	At    int64
	Title string
}

// Divergence is the first divergence of one processor in the replay of
// one run.
// A plain value.
type Divergence struct {
	Run int
	replayer.Divergence
}

// Build reads every run once, in order (each recording streamed: memory
// does not grow with the recordings' length), and returns what the page
// shows. A run that cannot be read through (an I/O error) holds an
// unreadable problem; Build fails only on bad usage or a cancelled ctx.
func Build(ctx context.Context, runs []Run, opts Options) (*Report, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("%w: no run", ErrUsage)
	}
	if opts.Replays != nil && len(opts.Replays) != len(runs) {
		return nil, fmt.Errorf("%w: %d replay reports for %d runs", ErrUsage, len(opts.Replays), len(runs))
	}
	nb := opts.Buckets
	if nb == 0 {
		nb = DefaultBuckets
	}
	if nb < 2 {
		return nil, fmt.Errorf("%w: %d buckets (want 2 or more)", ErrUsage, nb)
	}
	if f := opts.Findings; f != nil && len(f.Runs) != len(runs) {
		return nil, fmt.Errorf("%w: findings of %d runs for %d runs", ErrUsage, len(f.Runs), len(runs))
	}
	rep := &Report{Title: opts.Title, Replayed: opts.Replays != nil, Findings: opts.Findings}
	if rep.Title == "" {
		rep.Title = "blackbox report"
	}
	b := &builder{buckets: nb, lines: map[string]*line{}, progress: opts.Progress}
	for i, r := range runs {
		if r.Reader == nil {
			return nil, fmt.Errorf("%w: run %d (%s) has no reader", ErrUsage, i+1, r.Name)
		}
		var div map[string]*replayer.Divergence
		if opts.Replays != nil {
			div = divergences(opts.Replays[i])
			for _, p := range opts.Replays[i].Processors {
				if p.First != nil {
					rep.Divergences = append(rep.Divergences, Divergence{Run: i + 1, Divergence: *p.First})
				}
			}
		}
		rs, err := b.run(ctx, i+1, r, div)
		if err != nil {
			return nil, err
		}
		if f := opts.Findings; f != nil {
			for _, k := range store.Kinds {
				if n := f.Runs[i].Counts[string(k)]; n > 0 {
					rs.Kinds = append(rs.Kinds, KindCount{Kind: k, N: n})
				}
			}
			for _, c := range f.Runs[i].Controls {
				rs.Controls = append(rs.Controls, store.Control{Feed: c.Feed, Group: c.Group, Action: c.Action, Who: c.Who,
					Reason: c.Reason, At: c.At, Before: c.Before, After: c.After, Until: c.Until}.String())
			}
		}
		rep.Runs = append(rep.Runs, rs)
	}
	for _, name := range b.order {
		rep.Timelines = append(rep.Timelines, b.lines[name].finish())
	}
	return rep, nil
}

// divergences maps each processor of a replay report to its first
// divergence.
func divergences(r *replayer.Report) map[string]*replayer.Divergence {
	m := map[string]*replayer.Divergence{}
	if r == nil {
		return m
	}
	for _, p := range r.Processors {
		if p.First != nil {
			m[p.Processor] = p.First
		}
	}
	return m
}

// builder reads the runs one after the other; it is used by one goroutine.
type builder struct {
	buckets  int
	progress func(run int, rows int64)
	order    []string // stream names, in the order first met
	lines    map[string]*line
}

// line is one stream's timeline while the runs are read.
type line struct {
	t   Timeline
	max int // buckets at most
}

// at returns the bucket of input number pos, doubling Per (merging the
// buckets two by two) until it fits.
func (l *line) at(pos int64) *Bucket {
	for pos >= int64(l.max)*l.t.Per {
		merged := make([]Bucket, 0, l.max)
		for i := 0; i < len(l.t.Buckets); i += 2 {
			m := l.t.Buckets[i]
			if i+1 < len(l.t.Buckets) {
				n := l.t.Buckets[i+1]
				m.Inputs += n.Inputs
				m.Outputs += n.Outputs
				m.Commits += n.Commits
				m.Dropped += n.Dropped
				m.Lost += n.Lost
				m.Failed += n.Failed
			}
			merged = append(merged, m)
		}
		l.t.Buckets = merged
		l.t.Per *= 2
	}
	i := int(pos / l.t.Per)
	for len(l.t.Buckets) <= i {
		l.t.Buckets = append(l.t.Buckets, Bucket{})
	}
	return &l.t.Buckets[i]
}

func (l *line) finish() Timeline {
	slices.SortStableFunc(l.t.Marks, func(a, b Mark) int { return cmp.Compare(a.At, b.At) })
	if len(l.t.Buckets) == 0 {
		l.t.Buckets = []Bucket{{}}
	}
	return l.t
}

// stream is one stream's state while one run is read.
type stream struct {
	l           *line
	feeds       []string // the feeds of its inputs in this run
	lastIn      bool     // the row before was an input or its OUTPUT
	lastSource  string   // that input's feed and seq
	lastSeq     int64
	run         int
	sum         StreamSummary
	from        int64
	div         *replayer.Divergence
	first, last time.Time
}

func (b *builder) line(name, app string) *line {
	l := b.lines[name]
	if l == nil {
		l = &line{t: Timeline{Processor: name, App: app, Per: 1}, max: b.buckets}
		b.lines[name] = l
		b.order = append(b.order, name)
	}
	if l.t.App == "" {
		l.t.App = app
	}
	return l
}

// run reads one run's rows, once, into its summary and the timelines.
func (b *builder) run(ctx context.Context, n int, r Run, div map[string]*replayer.Divergence) (RunSummary, error) {
	meta := r.Reader.Meta()
	rs := RunSummary{Number: n, Name: r.Name, Format: meta.Format, Created: instant(meta.Created)}
	streams := map[string]*stream{}
	rs.Streams = make([]StreamSummary, 0, len(r.Reader.Processors()))
	open := func(name string) *stream {
		if s := streams[name]; s != nil {
			return s
		}
		l := b.line(name, meta.Apps[name])
		rs.Streams = append(rs.Streams, StreamSummary{Processor: name})
		s := &stream{l: l, run: n, from: l.t.Inputs, div: div[name], sum: StreamSummary{Processor: name, App: l.t.App}}
		streams[name] = s
		return s
	}
	// The recording is read with Scan, every row (the COMMIT rows, which
	// belong to no stream, too), which checks it in the same pass:
	// Processors and Problems are asked after it, so it is read once.
	rows := r.Reader.Scan()
	var (
		readErr error
		seen    int64
		last    *stream
	)
	for e, err := range rows {
		if seen++; seen%progressEvery == 0 {
			if ctx.Err() != nil {
				return rs, ctx.Err()
			}
			if b.progress != nil {
				b.progress(n, seen)
			}
		}
		if err != nil {
			var p *store.Problem
			if !errors.As(err, &p) {
				readErr = err // an I/O error ends the iteration
			}
			continue // a problem row: among Problems
		}
		if e.Processor == "" {
			if e.Kind == store.KindCommit {
				for _, s := range streams {
					s.commit(e.Source)
				}
			}
			continue // META, JOURNAL
		}
		if last == nil || last.l.t.Processor != e.Processor {
			last = open(e.Processor)
		}
		last.row(e)
	}
	// The streams in the order they start, those with no row too.
	procs := r.Reader.Processors()
	for _, name := range procs {
		open(name)
	}
	slices.SortStableFunc(rs.Streams, func(a, b StreamSummary) int {
		return cmp.Compare(orderOf(procs, a.Processor), orderOf(procs, b.Processor))
	})
	for i := range rs.Streams {
		s := streams[rs.Streams[i].Processor]
		s.sum.First, s.sum.Last = instant(s.first), instant(s.last)
		rs.Streams[i] = s.sum
		sp := Span{Run: n, From: s.from, To: s.l.t.Inputs, Ended: s.sum.Ended}
		if len(s.l.t.Spans) > 0 {
			s.l.t.Marks = append(s.l.t.Marks, Mark{Kind: MarkRestart, Run: n, At: sp.From,
				Title: fmt.Sprintf("run %d (%s) starts at input %d", n, r.Name, sp.From+1)})
		}
		s.l.t.Spans = append(s.l.t.Spans, sp)
		if !sp.Ended {
			s.l.t.Marks = append(s.l.t.Marks, Mark{Kind: MarkCrash, Run: n, At: sp.To,
				Title: fmt.Sprintf("run %d (%s) ended without END after %d inputs: it did not stop cleanly", n, r.Name, sp.To-sp.From)})
		}
	}
	rs.Problems = r.Reader.Problems()
	if readErr != nil {
		rs.Problems = append(slices.Clip(rs.Problems), store.Unreadable(r.Name, readErr)...)
	}
	return rs, nil
}

// row counts one row of the stream.
func (s *stream) row(e store.Entry) {
	sum, l := &s.sum, s.l
	pos := l.t.Inputs // the next input's number
	switch {
	case e.Kind.IsInput():
		s.lastIn, s.lastSource, s.lastSeq = true, e.Source, e.Seq
		if e.Source != "" && !slices.Contains(s.feeds, e.Source) {
			s.feeds = append(s.feeds, e.Source)
		}
		sum.Inputs++
		l.at(pos).Inputs++
		l.t.Inputs++
		if s.div != nil && e.Index == s.div.Index {
			l.t.Marks = append(l.t.Marks, Mark{Kind: MarkDivergence, Run: s.run, At: pos,
				Title: fmt.Sprintf("replay diverged at input %d (index %d, %s): %s", pos+1, e.Index, s.div.Kind, s.div.Input)})
		}
	case e.Kind == store.KindOutput:
		sum.Outputs++
		l.at(max(pos-1, 0)).Outputs++
	case e.Kind == store.KindDropped:
		sum.Dropped += e.N
		sum.DroppedRows++
		l.at(pos).Dropped += e.N
	case e.Kind == store.KindLost:
		sum.Lost++
		l.at(pos).Lost++
	case e.Kind == store.KindFailed:
		// A completion's failure names the input before it; another
		// FAILED row stands for an item that never became an input.
		at := pos
		if s.lastIn && e.Source != "" && e.Source == s.lastSource && e.Seq == s.lastSeq {
			at = max(pos-1, 0)
		}
		sum.Failed++
		l.at(at).Failed++
	case e.Kind == store.KindEnd:
		sum.Ended = true
		if end, err := store.EndOf(e); err == nil { // else Problems lists it
			sum.Killed = end.Killed
		}
	}
	if !e.Kind.IsInput() && e.Kind != store.KindOutput {
		s.lastIn = false
	}
	if t := e.Instant; !t.IsZero() {
		if s.first.IsZero() || t.Before(s.first) {
			s.first = t
		}
		if t.After(s.last) {
			s.last = t
		}
	}
}

// orderOf is the place of name in procs, len(procs) when it is not there.
func orderOf(procs []string, name string) int {
	if i := slices.Index(procs, name); i >= 0 {
		return i
	}
	return len(procs)
}

// commit counts a COMMIT row of feed on the stream when the stream has
// inputs of that feed in the run: at the input the stream is at.
func (s *stream) commit(feed string) {
	if !slices.Contains(s.feeds, feed) {
		return
	}
	s.sum.Commits++
	s.l.at(max(s.l.t.Inputs-1, 0)).Commits++
}

func instant(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return store.FormatInstant(t)
}
