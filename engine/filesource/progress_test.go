package filesource

import (
	"context"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// progressEngine runs path's committed read for the groups fast and slow,
// one processor each (fast's handles every line, slow's h).
func progressEngine(t *testing.T, path string, fast, slow *handledLines, hook func(GroupProgress, int)) *engine.Engine {
	t.Helper()
	src, err := New(path, Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	src.hookGroup = hook
	g := func(name string, h *handledLines) engine.GroupConfig {
		p, _ := h.New()
		return engine.GroupConfig{Name: name, Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: name + "-p", Processor: p}}}
	}
	e, err := engine.New(engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 64, SkipCompleted: true}},
		Groups:       []engine.GroupConfig{g("fast", fast), g("slow", slow)},
		DrainTimeout: time.Second,
		KillAbandon:  true,
		Logger:       testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// progressOf is group's progress in the pointer file at path (0: none).
func progressOf(t *testing.T, path, group string) int64 {
	t.Helper()
	gs, err := ReadGroupProgress(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Group == group {
			return g.Offset
		}
	}
	return 0
}

// killedWithSlowAtLine4 runs the eight lines with slow's line 4 blocked
// until fast handled all eight and the pointer holds the feed's commit
// after line 3 and fast's progress after line 8, then kills the run
// (abandoning slow's line 4).
func killedWithSlowAtLine4(t *testing.T, path string, hook func(GroupProgress, int)) {
	t.Helper()
	fast, slow := &handledLines{}, &handledLines{blocked: lines8[3], gate: testutil.NewGate(t)}
	e := progressEngine(t, path, fast, slow, hook)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.AdvanceUntil(t, "fast handled 8 lines, slow 3, the pointer after line 3, fast's progress after line 8", func() bool {
		return len(fast.got()) == 8 && len(slow.got()) == 3 && readPointer(t, path+".ptr").Offset == 3*lineLen &&
			progressOf(t, path+".ptr", "fast") == 8*lineLen
	})
	if err := e.Kill("drill"); err != nil {
		t.Fatal(err)
	}
	slow.gate.Open()
	if err := e.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after Kill: %v", err)
	}
}

// TestARestartDoesNotDeliverAGroupTheLinesItCompleted (per-group
// progress): the pointer holds the feed's commit at its slowest group and,
// beside it, the fast group's own progress; the restart reads from the
// commit and delivers the slow group every line after it, the fast group
// none of the lines it completed (counted: alreadyCompleted).
func TestARestartDoesNotDeliverAGroupTheLinesItCompleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 1, 9))
		killedWithSlowAtLine4(t, path, nil)
		if p := readPointer(t, path+".ptr"); p.Offset != 3*lineLen {
			t.Fatalf("after the kill the pointer is at %d, want %d (after line 3)", p.Offset, 3*lineLen)
		}
		appendFile(t, path, numbered("line", 9, 10))
		fast, slow := &handledLines{}, &handledLines{}
		st, err := progressEngine(t, path, fast, slow, nil).RunSettled(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fast.got(), []string{numbered("line", 9, 10)[:lineLen-1]}; !slices.Equal(got, want) {
			t.Errorf("the restart handed fast %q, want only the line appended (it completed the 8 before)", got)
		}
		if got, want := slow.got(), append(slices.Clone(lines8[3:]), numbered("line", 9, 10)[:lineLen-1]); !slices.Equal(got, want) {
			t.Errorf("the restart handed slow %q, want %q", got, want)
		}
		fs := st.Feeds[0]
		var completed []int64
		for _, ss := range fs.Subscribers {
			completed = append(completed, ss.AlreadyCompleted)
		}
		if want := []int64{5, 0}; !slices.Equal(completed, want) || !fs.GroupProgress || !fs.Lossless {
			t.Errorf("alreadyCompleted %v (want %v), groupProgress %v, lossless %v", completed, want, fs.GroupProgress, fs.Lossless)
		}
		if p := readPointer(t, path+".ptr"); p.Offset != 9*lineLen {
			t.Errorf("after the restart the pointer is at %d, want the end %d", p.Offset, 9*lineLen)
		}
	})
}

// TestAKillWhileAGroupsProgressIsWrittenNeverSkipsALineItDidNotComplete
// (per-group progress, crash safety): a SIGKILL leaves the pointer file
// as its mapping was (the page cache), so the file is taken after each
// store of a group's slot; a restart from each must hand the fast group
// every line past the pointer it had not completed by then: a slot
// written in part reads as no progress (every line after the pointer is
// delivered again), never as a progress its group did not make.
func TestAKillWhileAGroupsProgressIsWrittenNeverSkipsALineItDidNotComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 1, 9))
		type snap struct {
			b       []byte
			writing GroupProgress // the progress being written
		}
		var snaps []snap
		killedWithSlowAtLine4(t, path, func(g GroupProgress, w int) {
			b, err := os.ReadFile(path + ".ptr")
			if err != nil {
				t.Fatal(err)
			}
			if g.Group == "fast" {
				snaps = append(snaps, snap{b, g})
			}
		})
		if len(snaps) == 0 {
			t.Fatal("no store of fast's progress was seen")
		}
		torn := 0
		for _, s := range snaps {
			if err := os.WriteFile(path+".ptr", s.b, 0o644); err != nil {
				t.Fatal(err)
			}
			from := readPointer(t, path+".ptr").Offset
			held := progressOf(t, path+".ptr", "fast")
			if held == 0 {
				torn++
			} else if held > s.writing.Offset {
				t.Fatalf("a kill while fast's progress %d was written leaves %d", s.writing.Offset, held)
			}
			fast, slow := &handledLines{}, &handledLines{}
			if _, err := progressEngine(t, path, fast, slow, nil).RunSettled(context.Background()); err != nil {
				t.Fatal(err)
			}
			var want []string
			for i, l := range lines8 {
				if end := int64(i+1) * lineLen; end > from && end > held {
					want = append(want, l)
				}
			}
			if got := fast.got(); !slices.Equal(got, want) {
				t.Fatalf("the restart from the pointer at %d, fast's progress %d (being written: %d) handed fast %q, want %q",
					from, held, s.writing.Offset, got, want)
			}
		}
		if torn == 0 {
			t.Fatal("no kill fell inside a slot's write: the test saw no torn slot")
		}
	})
}
