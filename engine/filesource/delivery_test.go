package filesource

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

func lineAt(i int) string { return fmt.Sprintf("line-%06d", i) }

func wantInOrder(t *testing.T, got []string, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("got %d lines, want %d (%d..%d)", len(got), to-from, from, to)
	}
	for i, s := range got {
		if s != lineAt(from+i) {
			t.Fatalf("line %d is %q, want %q", i, s, lineAt(from+i))
		}
	}
}

// Lines read and queued but not processed are not committed, and a crash
// (the pointer file as it was, the engine gone) re-delivers them.
func TestReadButNotDispatchedLinesAreNotCommittedAndRedeliveredAfterACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 0, 100))
		first, release := testutil.NewGate(t), testutil.NewGate(t)
		p := &rec{gate: func(s string) {
			blockAt(lineAt(0), first)(s)
			blockAt(lineAt(40), release)(s)
		}}
		r := start(t, path, Options{}, setup{procs: []*rec{p}})
		ptr := path + ".ptr"
		testutil.AdvanceUntil(t, "every line read, none handled", func() bool {
			f := r.feed()
			return f.State == engine.StateCaughtUp && f.Sequence == 100
		})
		testutil.Advance(10 * time.Millisecond)
		if got := readPointer(t, ptr).Offset; got != 0 {
			t.Fatalf("pointer %d with 100 lines read and none processed, want 0", got)
		}
		first.Open()
		testutil.AdvanceUntil(t, "40 lines handled, the rest read", func() bool {
			f := r.feed()
			return p.count() == 40 && f.State == engine.StateCaughtUp && f.Sequence == 100
		})
		testutil.AdvanceUntil(t, "the pointer at line 40", func() bool { return readPointer(t, ptr).Offset == 40*lineLen })
		testutil.Advance(20 * time.Millisecond) // more duty cycles: the pointer must stay where processing is
		if got := readPointer(t, ptr).Offset; got != 40*lineLen {
			t.Fatalf("pointer %d after 40 processed lines of 100 read, want %d", got, 40*lineLen)
		}
		snapshot, err := os.ReadFile(ptr)
		if err != nil {
			t.Fatal(err)
		}
		// The crash: nothing more is processed, the pointer file is what it was.
		p.ignore.Store(true)
		release.Open()
		r.stop()
		if err := os.WriteFile(ptr, snapshot, 0o644); err != nil {
			t.Fatal(err)
		}
		p2, _ := once(t, path, Options{}, 60)
		got, ds := p2.got()
		wantInOrder(t, got, 40, 100)
		if ds[0].Position.Offset != 41*lineLen {
			t.Fatalf("first re-delivered position %d, want %d", ds[0].Position.Offset, 41*lineLen)
		}
	})
}

// A clean stop lets the groups drain and commits exactly what was
// processed: a restart re-delivers nothing processed and skips nothing.
func TestCleanStopCommitsOnlyProcessedLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain time.Duration
	}{{"drained", 0}, {"drain-cut-short", time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 20000
				path := input(t, numbered("line", 0, n))
				p := &rec{delay: 20 * time.Microsecond}
				r := start(t, path, Options{}, setup{procs: []*rec{p}, drain: tc.drain})
				testutil.AdvanceUntil(t, "some lines handled", func() bool { return p.count() > 500 })
				r.stop()
				done := p.count()
				if done >= n {
					t.Fatalf("all %d lines handled before the stop: the test proves nothing", done)
				}
				if got := readPointer(t, path+".ptr").Offset; got != int64(done*lineLen) {
					t.Fatalf("pointer %d after a clean stop with %d lines processed, want %d", got, done, done*lineLen)
				}
				p2, _ := once(t, path, Options{}, n-done)
				got, _ := p2.got()
				wantInOrder(t, got, done, n)
			})
		})
	}
}

// A clean stop commits what the slowest of two groups processed.
func TestCleanStopCommitsWhatTheSlowestGroupProcessed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20000
		path := input(t, numbered("line", 0, n))
		fast, slow := &rec{}, &rec{delay: 30 * time.Microsecond}
		r := start(t, path, Options{}, setup{procs: []*rec{fast, slow}, drain: time.Millisecond})
		testutil.AdvanceUntil(t, "some lines handled", func() bool { return slow.count() > 300 })
		r.stop()
		lo := min(fast.count(), slow.count())
		if lo >= n {
			t.Fatal("everything processed before the stop: the test proves nothing")
		}
		if got := readPointer(t, path+".ptr").Offset; got != int64(lo*lineLen) {
			t.Fatalf("pointer %d, want %d (slowest group processed %d; fast %d)", got, lo*lineLen, lo, fast.count())
		}
	})
}

