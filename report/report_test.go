package report_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/report"
	"github.com/blackbox-audit/blackbox/store"
)

// recording is a recording under construction: processor p's stream,
// inputs of feed "orders" (storetest.Input) counted from 1.
type recording struct {
	rows    []store.Entry
	index   int64 // p's last index
	global  int64 // the last META/JOURNAL/COMMIT index
	inputs  int64
	offsets int64
}

func newRecording() *recording {
	r := &recording{index: 1, global: 1}
	r.rows = []store.Entry{store.EncodeMeta(store.Meta{Created: storetest.T0, Apps: map[string]string{"p": "ledger"}, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart, Instant: storetest.T0}}
	return r
}

// input appends n inputs, each with its one output.
func (r *recording) input(n int) *recording {
	for range n {
		r.inputs++
		rows := storetest.Input("p", r.inputs)
		for i := range rows {
			r.index++
			rows[i].Index = r.index
		}
		r.rows = append(r.rows, rows...)
	}
	return r
}

func (r *recording) add(e store.Entry) *recording {
	if e.Kind.IsGlobal() {
		r.global++
		e.Index = r.global
	} else {
		r.index++
		e.Processor, e.Index = "p", r.index
	}
	r.rows = append(r.rows, e)
	return r
}

func (r *recording) end() *recording {
	return r.add(store.Entry{Kind: store.KindEnd, N: r.inputs, Instant: storetest.T0})
}

func (r *recording) reader(t *testing.T) store.Reader {
	t.Helper()
	m, err := store.OpenMemory(r.rows...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func build(t *testing.T, opts report.Options, recs ...*recording) *report.Report {
	t.Helper()
	var runs []report.Run
	for i, r := range recs {
		runs = append(runs, report.Run{Name: fmt.Sprintf("run-%d.csv", i+1), Reader: r.reader(t)})
	}
	rep, err := report.Build(context.Background(), runs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func page(t *testing.T, rep *report.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestALongStreamIsCutIntoAtMostTheBucketsAsked(t *testing.T) {
	tests := []struct {
		inputs, buckets int
		wantPer         int64
		wantBuckets     int
	}{
		{inputs: 1, buckets: 10, wantPer: 1, wantBuckets: 1},
		{inputs: 10, buckets: 10, wantPer: 1, wantBuckets: 10},
		{inputs: 11, buckets: 10, wantPer: 2, wantBuckets: 6},
		{inputs: 1000, buckets: 10, wantPer: 128, wantBuckets: 8},
		{inputs: 1000, buckets: 120, wantPer: 16, wantBuckets: 63},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d inputs in %d buckets", tt.inputs, tt.buckets), func(t *testing.T) {
			rep := build(t, report.Options{Buckets: tt.buckets}, newRecording().input(tt.inputs).end())
			tl := rep.Timelines[0]
			if tl.Per != tt.wantPer || len(tl.Buckets) != tt.wantBuckets {
				t.Errorf("got %d buckets of %d inputs, want %d of %d", len(tl.Buckets), tl.Per, tt.wantBuckets, tt.wantPer)
			}
			var in, out int64
			for i, b := range tl.Buckets {
				in += b.Inputs
				out += b.Outputs
				if i < len(tl.Buckets)-1 && b.Inputs != tl.Per {
					t.Errorf("bucket %d holds %d inputs, want %d", i, b.Inputs, tl.Per)
				}
			}
			if in != int64(tt.inputs) || out != int64(tt.inputs) || tl.Inputs != int64(tt.inputs) {
				t.Errorf("buckets count %d inputs and %d outputs (timeline: %d inputs), want %d of each", in, out, tl.Inputs, tt.inputs)
			}
		})
	}
}

func TestEachRunWithoutEndIsACrashAndEachLaterRunARestart(t *testing.T) {
	rep := build(t, report.Options{},
		newRecording().input(3),       // killed
		newRecording().input(2),       // killed
		newRecording().input(4).end()) // stopped cleanly
	tl := rep.Timelines[0]
	wantSpans := []report.Span{{Run: 1, From: 0, To: 3}, {Run: 2, From: 3, To: 5}, {Run: 3, From: 5, To: 9, Ended: true}}
	if diff := cmp.Diff(wantSpans, tl.Spans); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	type mark struct {
		Kind string
		Run  int
		At   int64
	}
	var got []mark
	for _, m := range tl.Marks {
		got = append(got, mark{m.Kind, m.Run, m.At})
	}
	want := []mark{{report.MarkCrash, 1, 3}, {report.MarkRestart, 2, 3}, {report.MarkCrash, 2, 5}, {report.MarkRestart, 3, 5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("marks (-want +got):\n%s", diff)
	}
	html := page(t, rep)
	if n := strings.Count(html, `data-mark="crash"`); n != 2 {
		t.Errorf("the page has %d crash marks, want 2", n)
	}
	for i, crashed := range []bool{true, true, false} {
		if got := rep.Runs[i].Streams[0].Crashed(); got != crashed {
			t.Errorf("run %d: crashed %v, want %v", i+1, got, crashed)
		}
	}
}

// TestAKilledRunEndedItsStreamsAndSaysWhy: a run an operator killed ends
// its streams (END, no crash mark), and the page says it was killed and
// why.
func TestAKilledRunEndedItsStreamsAndSaysWhy(t *testing.T) {
	r := newRecording().input(2)
	r.add(store.Entry{Kind: store.KindEnd, N: r.inputs, Instant: storetest.T0, Detail: store.End{Killed: "disk <full>"}.Detail()})
	rep := build(t, report.Options{}, r)
	s := rep.Runs[0].Streams[0]
	if !s.Ended || s.Crashed() || s.Killed != "disk <full>" {
		t.Errorf("stream %+v: want ended, not crashed, killed for \"disk <full>\"", s)
	}
	html := page(t, rep)
	if !strings.Contains(html, "END: killed (disk &lt;full&gt;)") || strings.Contains(html, `data-mark="crash"`) {
		t.Errorf("the page does not say killed (escaped), or marks a crash:\n%s", html)
	}
}

func TestDropsFailuresAndCommitsAreCountedAtTheirInput(t *testing.T) {
	r := newRecording().input(2)
	r.add(store.Entry{Kind: store.KindCommit, Source: "orders", Seq: 2, Epoch: 1, Offset: 128})
	r.add(store.Entry{Kind: store.KindDropped, Source: "orders", Seq: 3, N: 5, Detail: "queue full"})
	r.input(1)
	r.add(store.Entry{Kind: store.KindCommit, Source: "other", Seq: 9, Epoch: 1, Offset: 9}) // not p's feed
	// A completion of input 3 fails, then item 4 fails: it never becomes
	// an input.
	r.add(store.Entry{Kind: store.KindFailed, Source: "orders", Seq: 3, Instant: storetest.T0, Detail: "completion: boom"})
	r.add(store.Entry{Kind: store.KindFailed, Source: "orders", Seq: 4, Instant: storetest.T0, Detail: "boom"})
	rep := build(t, report.Options{Buckets: 8}, r)
	want := []report.Bucket{{Inputs: 1, Outputs: 1}, {Inputs: 1, Outputs: 1, Commits: 1}, {Inputs: 1, Outputs: 1, Dropped: 5, Failed: 1}, {Failed: 1}}
	if diff := cmp.Diff(want, rep.Timelines[0].Buckets); diff != "" {
		t.Errorf("buckets (-want +got):\n%s", diff)
	}
	got := rep.Runs[0].Streams[0]
	if got.Inputs != 3 || got.Outputs != 3 || got.Commits != 1 || got.Dropped != 5 || got.DroppedRows != 1 || got.Failed != 2 || got.Ended {
		t.Errorf("summary %+v, want 3 inputs, 3 outputs, 1 commit, 5 dropped in 1 row, 2 failed, no END", got)
	}
}

func TestAReplayDivergenceIsMarkedAtItsInput(t *testing.T) {
	r1 := newRecording().input(3).end()
	r2 := newRecording().input(4).end()
	// Input 2 of run 2 is its INLINE row at index 3*2.
	div := &replayer.Divergence{Processor: "p", Index: 6, Kind: replayer.KindOutput, Source: "orders", Seq: 2,
		Input: `{"id":2}`, Want: []string{"book: a"}, Got: []string{"book: b"}}
	replays := []*replayer.Report{{Identical: true}, {Processors: []replayer.ProcessorReport{{Processor: "p", Divergences: 1, First: div}}}}
	rep := build(t, report.Options{Replays: replays}, r1, r2)
	var at []int64
	for _, m := range rep.Timelines[0].Marks {
		if m.Kind == report.MarkDivergence {
			at = append(at, m.At)
		}
	}
	if diff := cmp.Diff([]int64{4}, at); diff != "" { // run 1's 3 inputs, then run 2's second
		t.Errorf("divergence marks at (-want +got):\n%s", diff)
	}
	if len(rep.Divergences) != 1 || rep.Divergences[0].Run != 2 {
		t.Errorf("divergences %+v, want run 2's", rep.Divergences)
	}
	if html := page(t, rep); !strings.Contains(html, `data-divergences="1"`) {
		t.Error("the page lists no divergence")
	}
}

// A page fetches nothing and runs nothing: no script, no URL, and the text
// of a recording (a line, a payload, a name) is escaped.
func TestThePageHasNoScriptNorAnyAssetAndEscapesTheRecordingsText(t *testing.T) {
	evil := `</code><script>alert(1)</script><img src="http://x/y.png">`
	f := &incident.Findings{Complete: true, Runs: []incident.Run{{Run: 1, Counts: map[string]int64{"META": 1}}},
		Answers: []incident.Answers{{Feed: "orders", Processor: "p", Crashes: []incident.Crash{{Run: 1,
			LastProcessed: &incident.Input{Run: 1, Seq: 1, Line: evil, Time: storetest.T0}}}}}}
	rep := build(t, report.Options{Findings: f, Title: evil}, newRecording().input(2))
	html := page(t, rep)
	for _, re := range []string{`(?i)<script`, `(?i)<img`, `(?i)<[a-z][^>]*\s(src|href|srcset|action)=`, `(?i)url\(`, `(?i)@import`,
		`(?i)<link`, `(?i)<iframe`, `(?i)<object`, `(?i)<embed`, `(?i)\son[a-z]+=`} {
		if loc := regexp.MustCompile(re).FindStringIndex(html); loc != nil {
			t.Errorf("the page holds %q: %s", re, html[max(loc[0]-60, 0):min(loc[1]+60, len(html))])
		}
	}
	if !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the input's line is not on the page, escaped")
	}
}

func TestTheSameRecordingsGiveTheSameBytes(t *testing.T) {
	recs := []*recording{newRecording().input(50), newRecording().input(70).end()}
	a, b := page(t, build(t, report.Options{}, recs...)), page(t, build(t, report.Options{}, recs...))
	if a != b {
		t.Error("two pages of the same recordings differ")
	}
}

// failing is a recording whose rows end in an I/O error.
type failing struct {
	store.Reader
	err error
}

func (f failing) Scan() iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		for e, err := range f.Reader.Scan() {
			if !yield(e, err) {
				return
			}
			if e.Kind == store.KindInline {
				yield(store.Entry{}, f.err)
				return
			}
		}
	}
}

func TestARunThatCannotBeReadThroughIsUnreadable(t *testing.T) {
	ioErr := errors.New("input/output error")
	r := failing{Reader: newRecording().input(3).end().reader(t), err: ioErr}
	rep, err := report.Build(context.Background(), []report.Run{{Name: "bad.csv", Reader: r}}, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := rep.Runs[0].Problems
	if len(ps) == 0 || ps[len(ps)-1].Kind != store.ProblemUnreadable {
		t.Fatalf("problems %v, want an unreadable one last", ps)
	}
	if !errors.Is(&ps[len(ps)-1], store.ErrUnreadable) {
		t.Error("the problem is not store.ErrUnreadable")
	}
	if rep.Runs[0].Streams[0].Inputs != 1 {
		t.Errorf("%d inputs read, want the 1 before the error", rep.Runs[0].Streams[0].Inputs)
	}
}

func TestBuildRefusesWhatItCannotShow(t *testing.T) {
	one := []report.Run{{Name: "a.csv", Reader: newRecording().reader(t)}}
	tests := []struct {
		name string
		runs []report.Run
		opts report.Options
	}{
		{"no run", nil, report.Options{}},
		{"a nil reader", []report.Run{{Name: "a.csv"}}, report.Options{}},
		{"replays of other runs", one, report.Options{Replays: []*replayer.Report{{}, {}}}},
		{"findings of other runs", one, report.Options{Findings: &incident.Findings{}}},
		{"one bucket", one, report.Options{Buckets: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := report.Build(context.Background(), tt.runs, tt.opts); !errors.Is(err, report.ErrUsage) {
				t.Errorf("got %v, want report.ErrUsage", err)
			}
		})
	}
}

func TestACancelledBuildStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := newRecording().input(30_000).end().reader(t) // 90,000 rows: past one progress step
	_, err := report.Build(ctx, []report.Run{{Name: "a.csv", Reader: r}}, report.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// A run's operator actions (its CONTROL rows, as explain reads them) are
// listed under the run, each as a person reads it, escaped.
func TestARunsOperatorActionsAreListed(t *testing.T) {
	pause := store.Control{Feed: "orders", Group: "main", Action: store.ControlPause, Who: "alice", Reason: "sink <deploy>",
		At: storetest.T0, Before: 2, After: 2}
	r := newRecording().input(2).add(pause.Entry(0)).end()
	f, err := incident.Explain([]incident.Recording{{File: "run-1.csv", Reader: r.reader(t)}}, incident.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := build(t, report.Options{Findings: f}, r)
	if got := rep.Runs[0].Controls; len(got) != 1 || got[0] != pause.String() {
		t.Fatalf("controls %q, want [%q]", got, pause.String())
	}
	if html := page(t, rep); !strings.Contains(html, `1 operator action(s):`) || !strings.Contains(html, "alice: pause feed &#34;orders&#34; group &#34;main&#34;") ||
		!strings.Contains(html, "sink &lt;deploy&gt;") {
		t.Errorf("the page does not list alice's pause, escaped:\n%s", html)
	}
}
