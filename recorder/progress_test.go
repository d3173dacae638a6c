package recorder_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// lines is a processor keeping the lines it handled; the line block, if
// set, waits for gate first (ignoring its context: a kill abandons it).
type lines struct {
	mu    sync.Mutex
	got   []string
	block string
	gate  *testutil.Gate
}

func (l *lines) OnEvent(c *core.Cycle, ev any) error {
	s := fmt.Sprint(ev)
	if s == l.block {
		l.gate.Wait()
	}
	l.mu.Lock()
	l.got = append(l.got, s)
	l.mu.Unlock()
	c.Emit("out", s)
	return nil
}

func (l *lines) handled() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// numberedLines writes lines "line-FROM" to "line-TO" (excluded) to path,
// appending.
func numberedLines(t *testing.T, path string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		fmt.Fprintf(f, "line-%d\n", i)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// twoGroupEngine is a recorded run of path's committed read for the groups
// fast and slow (processors fast-p and slow-p), as recorder.Start sets up
// a feed: SkipCompleted.
func twoGroupEngine(t *testing.T, w store.Writer, path string, fast, slow *lines) (*engine.Engine, *recorder.Recorder) {
	t.Helper()
	rec, err := recorder.New(w, recorder.Options{Apps: map[string]string{"fast-p": "lines", "slow-p": "lines"},
		Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	src, err := filesource.New(path, filesource.Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 64, SkipCompleted: true}},
		Groups: []engine.GroupConfig{
			{Name: "fast", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "fast-p", Processor: fast}}},
			{Name: "slow", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "slow-p", Processor: slow}}},
		},
		Observer:     rec.Observer(),
		DrainTimeout: time.Second,
		KillAbandon:  true,
		Logger:       testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, rec
}

// fastProgress is fast's progress in path's pointer file (0: none).
func fastProgress(t *testing.T, path string) int64 {
	t.Helper()
	gs, err := filesource.ReadGroupProgress(path + ".ptr")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Group == "fast" {
			return g.Offset
		}
	}
	return 0
}

// TestARecordedRestartNamesWhatItDidNotHandAGroupAgain (per-group
// progress, on the record): a run kept fast's progress (8 lines) ahead of
// the feed's commit (none: slow held line 4, and its batch with lines 1 to
// 3); the recorded restart does not hand fast the 8 lines it completed,
// and its recording says so, in fast's stream before its next input: one
// COMPLETED row of the 8 seqs, with their positions. The recording verifies complete: the COMPLETED row
// covers those seqs for missing-input, as slow's inputs do for slow.
func TestARecordedRestartNamesWhatItDidNotHandAGroupAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "in.log")
		numberedLines(t, path, 1, 9)
		fast, slow := &lines{}, &lines{block: "line-4", gate: testutil.NewGate(t)}
		w1 := &fakeWriter{}
		e, rec := twoGroupEngine(t, w1, path, fast, slow)
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		lineLen := int64(len("line-1\n"))
		// slow's batch (lines 1 to 4) is flushed at its end, so line 4
		// holds the feed's commit at 0.
		testutil.AdvanceUntil(t, "fast handled 8 lines, slow 3, fast's progress after line 8", func() bool {
			return len(fast.handled()) == 8 && len(slow.handled()) == 3 && fastProgress(t, path) == 8*lineLen
		})
		if err := e.Kill("drill"); err != nil {
			t.Fatal(err)
		}
		slow.gate.Open()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}

		numberedLines(t, path, 9, 10)
		fast2, slow2 := &lines{}, &lines{}
		w2 := &fakeWriter{}
		e2, rec2 := twoGroupEngine(t, w2, path, fast2, slow2)
		st, err := e2.RunSettled(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := rec2.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := fast2.handled(), []string{"line-9"}; !slices.Equal(got, want) {
			t.Fatalf("the restart handed fast %q, want %q", got, want)
		}
		if got := len(slow2.handled()); got != 9 {
			t.Fatalf("the restart handed slow %d lines, want all 9 (the commit was at 0)", got)
		}
		if !st.Lossless {
			t.Fatalf("the restart is not lossless: %+v", st.Feeds[0])
		}
		if ps := problems(w2.rows()); len(ps) != 0 {
			t.Fatalf("the restart's recording has problems: %v", ps)
		}
		var kinds []string
		for _, e := range w2.stream("fast-p") {
			kinds = append(kinds, string(e.Kind))
		}
		if want := []string{"START", "COMPLETED", "DELIVERY", "INLINE", "OUTPUT", "END"}; !slices.Equal(kinds, want) {
			t.Fatalf("fast-p's stream %v, want %v", kinds, want)
		}
		c, err := store.CompletedOf(w2.stream("fast-p")[1])
		if err != nil {
			t.Fatal(err)
		}
		epoch := c.Epoch
		want := store.Completed{Feed: "in", Seq: 1, Items: 8, Epoch: epoch, From: lineLen, Last: 8 * lineLen}
		if c != want || epoch == 0 {
			t.Fatalf("COMPLETED row %+v, want %+v (an epoch)", c, want)
		}
		for _, e := range w2.stream("slow-p") {
			if e.Kind == store.KindCompleted {
				t.Fatalf("slow-p's stream holds %s: slow completed nothing past the commit", describe(e))
			}
		}
		// Without the row, the seqs are missing in fast-p: the COMMIT rows
		// and the clean end say they were handled.
		var without []store.Entry
		for _, e := range w2.rows() {
			switch {
			case e.Kind == store.KindCompleted:
			case e.Processor == "fast-p" && e.Index > 2:
				e.Index--
				without = append(without, e)
			default:
				without = append(without, e)
			}
		}
		ps := problems(without)
		if len(ps) != 1 || ps[0].Kind != store.ProblemMissingInput || ps[0].Processor != "fast-p" || ps[0].First != 1 || ps[0].Last != 8 {
			t.Fatalf("without the COMPLETED row: %v, want one missing-input of fast-p seqs 1-8", ps)
		}
		if !strings.Contains(c.String(), "8 items") {
			t.Fatalf("%q does not count the items", c.String())
		}
	})
}
