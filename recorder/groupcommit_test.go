package recorder_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// batchSource publishes its items as one batch (Intake.TryPublishBatch,
// as the file source does), at offsets 1..n, then ends: the group finds
// them all ready at once.
type batchSource struct{ items []any }

func (s batchSource) Run(ctx context.Context, in *engine.Intake) error {
	in.SetBounded(true)
	in.SetState(engine.StateBehind, "")
	pos := make([]core.Position, len(s.items))
	for i := range pos {
		pos[i] = core.Position{Offset: int64(i + 1)}
	}
	items := s.items
	for len(items) > 0 {
		k := in.TryPublishBatch(items, pos)
		items, pos = items[k:], pos[k:]
		if len(items) > 0 {
			select {
			case <-in.Ready():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	in.SetState(engine.StateEndOfStream, "")
	return nil
}

func batchFeed(name string, journal engine.Journal, items ...any) engine.FeedConfig {
	return engine.FeedConfig{Name: name, Source: batchSource{items}, Policy: engine.Pause(), QueueSize: 64, Journal: journal}
}

func strs(n int, f func(i int) string) []any {
	items := make([]any, n)
	for i := range items {
		items[i] = f(i)
	}
	return items
}

// inputCalls is how many of w's Append calls hold input rows.
// apps names an app for each stream, as META must.
func apps(streams ...string) recorder.Options {
	m := map[string]string{}
	for _, s := range streams {
		m[s] = "test"
	}
	return recorder.Options{Apps: m}
}

func inputCalls(w *fakeWriter) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.calls {
		if slices.ContainsFunc(c, func(e store.Entry) bool { return e.Kind.IsInput() }) {
			n++
		}
	}
	return n
}

// inputOrder lists the input rows of w in file order as "processor#seq".
func inputOrder(w *fakeWriter) []string {
	var out []string
	for _, e := range w.rows() {
		if e.Kind.IsInput() {
			out = append(out, fmt.Sprintf("%s#%d", e.Processor, e.Seq))
		}
	}
	return out
}

// TestTheRowsOfReadyItemsGoOutInFewerAppendsThanItems: when a group finds
// many items ready, their rows (every processor's, item after item) go
// out in fewer Appends than items (one write, one transaction each), and
// the recording reads whole: every input in order, no index gap.
func TestTheRowsOfReadyItemsGoOutInFewerAppendsThanItems(t *testing.T) {
	const n = 50
	w := &fakeWriter{}
	rec, st := run(t, w, apps("p", "q"), func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{batchFeed("in", nil, strs(n, func(int) string { return "x" })...)},
			Groups: []engine.GroupConfig{group("g", []string{"in"}, 1, pc("p", &testProc{}), pc("q", &testProc{}))},
		}
	})
	if err := rec.Err(); err != nil || !st.Lossless {
		t.Fatalf("Err() = %v, lossless %v", err, st.Lossless)
	}
	if got := inputCalls(w); got >= n {
		t.Errorf("the inputs' rows took %d Appends, want fewer than the %d items", got, n)
	}
	var want []string
	for seq := 1; seq <= n; seq++ {
		want = append(want, fmt.Sprintf("p#%d", seq), fmt.Sprintf("q#%d", seq))
	}
	if diff := cmp.Diff(want, inputOrder(w)); diff != "" {
		t.Errorf("inputs in the recording (-want +got):\n%s", diff)
	}
	if got := problems(w.rows()); len(got) != 0 {
		t.Errorf("integrity problems: %v", got)
	}
}

// TestAnItemWithACompletionHasItsRowsWrittenBeforeItsCompletionRuns: in a
// batch, an item that registers a completion has its rows, and those of
// the items pending before it, written before its completion runs; the
// items after it go out in the next write.
func TestAnItemWithACompletionHasItsRowsWrittenBeforeItsCompletionRuns(t *testing.T) {
	var mu sync.Mutex
	var events []string
	add := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	w := &fakeWriter{fail: func(rows []store.Entry) error {
		var items []string
		for _, e := range rows {
			if e.Kind.IsInput() {
				items = append(items, string(e.Payload))
			}
		}
		if len(items) > 0 {
			add("append " + strings.Join(items, " "))
		}
		return nil
	}}
	p := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Emit("out", ev)
		if ev == "c" {
			c.OnComplete(core.CompletionFunc(func(*core.Delivery) error {
				add("complete c")
				return nil
			}))
		}
		return nil
	})
	rec, st := run(t, w, recorder.Options{}, func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{batchFeed("in", nil, "a", "b", "c", "d", "e")},
			Groups: []engine.GroupConfig{group("g", []string{"in"}, 1, pc("p", p))},
		}
	})
	if err := rec.Err(); err != nil || !st.Lossless {
		t.Fatalf("Err() = %v, lossless %v", err, st.Lossless)
	}
	want := []string{`append "a" "b" "c"`, "complete c", `append "d" "e"`}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("writes and completions (-want +got):\n%s", diff)
	}
}

