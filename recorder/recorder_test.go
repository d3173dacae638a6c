package recorder_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

func stepOpts() recorder.Options {
	return recorder.Options{Clock: core.NewStepClock(t0, time.Second)}
}

func engineClock() core.Clock { return core.NewStepClock(e0, time.Millisecond) }

// TestStreams records single-group runs on a live engine and compares every
// processor's stream, row by row, with what the format says it must hold.
// One group per run makes the recorder clock's readings deterministic.
func TestStreams(t *testing.T) {
	mutate := core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		ev.(map[string]any)["seen"] = true
		return nil
	})
	echo := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Emit("out", ev)
		return nil
	})
	tests := []struct {
		name        string
		cfg         func(rec *recorder.Recorder) engine.Config
		want        map[string][]string
		wantJournal []string
	}{{
		// DELIVERY + INDEXED for a positioned journalled feed, outputs,
		// a reentrant event (2 cycles, 2 outputs, 2 readings), a timer,
		// a START snapshot, END counting input rows (TIMER included).
		name: "positioned journalled feed",
		cfg: func(rec *recorder.Recorder) engine.Config {
			return engine.Config{Clock: engineClock(),
				Feeds:  []engine.FeedConfig{logFeed("log", rec.Journal(), "a", "r:b", "tick")},
				Groups: []engine.GroupConfig{group("g", []string{"log"}, 1, pc("p", &testProc{}), pc("q", snapProc{}))}}
		},
		want: map[string][]string{
			"p": {
				"1 START @1s",
				`2 DELIVERY log#1 epoch=1 key="" off=1 attempt=0`,
				"3 INDEXED log#1 n=1 @3s reads=[0s]",
				`4 OUTPUT out k=1 "a"`,
				`5 DELIVERY log#2 epoch=1 key="" off=2 attempt=0`,
				"6 INDEXED log#2 n=2 @5s reads=[1ms 2ms]",
				`7 OUTPUT out k=1 "r:b"`,
				`8 OUTPUT out k=2 "re:b"`,
				`9 DELIVERY log#3 epoch=1 key="" off=3 attempt=0`,
				"10 INDEXED log#3 n=1 @7s reads=[3ms]",
				`11 OUTPUT out k=1 "tick"`,
				"12 TIMER timer=1 n=1 @9s reads=[4ms]",
				"13 OUTPUT timer k=1 1",
				"14 END n=4 @10s",
			},
			"q": {
				`1 START @2s {"state":1}`,
				`2 DELIVERY log#1 epoch=1 key="" off=1 attempt=0`,
				"3 INDEXED log#1 n=0 @4s reads=[]",
				`4 DELIVERY log#2 epoch=1 key="" off=2 attempt=0`,
				"5 INDEXED log#2 n=0 @6s reads=[]",
				`6 DELIVERY log#3 epoch=1 key="" off=3 attempt=0`,
				"7 INDEXED log#3 n=0 @8s reads=[]",
				"8 END n=3 @11s",
			},
		},
		wantJournal: []string{`2 JOURNAL log#1 "a"`, `3 JOURNAL log#2 "r:b"`, `4 JOURNAL log#3 "tick"`},
	}, {
		// A push feed without journal: INLINE rows carrying the payload, no
		// DELIVERY (no source position).
		name: "push feed without journal",
		cfg: func(*recorder.Recorder) engine.Config {
			return engine.Config{Clock: engineClock(),
				Feeds:  []engine.FeedConfig{listFeed("push", nil, "a", "r:b")},
				Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("p", &testProc{}))}}
		},
		want: map[string][]string{"p": {
			"1 START @1s",
			`2 INLINE push#1 n=1 @2s reads=[0s] "a"`,
			`3 OUTPUT out k=1 "a"`,
			`4 INLINE push#2 n=2 @3s reads=[1ms 2ms] "r:b"`,
			`5 OUTPUT out k=1 "r:b"`,
			`6 OUTPUT out k=2 "re:b"`,
			"7 END n=2 @4s",
		}},
	}, {
		// The first processor mutates its input: its own row is the
		// original (INDEXED: the journal's bytes); the second processor
		// received the mutated item, which no longer matches the journal:
		// INLINE with what it really saw.
		name: "mutated input",
		cfg: func(rec *recorder.Recorder) engine.Config {
			return engine.Config{Clock: engineClock(),
				Feeds: []engine.FeedConfig{listFeed("push", rec.Journal(),
					map[string]any{"v": 1}, map[string]any{"v": 2})},
				Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("m", mutate), pc("n", echo))}}
		},
		want: map[string][]string{
			"m": {"1 START @1s", "2 INDEXED push#1 n=0 @3s reads=[]", "3 INDEXED push#2 n=0 @5s reads=[]", "4 END n=2 @7s"},
			"n": {
				"1 START @2s",
				`2 INLINE push#1 n=1 @4s reads=[] {"seen":true,"v":1}`,
				`3 OUTPUT out k=1 {"seen":true,"v":1}`,
				`4 INLINE push#2 n=1 @6s reads=[] {"seen":true,"v":2}`,
				`5 OUTPUT out k=1 {"seen":true,"v":2}`,
				"6 END n=2 @8s",
			},
		},
		wantJournal: []string{`2 JOURNAL push#1 {"v":1}`, `3 JOURNAL push#2 {"v":2}`},
	}, {
		// Retries: one FAILED row per failed input (the first failure, its
		// instant and reason), no ordinary row for it, whether the retry
		// succeeded (flaky) or not (fail). The other processor of the group
		// handled every item once: ordinary rows.
		name: "failure then retry",
		cfg: func(*recorder.Recorder) engine.Config {
			return engine.Config{Clock: engineClock(),
				Feeds:  []engine.FeedConfig{listFeed("push", nil, "a", "flaky", "fail", "b")},
				Groups: []engine.GroupConfig{group("g", []string{"push"}, 3, pc("f", &testProc{}), pc("s", snapProc{}))}}
		},
		want: map[string][]string{
			"f": {
				"1 START @1s",
				`2 INLINE push#1 n=1 @3s reads=[0s] "a"`,
				`3 OUTPUT out k=1 "a"`,
				"4 FAILED push#2 @6s failed on purpose: flaky attempt 1",
				"5 FAILED push#3 @9s failed on purpose: fail",
				`6 INLINE push#4 n=1 @11s reads=[2ms] "b"`,
				`7 OUTPUT out k=1 "b"`,
				"8 END n=2 @13s",
			},
			"s": {
				`1 START @2s {"state":1}`,
				`2 INLINE push#1 n=0 @4s reads=[] "a"`,
				`3 INLINE push#2 n=0 @7s reads=[] "flaky"`,
				`4 INLINE push#3 n=0 @10s reads=[] "fail"`,
				`5 INLINE push#4 n=0 @12s reads=[] "b"`,
				"6 END n=4 @14s",
			},
		},
	}, {
		// A completion callback that fails once (and succeeds on its
		// retry) adds a FAILED row to its own processor's stream after
		// the input's rows, which were written before the completions
		// ran; the other processor's input is ordinary.
		name: "completion failure",
		cfg: func(*recorder.Recorder) engine.Config {
			return engine.Config{Clock: engineClock(),
				Feeds:  []engine.FeedConfig{logFeed("log", nil, "w", "x", "y")},
				Groups: []engine.GroupConfig{group("g", []string{"log"}, 2, pc("c", &completer{}), pc("s", snapProc{}))}}
		},
		want: map[string][]string{
			"c": {
				"1 START @1s",
				`2 DELIVERY log#1 epoch=1 key="" off=1 attempt=0`,
				`3 INLINE log#1 n=1 @3s reads=[] "w"`,
				`4 OUTPUT out k=1 "w"`,
				`5 DELIVERY log#2 epoch=1 key="" off=2 attempt=0`,
				`6 INLINE log#2 n=1 @5s reads=[] "x"`,
				`7 OUTPUT out k=1 "x"`,
				"8 FAILED log#2 @7s completion: failed on purpose: completion of x",
				`9 DELIVERY log#3 epoch=1 key="" off=3 attempt=0`,
				`10 INLINE log#3 n=1 @8s reads=[] "y"`,
				`11 OUTPUT out k=1 "y"`,
				"12 END n=3 @10s",
			},
			"s": {
				`1 START @2s {"state":1}`,
				`2 DELIVERY log#1 epoch=1 key="" off=1 attempt=0`,
				`3 INLINE log#1 n=0 @4s reads=[] "w"`,
				`4 DELIVERY log#2 epoch=1 key="" off=2 attempt=0`,
				`5 INLINE log#2 n=0 @6s reads=[] "x"`,
				`6 DELIVERY log#3 epoch=1 key="" off=3 attempt=0`,
				`7 INLINE log#3 n=0 @9s reads=[] "y"`,
				"8 END n=3 @11s",
			},
		},
	}, {
		// A failed timer is a FAILED row naming the timer.
		name: "failed timer",
		cfg: func(*recorder.Recorder) engine.Config {
			return engine.Config{Clock: engineClock(),
				Feeds:  []engine.FeedConfig{listFeed("push", nil, "tick")},
				Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("p", &testProc{failTime: true}))}}
		},
		want: map[string][]string{"p": {
			"1 START @1s",
			`2 INLINE push#1 n=1 @2s reads=[0s] "tick"`,
			`3 OUTPUT out k=1 "tick"`,
			"4 FAILED #1 @3s timer 1: failed on purpose: timer",
			"5 END n=1 @4s",
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &fakeWriter{}
			opts := stepOpts()
			opts.Apps = map[string]string{} // META lists the streams: one per processor
			for p := range tt.want {
				opts.Apps[p] = p
			}
			rec, _ := run(t, w, opts, tt.cfg)
			if err := rec.Err(); err != nil {
				t.Fatalf("Err() = %v", err)
			}
			for p, want := range tt.want {
				if diff := cmp.Diff(want, describeAll(w.stream(p))); diff != "" {
					t.Errorf("stream %q (-want +got):\n%s", p, diff)
				}
			}
			var journal []string
			for _, e := range w.rows() {
				if e.Kind == store.KindJournal {
					journal = append(journal, describe(e))
				}
			}
			if diff := cmp.Diff(tt.wantJournal, journal); diff != "" {
				t.Errorf("journal (-want +got):\n%s", diff)
			}
			if got := problems(w.rows()); len(got) != 0 {
				t.Errorf("integrity problems: %v", got)
			}
			if w.concurrent.Load() {
				t.Error("Append called concurrently")
			}
		})
	}
}