// The pointer follows the slowest of three groups, forward only.
func TestPointerFollowsTheSlowestOfThreeGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 120
		path := input(t, numbered("line", 0, n))
		rel := []*testutil.Gate{testutil.NewGate(t), testutil.NewGate(t), testutil.NewGate(t)}
		ps := []*rec{
			{gate: blockAt(lineAt(90), rel[0])},
			{gate: blockAt(lineAt(30), rel[1])},
			{gate: blockAt(lineAt(60), rel[2])},
		}
		// Forward only: each write of the pointer file is checked against
		// the one before it as it is made (the pointer's write hook).
		var mu sync.Mutex
		var last int64
		var backwards []string
		src, lg := newSource(t, path, Options{})
		src.hookWrite = func(p Pointer) {
			mu.Lock()
			defer mu.Unlock()
			if p.Offset < last {
				backwards = append(backwards, fmt.Sprintf("%d after %d", p.Offset, last))
			}
			last = p.Offset
		}
		r := startSource(t, src, lg, setup{procs: ps})
		ptr := path + ".ptr"
		at := func(lines int) {
			t.Helper()
			testutil.AdvanceUntil(t, fmt.Sprintf("the pointer at line %d", lines), func() bool { return readPointer(t, ptr).Offset == int64(lines*lineLen) })
			testutil.Advance(10 * time.Millisecond)
			if got := readPointer(t, ptr).Offset; got != int64(lines*lineLen) {
				t.Fatalf("pointer %d, want %d", got, lines*lineLen)
			}
		}
		testutil.AdvanceUntil(t, "the groups at their gates", func() bool { return ps[0].count() == 90 && ps[1].count() == 30 && ps[2].count() == 60 })
		at(30)
		rel[1].Open() // the slowest is now the one at 60
		testutil.AdvanceUntil(t, "group 1 done", func() bool { return ps[1].count() == n })
		at(60)
		rel[2].Open()
		at(90)
		rel[0].Open()
		r.settle(n, ps...)
		at(n)
		mu.Lock()
		defer mu.Unlock()
		if len(backwards) > 0 {
			t.Fatalf("the pointer moved backwards: %v", backwards)
		}
	})
}

// An explicit DropAfterSpin drops for a full queue, counts it, reports the
// feed lossy, and commits past the dropped lines.
func TestExplicitDropAfterSpinDropsCountsAndCommitsPastTheDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5000
		path := input(t, numbered("line", 0, n))
		release := testutil.NewGate(t)
		p := &rec{gate: blockAt(lineAt(0), release)}
		var droppedSeen atomic.Int64
		obs := engine.Observer{Dropped: func(_ string, d engine.Drop) { droppedSeen.Add(d.Count) }}
		r := start(t, path, Options{}, setup{procs: []*rec{p}, queue: 16, policy: engine.DropAfterSpin(0), observer: obs})
		testutil.AdvanceUntil(t, "the file read to its end", func() bool { return r.feed().State == engine.StateCaughtUp })
		release.Open()
		st := r.settle(0)
		f := st.Feeds[0]
		if f.Dropped == 0 || st.Lossless || f.Lossless {
			t.Fatalf("dropped %d, lossless %v/%v: want drops and lossless false", f.Dropped, st.Lossless, f.Lossless)
		}
		if int64(p.count())+f.Dropped != n {
			t.Fatalf("processed %d + dropped %d != %d", p.count(), f.Dropped, n)
		}
		if got := readPointer(t, path+".ptr").Offset; got != n*lineLen {
			t.Fatalf("pointer %d, want the end %d: a drop is committed past", got, n*lineLen)
		}
		if droppedSeen.Load() != f.Dropped {
			t.Fatalf("observer saw %d dropped, status %d", droppedSeen.Load(), f.Dropped)
		}
	})
}

// A slow consumer behind a 1,024-line queue: PAUSE loses nothing and
// delivers every line once, in order; an explicit DropAfterSpin(0) settles
// lossy with processed + dropped = all.
func TestSlowConsumer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lines  int
		policy engine.Policy
	}{
		{"pause-10000", 10000, engine.Policy{}},
		{"pause-40000", 40000, engine.Policy{}},
		{"drop-after-spin-40000", 40000, engine.DropAfterSpin(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("line", 0, tc.lines))
				p := &rec{delay: 3 * time.Microsecond}
				r := start(t, path, Options{}, setup{procs: []*rec{p}, queue: 1024, policy: tc.policy})
				var st engine.Status
				testutil.AdvanceUntil(t, "settled", func() bool {
					st = r.e.Status()
					f := st.Feeds[0]
					if f.Paused && f.State == engine.StateCaughtUp {
						t.Fatalf("CAUGHT_UP while paused (a line not taken)")
					}
					if st.Settled && p.count()+int(f.Dropped) < tc.lines {
						t.Fatalf("settled with %d of %d lines processed", p.count(), tc.lines)
					}
					return st.Settled
				})
				f := st.Feeds[0]
				got, _ := p.got()
				if tc.policy.Kind == "" {
					if f.Policy != string(engine.PauseKind) || f.Dropped != 0 || !st.Lossless {
						t.Fatalf("policy %s dropped %d lossless %v", f.Policy, f.Dropped, st.Lossless)
					}
					if f.Pauses == 0 {
						t.Fatal("the source never paused: the consumer was not slow enough to prove anything")
					}
					wantInOrder(t, got, 0, tc.lines)
				} else {
					if f.Dropped == 0 || st.Lossless {
						t.Fatalf("dropped %d lossless %v: want drops", f.Dropped, st.Lossless)
					}
					if int64(len(got))+f.Dropped != int64(tc.lines) {
						t.Fatalf("processed %d + dropped %d != %d", len(got), f.Dropped, tc.lines)
					}
				}
				t.Logf("processed %d dropped %d pauses %d", len(got), f.Dropped, f.Pauses)
				if ptr := readPointer(t, path+".ptr").Offset; ptr != int64(tc.lines*lineLen) {
					t.Fatalf("pointer %d, want %d", ptr, tc.lines*lineLen)
				}
			})
		})
	}
}

