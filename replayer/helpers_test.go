package replayer_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

var (
	t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) // recorder clock
	e0 = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC) // engine clock
)

// builtins are the built-in apps (replayed without a state file).
func builtins() []core.App { return apps.All() }

// withApp returns apps with a replaced by the app of its name.
func withApp(apps []core.App, a core.App) []core.App {
	out := []core.App{a}
	for _, b := range apps {
		if b.Name != a.Name {
			out = append(out, b)
		}
	}
	return out
}

// run is one recorded engine run of the built-in apps over a memsource.Log
// feed "input" (positioned: offsets 1, 2, 3 ... under epoch 1).
type run struct {
	procs   []string          // app names, also the processors' names; default ledger
	journal bool              // journal the feed: INDEXED rows
	state   string            // the ledger's state file ("" in memory)
	options map[string]string // given to each app (a ledger with state gets only state)
	log     *memsource.Log
	w       store.Writer // default a new store.Memory
	queue   int
	// restore, if set, is the snapshot the ledger is restored from before
	// the run.
	restore []byte
	// workers, when more than 1, runs the group on that many key-ordered
	// workers (apps.Key), each with instances of its own (the ledger's
	// state file core.WorkerStream(state, w)), recorded as streams
	// core.WorkerStream(processor, w).
	workers int
	// recordOptions writes options in META as each stream's
	// (recorder.Options.AppOptions).
	recordOptions bool
}

// record runs r over lines (appended to r.log, or a new closed log) until
// the engine is settled, then stops it cleanly, and returns the recording.
// The run is inside a testing/synctest bubble: the run's timers are on the
// bubble's clock, and the run leaves no goroutine behind.
func (r run) record(t *testing.T, lines ...string) (w store.Writer) {
	t.Helper()
	done := false
	synctest.Test(t, func(t *testing.T) {
		w = r.recordIn(t, lines...)
		done = true
	})
	if !done { // the bubble's test failed and stopped: so does this one
		t.FailNow()
	}
	return w
}

// recordIn is record inside the caller's bubble.
func (r run) recordIn(t *testing.T, lines ...string) store.Writer {
	t.Helper()
	if len(r.procs) == 0 {
		r.procs = []string{apps.LedgerName}
	}
	if r.log == nil {
		r.log = memsource.NewLog()
		for _, l := range lines {
			r.log.Append(l)
		}
		r.log.Close()
	}
	if r.w == nil {
		r.w = store.NewMemory()
	}
	if r.queue == 0 {
		r.queue = 64
	}
	names := map[string]string{}
	var pcs []engine.ProcessorConfig
	for _, name := range r.procs {
		a, _ := core.FindApp(apps.All(), name)
		opts := r.options
		if name == apps.LedgerName && r.state != "" {
			opts = map[string]string{"state": r.state}
		}
		if r.workers > 1 {
			built := 0 // the engine builds worker 0's instance first, then 1 ...
			pcs = append(pcs, engine.ProcessorConfig{Name: name, New: func() (core.Processor, error) {
				o := opts
				if name == apps.LedgerName && r.state != "" {
					o = map[string]string{"state": core.WorkerStream(r.state, built)}
				}
				built++
				return a.Build(o)
			}})
			for w := range r.workers {
				names[core.WorkerStream(name, w)] = name
			}
			continue
		}
		p, err := a.Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.restore != nil {
			if err := p.(core.Snapshotter).Restore(r.restore); err != nil {
				t.Fatal(err)
			}
		}
		pcs = append(pcs, engine.ProcessorConfig{Name: name, Processor: p})
		names[name] = name
	}
	var appOpts map[string]map[string]string
	if r.recordOptions {
		appOpts = map[string]map[string]string{}
		for s := range names {
			appOpts[s] = r.options
		}
	}
	rec, err := recorder.New(r.w, recorder.Options{Clock: core.NewStepClock(t0, time.Second), Apps: names,
		AppOptions: appOpts, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	fc := engine.FeedConfig{Name: "input", Source: r.log.Source(), QueueSize: r.queue}
	if r.journal {
		fc.Journal = rec.Journal()
	}
	gc := engine.GroupConfig{Name: "g", Feeds: []string{"input"}, Processors: pcs}
	if r.workers > 1 {
		gc.Workers, gc.Order, gc.Key = r.workers, engine.OrderKey, apps.Key
	}
	e, err := engine.New(engine.Config{
		Clock:    core.NewStepClock(e0, time.Millisecond),
		Feeds:    []engine.FeedConfig{fc},
		Groups:   []engine.GroupConfig{gc},
		Observer: rec.Observer(),
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.RunSettled(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.w.Close(); err != nil {
		t.Fatal(err)
	}
	return r.w
}

// memory records into a store.Memory and returns it read-only.
func (r run) memory(t *testing.T, lines ...string) *store.Memory {
	t.Helper()
	return r.record(t, lines...).(*store.Memory).ReadOnly()
}

// rows returns every row of m in storage order.
func rows(t testing.TB, r store.Reader) []store.Entry {
	t.Helper()
	var out []store.Entry
	for e, err := range r.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// reopen holds rows in a read-only Memory, as a file holding them.
func reopen(t testing.TB, rows []store.Entry) *store.Memory {
	t.Helper()
	m, err := store.OpenMemory(rows...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// find returns the position in rows of the n-th (from 1) row of processor p
// matching kind, or fails.
func find(t testing.TB, rows []store.Entry, p string, kind store.Kind, n int) int {
	t.Helper()
	for i, e := range rows {
		if e.Processor == p && e.Kind == kind {
			if n--; n == 0 {
				return i
			}
		}
	}
	t.Fatalf("no %s row %d of processor %q", kind, n, p)
	return -1
}

// remove deletes rows[i:j] and renumbers the processor's later rows, so the
// stream stays gapless (the edit is invisible to the integrity checks, but
// for END's count when an input goes).
func remove(rows []store.Entry, i, j int) []store.Entry {
	p := rows[i].Processor
	n := int64(j - i)
	out := append(append([]store.Entry(nil), rows[:i]...), rows[j:]...)
	for k := i; k < len(out); k++ {
		if out[k].Processor == p {
			out[k].Index -= n
			if out[k].Kind == store.KindEnd {
				for _, e := range rows[i:j] {
					if e.Kind.IsInput() {
						out[k].N--
					}
				}
			}
		}
	}
	return out
}

// insert puts extra, rows of one processor, at rows[i] and numbers them
// after that processor's row before them, renumbering its later rows, so
// the stream stays gapless.
func insert(rows []store.Entry, i int, extra ...store.Entry) []store.Entry {
	p := extra[0].Processor
	idx := int64(0)
	for _, e := range rows[:i] {
		if e.Processor == p {
			idx = e.Index
		}
	}
	out := append(append(append([]store.Entry(nil), rows[:i]...), extra...), rows[i:]...)
	for k := i; k < len(out); k++ {
		if out[k].Processor == p {
			idx++
			out[k].Index = idx
		}
	}
	return out
}

func replay(t testing.TB, r store.Reader, opts replayer.Options) *replayer.Report {
	t.Helper()
	rep, err := replayer.Replay(context.Background(), r, builtins(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func text(t testing.TB, rep *replayer.Report) string {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// csvFile copies m into a new CSV recording and opens it.
func csvFile(t testing.TB, m store.Reader) store.Reader {
	t.Helper()
	return storetest.Reopen(t, storetest.CSV, filepath.Join(t.TempDir(), "r.csv"), m)
}