// TestMeta: the first row is META, with the creation instant, the apps and
// the recorder's options; New writes nothing (the first write carries it),
// and Close writes it when nothing else did.
func TestMeta(t *testing.T) {
	tests := []struct {
		name string
		opts recorder.Options
		want map[string]string
	}{
		{"default", recorder.Options{}, map[string]string{"codec": "json", "durability": "write"}},
		{"sync every", recorder.Options{SyncEvery: 100}, map[string]string{"codec": "json", "durability": "fsync", "syncEvery": "100"}},
		{"sync interval", recorder.Options{SyncInterval: time.Second},
			map[string]string{"codec": "json", "durability": "fsync", "syncInterval": "1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &syncWriter{}
			tt.opts.Clock = core.NewStepClock(t0, time.Second)
			tt.opts.Apps = map[string]string{"p": "ledger"}
			rec, err := recorder.New(w, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if rows := w.rows(); len(rows) != 0 {
				t.Fatalf("New wrote %d rows, want none", len(rows))
			}
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			rows := w.rows()
			if len(rows) != 1 {
				t.Fatalf("got %d rows, want 1", len(rows))
			}
			m, err := store.DecodeMeta(rows[0])
			if err != nil {
				t.Fatal(err)
			}
			want := store.Meta{Format: store.Format, Created: t0, Apps: map[string]string{"p": "ledger"}, Options: tt.want,
				Streams: []string{"p"}}
			if diff := cmp.Diff(want, m); diff != "" {
				t.Errorf("meta (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewErrors: options New refuses.
func TestNewErrors(t *testing.T) {
	w := &fakeWriter{fail: func([]store.Entry) error { return errFail }}
	rec, err := recorder.New(w, recorder.Options{})
	if err != nil {
		t.Fatalf("New: %v: it writes nothing", err)
	}
	if err := rec.Close(); !errors.Is(err, errFail) {
		t.Errorf("META write failing: Close() = %v, want errFail", err)
	}
}

// TestTwoFeedsTwoGroups: two feeds (one positioned and journalled, one
// push) into two groups, one of which subscribes to both, recorded
// concurrently. Every processor's stream holds each feed's items in order,
// exactly once, INDEXED exactly for the journalled feed, and the recording
// passes the integrity checks.
func TestTwoFeedsTwoGroups(t *testing.T) {
	const n = 300
	var logItems, pushItems []any
	for range n {
		logItems = append(logItems, "l")
		pushItems = append(pushItems, "r:p")
	}
	w := &fakeWriter{}
	rec, st := run(t, w, recorder.Options{Apps: map[string]string{"a": "a", "b": "b", "c": "c"}}, func(rec *recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds: []engine.FeedConfig{logFeed("log", rec.Journal(), logItems...), listFeed("push", nil, pushItems...)},
			Groups: []engine.GroupConfig{
				group("both", []string{"log", "push"}, 1, pc("a", &testProc{}), pc("b", &testProc{})),
				group("logonly", []string{"log"}, 1, pc("c", &testProc{})),
			}}
	})
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	if !st.Lossless {
		t.Fatalf("run not lossless: %+v", st)
	}
	if got := problems(w.rows()); len(got) != 0 {
		t.Fatalf("integrity problems: %v", got)
	}
	type count struct{ Indexed, Inline, Delivery, Outputs int }
	want := map[string]map[string]count{
		"a": {"log": {Indexed: n, Delivery: n, Outputs: n}, "push": {Inline: n, Outputs: 2 * n}},
		"b": {"log": {Indexed: n, Delivery: n, Outputs: n}, "push": {Inline: n, Outputs: 2 * n}},
		"c": {"log": {Indexed: n, Delivery: n, Outputs: n}},
	}
	for p, wantc := range want {
		got := map[string]count{}
		next := map[string]int64{}
		cur := ""
		for _, e := range w.stream(p) {
			switch e.Kind {
			case store.KindDelivery:
				c := got[e.Source]
				c.Delivery++
				got[e.Source] = c
			case store.KindIndexed, store.KindInline:
				c := got[e.Source]
				if e.Kind == store.KindIndexed {
					c.Indexed++
				} else {
					c.Inline++
				}
				got[e.Source] = c
				if next[e.Source]++; e.Seq != next[e.Source] {
					t.Errorf("%s: %s seq %d, want %d", p, e.Source, e.Seq, next[e.Source])
				}
				cur = e.Source
			case store.KindOutput:
				c := got[cur]
				c.Outputs++
				got[cur] = c
			}
		}
		if diff := cmp.Diff(wantc, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", p, diff)
		}
	}
}

// TestDropsExact: a processor blocked on an item while its DROP queue of
// one slot overflows. The DROPPED rows sit exactly where the items were
// lost, in every processor of the group, with exact counts and sequence
// ranges, and their counts add up to the feed's dropped status.
func TestDropsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		gate := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			if ev == 1 || ev == 11 {
				entered <- struct{}{}
				<-release
			}
			return nil
		})
		w := &fakeWriter{}
		rec, err := recorder.New(w, recorder.Options{Apps: map[string]string{"s": "s", "t": "t"}})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{
			Feeds:    []engine.FeedConfig{{Name: "push", Policy: engine.DropAfterSpin(0), QueueSize: 1}},
			Groups:   []engine.GroupConfig{group("g", []string{"push"}, 1, pc("s", gate), pc("t", snapProc{}))},
			Observer: rec.Observer(), Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		f := e.Feed("push")
		publish := func(from, to int) {
			for i := from; i <= to; i++ {
				if err := f.Publish(ctx, i); err != nil {
					t.Fatal(err)
				}
			}
		}
		drained := func() {
			t.Helper()
			synctest.Wait()
			if !e.Status().Feeds[0].Drained {
				t.Fatal("the feed is not drained once every goroutine is blocked")
			}
		}
		publish(1, 1)
		<-entered
		publish(2, 10) // 2 queued, 3..10 lost
		release <- struct{}{}
		drained()
		publish(11, 11)
		<-entered
		publish(12, 14) // 12 queued, 13..14 lost
		release <- struct{}{}
		drained()
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"s", "t"} {
			var got []string
			var sum int64
			for _, r := range w.stream(p) {
				switch r.Kind {
				case store.KindInline:
					got = append(got, "in "+string(r.Payload))
				case store.KindDropped:
					var d struct {
						First, Last int64
						Reason      string
						Approximate bool
					}
					if err := json.Unmarshal([]byte(r.Detail), &d); err != nil {
						t.Fatalf("DROPPED detail %q: %v", r.Detail, err)
					}
					if d.Reason == "" || d.Approximate || d.First != r.Seq {
						t.Errorf("DROPPED %+v: detail %+v", r, d)
					}
					got = append(got, "dropped "+jsonString(d.First, d.Last, r.N))
					sum += r.N
				}
			}
			want := []string{"in 1", "in 2", "dropped [3,10,8]", "in 11", "in 12", "dropped [13,14,2]"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", p, diff)
			}
			if st := e.Status().Feeds[0]; sum != st.Dropped {
				t.Errorf("%s: sum of DROPPED n = %d, status dropped = %d", p, sum, st.Dropped)
			}
		}
		if got := problems(w.rows()); len(got) != 0 {
			t.Errorf("integrity problems: %v", got)
		}
	})
}

func jsonString(v ...any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDropsUnderLoad: a slow processor behind a small DROP queue loses
// items at random places. Every sequence number is accounted for exactly
// once in its stream, as an input or within a DROPPED range placed between
// the inputs around it, and the DROPPED counts add up to the status.
func TestDropsUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		items := make([]any, n)
		for i := range items {
			items[i] = i + 1
		}
		slow := core.ProcessorFunc(func(*core.Cycle, any) error {
			time.Sleep(20 * time.Microsecond) // the slow work, on the bubble's clock
			return nil
		})
		w := &fakeWriter{}
		rec, st := runIn(t, w, recorder.Options{Apps: map[string]string{"s": "s"}}, func(*recorder.Recorder) engine.Config {
			return engine.Config{
				Feeds:  []engine.FeedConfig{{Name: "push", Source: memsource.NewList(items...), Policy: engine.DropAfterSpin(0), QueueSize: 4}},
				Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("s", slow))},
			}
		})
		if err := rec.Err(); err != nil {
			t.Fatal(err)
		}
		dropped := st.Feeds[0].Dropped
		if dropped == 0 {
			t.Skip("no drop happened on this machine")
		}
		// Each seq is covered once, by an input or a DROPPED range.
		type event struct {
			dropped     bool
			first, last int64
		}
		var events []event
		var sum int64
		seen := make([]int, n+1)
		for _, r := range w.stream("s") {
			switch r.Kind {
			case store.KindInline:
				events = append(events, event{false, r.Seq, r.Seq})
				seen[r.Seq]++
			case store.KindDropped:
				if r.N < 1 {
					t.Fatalf("DROPPED of %d items", r.N)
				}
				events = append(events, event{true, r.Seq, r.Seq + r.N - 1})
				for q := r.Seq; q < r.Seq+r.N && q <= n; q++ {
					seen[q]++
				}
				sum += r.N
			}
		}
		for q := 1; q <= n; q++ {
			if seen[q] != 1 {
				t.Errorf("seq %d covered %d times, want once", q, seen[q])
			}
		}
		// Placement: a DROPPED range follows the inputs before it and precedes
		// those after it. Known engine race (see the recorder's report): the
		// group may take the item after a drop before the drop's mark is
		// visible, so a DROPPED row can come one input late; never more.
		for i, ev := range events {
			if !ev.dropped {
				continue
			}
			late, early := 0, 0
			for _, o := range events[:i] {
				if !o.dropped && o.first > ev.last {
					late++
				}
			}
			for _, o := range events[i+1:] {
				if !o.dropped && o.first < ev.first {
					early++
				}
			}
			switch {
			case early > 0 || late > 1:
				t.Errorf("DROPPED %d-%d: %d inputs after it precede it, %d inputs before it follow it", ev.first, ev.last, late, early)
			case late == 1:
				t.Logf("DROPPED %d-%d placed one input late (engine drop-mark race)", ev.first, ev.last)
			}
		}
		if sum != dropped {
			t.Errorf("sum of DROPPED n = %d, status dropped = %d", sum, dropped)
		}
		if got := problems(w.rows()); len(got) != 0 {
			t.Errorf("integrity problems: %v", got)
		}
	})
}