// The position is the byte offset after each line's terminator, for UTF-8
// text and for bytes that are not UTF-8 (decoded as U+FFFD); a restart
// resumes exactly at the next line.
func TestPointerCountsBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string // raw bytes of each line
		want  []string // decoded text
	}{
		{"utf8", []string{"héllo", "日本語", "😀x", "plain"}, []string{"héllo", "日本語", "😀x", "plain"}},
		{"not-utf8", []string{"caf\xe9", "a\xff\xfeb", "\xc3", "ok"}, []string{"caf\uFFFD", "a\uFFFDb", "\uFFFD", "ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var content bytes.Buffer
				var offs []int64
				for i, l := range tc.lines {
					content.WriteString(l)
					content.WriteString([]string{"\n", "\r\n", "\r\n", "\n"}[i%4])
					offs = append(offs, int64(content.Len()))
				}
				path := input(t, content.String())
				p, _ := once(t, path, Options{}, len(tc.lines))
				got, ds := p.got()
				if !slices.Equal(got, tc.want) {
					t.Fatalf("lines %q, want %q", got, tc.want)
				}
				for i, d := range ds {
					if d.Position.Offset != offs[i] {
						t.Fatalf("line %d position %d, want %d", i, d.Position.Offset, offs[i])
					}
				}
				if ptr := readPointer(t, path+".ptr").Offset; ptr != int64(content.Len()) {
					t.Fatalf("pointer %d, want the byte size %d", ptr, content.Len())
				}
				appendFile(t, path, "tail\n")
				p2, _ := once(t, path, Options{}, 1)
				if got, _ := p2.got(); got[0] != "tail" {
					t.Fatalf("after a restart got %q, want only the appended line", got)
				}
			})
		})
	}
}

// completed records the position of the last completed delivery, and
// closes all once want deliveries have completed.
type completed struct {
	pos  atomic.Int64
	n    atomic.Int64
	want int64
	all  chan struct{}
}

func (c *completed) OnEvent(cy *core.Cycle, ev any) error {
	for t0 := time.Now(); time.Since(t0) < 10*time.Microsecond; { // a slower app: commits run while lines flow
	}
	cy.OnComplete(c)
	return nil
}

func (c *completed) Complete(d *core.Delivery) error {
	c.pos.Store(d.Position.Offset)
	if c.n.Add(1) == c.want {
		close(c.all)
	}
	return nil
}

// The pointer is never ahead of the last completed delivery: each write of
// the pointer file, looked at just before it lands (the pointer's write
// hook), holds an offset no greater than the last completed delivery's
// then. The run is on the wall clock, so commits and deliveries interleave
// as they would in production.
func TestThePointerIsNeverAheadOfCompletedDeliveries(t *testing.T) {
	const n = 20000
	path := input(t, numbered("line", 0, n))
	c := &completed{want: n, all: make(chan struct{})}
	src, lg := newSource(t, path, Options{})
	var mu sync.Mutex
	var writes int
	var ahead []string
	src.hookWrite = func(p Pointer) {
		done := c.pos.Load()
		mu.Lock()
		defer mu.Unlock()
		writes++
		if p.Offset > done {
			ahead = append(ahead, fmt.Sprintf("pointer %d written with the last completed delivery at %d", p.Offset, done))
		}
	}
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 1024}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: c}}}},
		Logger: lg.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.all:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d of %d deliveries completed after 60 s", c.n.Load(), n)
	}
	if err := e.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ahead) > 0 {
		t.Fatalf("%d of %d pointer writes ahead of the completed deliveries, the first: %s", len(ahead), writes, ahead[0])
	}
	if got := readPointer(t, path+".ptr").Offset; got != n*lineLen {
		t.Fatalf("final pointer %d, want %d", got, n*lineLen)
	}
	t.Logf("%d pointer writes checked", writes)
}