// TestTimerRowsKeepTheirIndexOrderInABatch: a timer that falls due while
// a batch is handled (After(0)) fires before the next item, and its rows
// sit between the two items' rows, every index in order.
func TestTimerRowsKeepTheirIndexOrderInABatch(t *testing.T) {
	w := &fakeWriter{}
	rec, _ := run(t, w, apps("p"), func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{batchFeed("in", nil, "tick", "a", "tick", "b")},
			Groups: []engine.GroupConfig{group("g", []string{"in"}, 1, pc("p", &testProc{}))},
		}
	})
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range w.stream("p") {
		if e.Index != int64(i+1) {
			t.Errorf("row %d has index %d", i+1, e.Index)
		}
		s := string(e.Kind)
		if e.Kind == store.KindInline || e.Kind == store.KindOutput {
			s += " " + string(e.Payload)
		}
		got = append(got, s)
	}
	want := []string{"START",
		"DELIVERY", `INLINE "tick"`, `OUTPUT "tick"`, "TIMER", "OUTPUT 1",
		"DELIVERY", `INLINE "a"`, `OUTPUT "a"`,
		"DELIVERY", `INLINE "tick"`, `OUTPUT "tick"`, "TIMER", "OUTPUT 2",
		"DELIVERY", `INLINE "b"`, `OUTPUT "b"`,
		"END"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("p's rows (-want +got):\n%s", diff)
	}
	if got := problems(w.rows()); len(got) != 0 {
		t.Errorf("integrity problems: %v", got)
	}
}

// TestWorkersBatchTheirChunks: with several workers, the items a worker is
// handed together (a chunk, while it has a backlog) are one batch: their
// rows go out in fewer Appends than items, each worker's stream whole.
func TestWorkersBatchTheirChunks(t *testing.T) {
	const n = 60
	w := &fakeWriter{}
	synctest.Test(t, func(t *testing.T) {
		// The first item waits until the group handed out every item it
		// could: the workers then have a backlog, which the group hands
		// out in chunks.
		release := make(chan struct{})
		var once sync.Once
		newP := func() (core.Processor, error) {
			return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				if ev == "x0" {
					<-release
				}
				c.Emit("out", ev)
				return nil
			}), nil
		}
		go func() {
			synctest.Wait()
			once.Do(func() { close(release) })
		}()
		rec, st := runIn(t, w, apps(core.WorkerStream("p", 0), core.WorkerStream("p", 1)), func(*recorder.Recorder) engine.Config {
			return engine.Config{
				Feeds: []engine.FeedConfig{batchFeed("in", nil, strs(n, func(i int) string { return fmt.Sprintf("x%d", i) })...)},
				Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 2, Order: engine.OrderKey,
					Key:        func(any) string { return "one key" },
					Processors: []engine.ProcessorConfig{{Name: "p", New: newP}}}},
			}
		})
		if err := rec.Err(); err != nil || !st.Lossless {
			t.Fatalf("Err() = %v, lossless %v", err, st.Lossless)
		}
	})
	if got := inputCalls(w); got >= n/2 {
		t.Errorf("the inputs' rows took %d Appends, want fewer than half the %d items", got, n)
	}
	worker := core.WorkerStream("p", engine.WorkerOf("one key", 2))
	var want []string
	for seq := 1; seq <= n; seq++ {
		want = append(want, fmt.Sprintf("%s#%d", worker, seq))
	}
	if diff := cmp.Diff(want, inputOrder(w)); diff != "" {
		t.Errorf("inputs in the recording (-want +got):\n%s", diff)
	}
	if got := problems(w.rows()); len(got) != 0 {
		t.Errorf("integrity problems: %v", got)
	}
}

// TestAJournalWritesOnePublishedBatchWithOneAppend: the items a source
// publishes in one batch are journalled with one Append (one write, one
// transaction), and the inputs name their JOURNAL rows (INDEXED).
func TestAJournalWritesOnePublishedBatchWithOneAppend(t *testing.T) {
	const n = 40
	w := &fakeWriter{}
	rec, st := run(t, w, apps("p"), func(rec *recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{batchFeed("in", rec.Journal(), strs(n, func(i int) string { return fmt.Sprint(i) })...)},
			Groups: []engine.GroupConfig{group("g", []string{"in"}, 1, pc("p", &testProc{}))},
		}
	})
	if err := rec.Err(); err != nil || !st.Lossless {
		t.Fatalf("Err() = %v, lossless %v", err, st.Lossless)
	}
	w.mu.Lock()
	var journalCalls, journalRows int
	for _, c := range w.calls {
		// (The first batch may come before the opening is written: that
		// Append then holds META and START too.)
		if k := store.KindJournal; slices.ContainsFunc(c, func(e store.Entry) bool { return e.Kind == k }) {
			journalCalls++
			for _, e := range c {
				if e.Kind == store.KindJournal {
					journalRows++
				}
			}
		}
	}
	w.mu.Unlock()
	if journalCalls != 1 || journalRows != n {
		t.Errorf("JOURNAL rows: %d in %d Appends, want %d in 1", journalRows, journalCalls, n)
	}
	indexed := 0
	for _, e := range w.stream("p") {
		if e.Kind == store.KindIndexed {
			indexed++
		}
	}
	if indexed != n {
		t.Errorf("%d inputs INDEXED, want %d", indexed, n)
	}
	if got := problems(w.rows()); len(got) != 0 {
		t.Errorf("integrity problems: %v", got)
	}
}