// TestAWriterFailureStopsOnlyThatGroup: the writer fails the rows of
// processor b from its 5th input on. b's recording stops (reported once,
// by the Logger, Err, Broken and Close), b's group stops taking items (the run is
// not lossless and says why), and a (another group) is recorded whole. The
// batch holding input 5 is lost whole: b's group dispatched exactly the
// inputs recorded before it.
func TestAWriterFailureStopsOnlyThatGroup(t *testing.T) {
	const n = 20
	items := make([]any, n)
	for i := range items {
		items[i] = "x"
	}
	var handledB int
	countB := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		handledB++
		c.Emit("out", ev)
		return nil
	})
	w := &fakeWriter{fail: func(rows []store.Entry) error {
		for _, e := range rows {
			if e.Processor == "b" && e.Kind.IsInput() && e.Seq >= 5 {
				return errFail
			}
		}
		return nil
	}}
	logs := &testutil.Logs{}
	rec, st := run(t, w, recorder.Options{Logger: logs.Logger()}, func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds: []engine.FeedConfig{listFeed("push", nil, items...)},
			Groups: []engine.GroupConfig{
				group("g1", []string{"push"}, 1, pc("a", &testProc{})),
				group("g2", []string{"push"}, 1, pc("b", countB)),
			}}
	})
	if st.Lossless || handledB < 5 {
		t.Errorf("live run: lossless %v, b handled %d items; want false, at least 5", st.Lossless, handledB)
	}
	if s := st.Feeds[0].Stalled; s == nil || !strings.Contains(*s, "consumer g2/push failed") {
		t.Errorf("stalled %v, want consumer g2/push failed", s)
	}
	if got := logs.Count(); got != 1 {
		t.Errorf("%d warnings logged, want 1", got)
	}
	err := rec.Err()
	var be *recorder.BrokenError
	if !errors.As(err, &be) || be.Processor != "b" || !errors.Is(err, errFail) {
		t.Errorf("Err() = %v, want a *BrokenError of b wrapping errFail", err)
	}
	broken := rec.Broken()
	if len(broken) != 1 || !errors.Is(broken["b"], errFail) {
		t.Errorf("Broken() = %v, want only b", broken)
	}
	if err := rec.Close(); !errors.Is(err, errFail) {
		t.Errorf("Close() = %v, want errFail", err)
	}
	kinds := func(p string) (inputs int, end bool) {
		for _, e := range w.stream(p) {
			inputs += btoi(e.Kind.IsInput())
			end = end || e.Kind == store.KindEnd
		}
		return
	}
	if in, end := kinds("a"); in != n || !end {
		t.Errorf("a: %d inputs, END %v; want %d, true", in, end, n)
	}
	var dispatchedB int64 = -1
	for _, sub := range st.Feeds[0].Subscribers {
		if strings.HasPrefix(sub.Queue, "g2") {
			dispatchedB = sub.Dispatched
		}
	}
	if in, end := kinds("b"); in >= 5 || int64(in) != dispatchedB || end {
		t.Errorf("b: %d inputs, END %v, %d dispatched; want fewer than 5 inputs, as many dispatched, no END", in, end, dispatchedB)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLineBreakNames: a processor, feed or sink name with a line break
// stops the recording of the processors it concerns, with an error
// wrapping store.ErrName, and fails their group (the run is not lossless);
// the processors of another group are recorded whole.
func TestLineBreakNames(t *testing.T) {
	sinkProc := func(sink string) core.Processor {
		return core.ProcessorFunc(func(c *core.Cycle, ev any) error { c.Emit(sink, ev); return nil })
	}
	tests := []struct {
		name       string
		feed       string
		procs      []engine.ProcessorConfig
		wantBroken []string
		wantWhole  []string
	}{
		{"processor", "in", []engine.ProcessorConfig{pc("bad\nname", snapProc{})}, []string{"bad\nname"}, []string{"ok"}},
		{"sink", "in", []engine.ProcessorConfig{pc("s", sinkProc("out\r"))}, []string{"s"}, []string{"ok"}},
		{"feed", "in\n", []engine.ProcessorConfig{pc("x", snapProc{}), pc("y", snapProc{})}, []string{"x", "y"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &fakeWriter{}
			rec, st := run(t, w, recorder.Options{}, func(rec *recorder.Recorder) engine.Config {
				groups := []engine.GroupConfig{group("g", []string{tt.feed}, 1, tt.procs...)}
				if tt.wantWhole != nil {
					groups = append(groups, group("h", []string{tt.feed}, 1, pc("ok", snapProc{})))
				}
				return engine.Config{
					Feeds:  []engine.FeedConfig{listFeed(tt.feed, rec.Journal(), "a", "b")},
					Groups: groups,
				}
			})
			if st.Lossless {
				t.Error("the run is lossless")
			}
			broken := rec.Broken()
			var got []string
			for p, err := range broken {
				got = append(got, p)
				if !errors.Is(err, store.ErrName) {
					t.Errorf("%q: %v, want store.ErrName", p, err)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.wantBroken, got); diff != "" {
				t.Errorf("broken (-want +got):\n%s", diff)
			}
			for _, p := range tt.wantWhole {
				s := w.stream(p)
				if len(s) == 0 || s[len(s)-1].Kind != store.KindEnd {
					t.Errorf("%s: stream %v has no END", p, describeAll(s))
				}
			}
			if !errors.Is(rec.Err(), store.ErrName) {
				t.Errorf("Err() = %v, want store.ErrName", rec.Err())
			}
		})
	}
}

// farClock reads year 10000 (which no store can hold) while far is set.
type farClock struct {
	far  *bool
	base core.Clock
}

func (c farClock) Now() time.Time {
	if *c.far {
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return c.base.Now()
}

// TestUnholdableRowBreaksOnlyItsProcessor: in one item's Append, the rows of
// one processor fail the store's validation (a clock reading outside years
// 0-9999); only that processor's recording stops, the other processor's rows
// of the same item are written, and the group takes no more items (the
// item is not dispatched: the run is not lossless).
func TestUnholdableRowBreaksOnlyItsProcessor(t *testing.T) {
	far := false // touched only on the group's goroutine
	odd := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		far = ev == "b"
		c.Now()
		far = false
		return nil
	})
	w := &fakeWriter{}
	rec, st := run(t, w, recorder.Options{}, func(*recorder.Recorder) engine.Config {
		return engine.Config{Clock: farClock{&far, core.SystemClock()},
			Feeds:  []engine.FeedConfig{listFeed("push", nil, "a", "b", "c")},
			Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("odd", odd), pc("ok", snapProc{}))},
		}
	})
	var fe *store.FieldError
	if err := rec.Broken()["odd"]; !errors.As(err, &fe) || fe.Field != "reads" {
		t.Errorf("odd broken with %v, want a *store.FieldError on reads", err)
	}
	if _, ok := rec.Broken()["ok"]; ok {
		t.Error("ok broken")
	}
	var got []string
	for _, e := range w.stream("ok") {
		got = append(got, string(e.Kind)+" "+string(e.Payload))
	}
	if st.Lossless || st.Feeds[0].Subscribers[0].Dispatched != 1 {
		t.Errorf("lossless %v, dispatched %d; want false, 1", st.Lossless, st.Feeds[0].Subscribers[0].Dispatched)
	}
	want := []string{`START {"state":1}`, `INLINE "a"`, `INLINE "b"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ok (-want +got):\n%s", diff)
	}
	var odds []string
	for _, e := range w.stream("odd") {
		odds = append(odds, string(e.Kind)+" "+string(e.Payload))
	}
	if diff := cmp.Diff([]string{"START ", `INLINE "a"`}, odds); diff != "" {
		t.Errorf("odd (-want +got):\n%s", diff)
	}
}

// TestProcessorsFilter: only the processors named are recorded.
func TestProcessorsFilter(t *testing.T) {
	w := &fakeWriter{}
	rec, _ := run(t, w, recorder.Options{Processors: []string{"q"}}, func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{listFeed("push", nil, "a")},
			Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("p", &testProc{}), pc("q", &testProc{}))},
		}
	})
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range w.rows() {
		got[e.Processor]++
	}
	want := map[string]int{"": 1, "q": 4} // META; START INLINE OUTPUT END
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows per processor (-want +got):\n%s", diff)
	}
}

// TestSync: SyncEvery syncs once at least that many rows are unsynced,
// SyncInterval syncs while rows wait, Close syncs the rest, and a failed
// sync stops every stream.
func TestSync(t *testing.T) {
	t.Run("every", func(t *testing.T) {
		w := &syncWriter{}
		rec, _ := run(t, w, recorder.Options{SyncEvery: 5}, func(*recorder.Recorder) engine.Config {
			return engine.Config{
				Feeds:  []engine.FeedConfig{listFeed("push", nil, "a", "b", "c", "d", "e", "f")},
				Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("p", &testProc{}))},
			}
		})
		if err := rec.Err(); err != nil {
			t.Fatal(err)
		}
		// META, START, 6 x (INLINE, OUTPUT), END = 15 rows; a sync after
		// each write (a batch of items) that brings the unsynced rows to 5
		// or more, then Close.
		synced := w.syncedAt()
		if len(synced) == 0 || synced[len(synced)-1] != 15 {
			t.Fatalf("rows written at each sync %v, want the last at 15 (Close)", synced)
		}
		last := 0
		for _, n := range synced[:len(synced)-1] {
			if n-last < 5 {
				t.Errorf("rows written at each sync %v: a sync after fewer than 5 new rows", synced)
			}
			last = n
		}
	})
	t.Run("interval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := &syncWriter{}
			rec, err := recorder.New(w, recorder.Options{SyncInterval: time.Millisecond, Apps: map[string]string{"p": "p"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := rec.Observer().Started("p", &testProc{}); err != nil { // the opening: META, START
				t.Fatal(err)
			}
			testutil.Advance(time.Millisecond) // one interval on the bubble's clock
			if got := w.syncedAt(); len(got) == 0 || got[0] != 2 {
				t.Errorf("syncs %v, want the META and START rows synced by the interval", got)
			}
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("failure", func(t *testing.T) {
		w := &syncWriter{syncErr: errFail}
		rec, _ := run(t, w, recorder.Options{SyncEvery: 1}, func(*recorder.Recorder) engine.Config {
			return engine.Config{
				Feeds: []engine.FeedConfig{listFeed("push", nil, "a", "b")},
				Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("p", &testProc{})),
					group("h", []string{"push"}, 1, pc("q", &testProc{}))},
			}
		})
		broken := rec.Broken()
		if len(broken) != 2 || !errors.Is(broken["p"], errFail) || !errors.Is(broken["q"], errFail) {
			t.Errorf("Broken() = %v, want p and q broken by the sync failure", broken)
		}
	})
}