// TestABatchPastFlushBytesIsWrittenAtOnce: a batch is bounded by bytes as
// well as by items: once the rows staged reach recorder.FlushBytes they
// are written at once, before the group's end of batch.
func TestABatchPastFlushBytesIsWrittenAtOnce(t *testing.T) {
	const n = 8
	big := strings.Repeat("x", recorder.FlushBytes/4) // an item's input and output rows: about half the bound
	w := &fakeWriter{}
	rec, st := run(t, w, apps("p"), func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{batchFeed("in", nil, strs(n, func(int) string { return big })...)},
			Groups: []engine.GroupConfig{group("g", []string{"in"}, 1, pc("p", &testProc{}))},
		}
	})
	if err := rec.Err(); err != nil || !st.Lossless {
		t.Fatalf("Err() = %v, lossless %v", err, st.Lossless)
	}
	w.mu.Lock()
	var perCall []int
	for _, c := range w.calls {
		inputs := 0
		for _, e := range c {
			inputs += btoi(e.Kind.IsInput())
		}
		if inputs > 0 {
			perCall = append(perCall, inputs)
		}
	}
	w.mu.Unlock()
	if diff := cmp.Diff([]int{2, 2, 2, 2}, perCall); diff != "" {
		t.Errorf("inputs per Append (-want +got):\n%s", diff)
	}
}

// batchApplier emits each item and registers a core.BatchCompletion for it
// whose first try fails for the items in failOnce.
type batchApplier struct {
	mu       sync.Mutex
	failOnce map[any]bool
}

type batchApply struct {
	a  *batchApplier
	ev any
}

func (b *batchApply) Complete(*core.Delivery) error {
	b.a.mu.Lock()
	defer b.a.mu.Unlock()
	if b.a.failOnce[b.ev] {
		b.a.failOnce[b.ev] = false
		return fmt.Errorf("%w: completion of %v", errFail, b.ev)
	}
	return nil
}

func (*batchApply) BatchCompletion() {}

func (a *batchApplier) OnEvent(c *core.Cycle, ev any) error {
	c.OnComplete(&batchApply{a: a, ev: ev})
	c.Emit("out", ev)
	return nil
}

// TestEveryFailedDeferredCompletionOfABatchGetsItsFailedRow: items whose
// completions are deferred (core.BatchCompletion) are written as one batch
// and completed after it; each item whose completion fails gets its FAILED
// row (its feed and seq) after the batch's rows, though the processor has
// moved on to later items, and a second failure in the batch is not lost.
func TestEveryFailedDeferredCompletionOfABatchGetsItsFailedRow(t *testing.T) {
	w := &fakeWriter{}
	app := &batchApplier{failOnce: map[any]bool{"x": true, "y": true}}
	rec, st := run(t, w, apps("p"), func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{batchFeed("in", nil, "a", "x", "y")},
			Groups: []engine.GroupConfig{group("g", []string{"in"}, 2, pc("p", app))},
		}
	})
	if err := rec.Err(); err != nil || !st.Lossless {
		t.Fatalf("Err() = %v, lossless %v", err, st.Lossless)
	}
	var got []string
	for _, e := range w.stream("p") {
		got = append(got, fmt.Sprintf("%s %s#%d", e.Kind, e.Source, e.Seq))
	}
	want := []string{"START #0",
		"DELIVERY in#1", "INLINE in#1", "OUTPUT out#1",
		"DELIVERY in#2", "INLINE in#2", "OUTPUT out#1",
		"DELIVERY in#3", "INLINE in#3", "OUTPUT out#1",
		"FAILED in#2", "FAILED in#3", "END #0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows of p (-want +got):\n%s", diff)
	}
	if got := inputCalls(w); got != 1 {
		t.Errorf("the inputs' rows took %d Appends, want 1", got)
	}
	if got := problems(w.rows()); len(got) != 0 {
		t.Errorf("integrity problems: %v", got)
	}
}
