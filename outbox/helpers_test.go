package outbox_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
	_ "github.com/blackbox-audit/blackbox/store/csvstore" // the recordings' backend, as cmd/cli imports it
)

// t0 is the first instant of the tests' clocks.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.DiscardHandler)

// out is what the twice app emits: item n's k-th output.
type out struct {
	N int `json:"n"`
	K int `json:"k"`
}

// twice is the tests' app: item n (an int, or a line holding one) gives
// {"n":n,"k":1}, and an even n {"n":n,"k":2} too: one or two outputs per
// input.
var twice = core.App{Name: "twice"}

func twiceProcessor() core.Processor {
	return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		n, ok := ev.(int)
		if !ok {
			var err error
			if n, err = strconv.Atoi(ev.(string)); err != nil {
				return err
			}
		}
		c.Emit("out", out{n, 1})
		if n%2 == 0 {
			c.Emit("out", out{n, 2})
		}
		return nil
	})
}

func newTwice() (core.Processor, error) { return twiceProcessor(), nil }

// outputs is the JSON lines twice emits for the items from through to,
// in order.
func outputs(from, to int) []string {
	var l []string
	for n := from; n <= to; n++ {
		l = append(l, fmt.Sprintf(`{"n":%d,"k":1}`, n))
		if n%2 == 0 {
			l = append(l, fmt.Sprintf(`{"n":%d,"k":2}`, n))
		}
	}
	return l
}

// count is how many outputs twice emits for the items from through to.
func count(from, to int) int64 { return int64(len(outputs(from, to))) }

// tape is a re-readable log of items at offsets 1, 2, 3 ... (epoch 1) and
// the offset its source last committed: a source over it resumes there, as
// a file source resumes at its pointer. A test sets the committed offset
// back to play a crash that came before the source's commit. Safe for
// concurrent use.
type tape struct {
	mu        sync.Mutex
	items     []any
	committed int64
	closed    bool
}

func newTape(items ...any) *tape { return &tape{items: items} }

// ints is 1, ..., n.
func ints(from, to int) []any {
	var l []any
	for n := from; n <= to; n++ {
		l = append(l, n)
	}
	return l
}

func (tp *tape) add(items ...any) {
	tp.mu.Lock()
	tp.items = append(tp.items, items...)
	tp.mu.Unlock()
}

// setClosed bounds the tape (a source ends once it published everything)
// or not (it waits for more).
func (tp *tape) setClosed(closed bool) {
	tp.mu.Lock()
	tp.closed = closed
	tp.mu.Unlock()
}

func (tp *tape) setCommitted(off int64) {
	tp.mu.Lock()
	tp.committed = off
	tp.mu.Unlock()
}

func (tp *tape) getCommitted() int64 {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.committed
}

// source is a source over the tape from its committed offset: it polls
// acknowledgements every 200µs (as memsource.LogSource does) and commits.
func (tp *tape) source() *tapeSource { return &tapeSource{tp: tp} }

type tapeSource struct {
	tp            *tape
	next, pending int64
}

func (s *tapeSource) DefaultPolicy() engine.Policy { return engine.Pause() }

func (s *tapeSource) Acknowledged(_, _ int64, pos core.Position) {
	s.pending = max(s.pending, pos.Offset)
}

func (s *tapeSource) Commit() error {
	s.tp.mu.Lock()
	s.tp.committed = max(s.tp.committed, s.pending)
	s.tp.mu.Unlock()
	return nil
}

func (s *tapeSource) Run(ctx context.Context, f *engine.Intake) error {
	tp := s.tp
	tp.mu.Lock()
	s.next, s.pending = tp.committed, tp.committed
	tp.mu.Unlock()
	f.SetEpoch(1)
	f.SetCommitter(s)
	t := time.NewTicker(200 * time.Microsecond)
	defer t.Stop()
	for {
		if _, err := f.PollAcks(); err != nil {
			return err
		}
		tp.mu.Lock()
		items, closed := tp.items, tp.closed
		tp.mu.Unlock()
		for s.next < int64(len(items)) && f.TryPublish(items[s.next], core.Position{Offset: s.next + 1}) {
			s.next++
		}
		switch {
		case s.next < int64(len(items)):
			f.SetState(engine.StateBehind, "")
		case closed:
			f.SetBounded(true)
			f.SetState(engine.StateEndOfStream, "")
		default:
			f.SetState(engine.StateCaughtUp, "")
		}
		select {
		case <-ctx.Done():
			_, err := f.PollAcks()
			return err
		case <-t.C:
		}
	}
}

// bench holds a test's files: the recordings of its runs (run1.csv,
// run2.csv ...), the out file and its marks.
type bench struct {
	t     *testing.T
	dir   string
	runs  int
	out   string // the file sink's file
	marks string
	tape  *tape // the source of the runs that share one
	// beforeClose is the marks file as the last run left it right before
	// its outbox's clean Close rewrote it as a header, every batch
	// delivered (crashBeforeClose puts it back).
	beforeClose []byte
}

// crashBeforeClose puts back the marks file as the last run left it right
// before its outbox's clean Close rewrote the marks as a header alone: what
// a crash at that moment leaves.
func (b *bench) crashBeforeClose() {
	b.t.Helper()
	if err := os.WriteFile(b.marks, b.beforeClose, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func newBench(t *testing.T) *bench {
	dir := t.TempDir()
	return &bench{t: t, dir: dir, out: filepath.Join(dir, "out.jsonl"), marks: filepath.Join(dir, "out.jsonl.outbox")}
}

// recording is the path of run i's recording (from 1).
func (b *bench) recording(i int) string { return filepath.Join(b.dir, fmt.Sprintf("run%d.csv", i)) }

// openFile opens the out file and its outbox (recovering).
func (b *bench) openFile(format string) (*outbox.File, *outbox.Outbox, error) {
	b.t.Helper()
	f, err := outbox.OpenFile(b.out, format, false)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { f.Close() })
	box, err := outbox.Open(outbox.Config{Marks: b.marks, Sink: f, Logger: quiet})
	return f, box, err
}

// mustOpenFile is openFile failing the test on an error.
func (b *bench) mustOpenFile(format string) (*outbox.File, *outbox.Outbox) {
	b.t.Helper()
	f, box, err := b.openFile(format)
	if err != nil {
		b.t.Fatalf("outbox.Open: %v", err)
	}
	return f, box
}

// open opens an outbox delivering to sink (recovering).
func (b *bench) open(sink core.EffectSink) (*outbox.Outbox, error) {
	return outbox.Open(outbox.Config{Marks: b.marks, Sink: sink, Logger: quiet})
}

func (b *bench) mustOpen(sink core.EffectSink) *outbox.Outbox {
	b.t.Helper()
	box, err := b.open(sink)
	if err != nil {
		b.t.Fatalf("outbox.Open: %v", err)
	}
	return box
}

// live is a run under way.
type live struct {
	b     *bench
	path  string
	store *store.Recording
	run   *recorder.Run
	box   *outbox.Outbox
}

// runConfig is what a test may change in a run's recorder.RunConfig.
type runConfig struct {
	Source   engine.Source
	Journal  bool
	Feed     func(*engine.FeedConfig)
	Store    func(store.Writer) store.Writer
	Observer engine.Observer
	Workers  int
	// Processor, if set, is the run's processor instead of twice's.
	Processor core.Processor
	// Codec, if set, is the recorder's codec instead of JSON.
	Codec recorder.Codec
}

// start starts the next run (its recording run<i>.csv, META created at
// t0 + i hours) of the twice app, delivering through box.
func (b *bench) start(box *outbox.Outbox, rc runConfig) *live {
	b.t.Helper()
	b.runs++
	path := b.recording(b.runs)
	rec, err := store.Create(path, "")
	if err != nil {
		b.t.Fatal(err)
	}
	var w store.Writer = rec
	if rc.Store != nil {
		w = rc.Store(rec)
	}
	fc := engine.FeedConfig{Name: "in", Source: rc.Source, QueueSize: 16}
	if rc.Feed != nil {
		rc.Feed(&fc)
	}
	start := t0.Add(time.Duration(b.runs) * time.Hour)
	proc := rc.Processor
	if proc == nil {
		proc = twiceProcessor()
	}
	run, err := recorder.Start(context.Background(), recorder.RunConfig{
		Store:         w,
		Feed:          fc,
		Journal:       rc.Journal,
		Processors:    []recorder.Processor{{Name: "twice", App: twice, Processor: proc, New: newTwice}},
		Workers:       rc.Workers,
		Clock:         core.NewStepClock(start, time.Millisecond),
		RecorderClock: core.NewStepClock(start, time.Second),
		Outbox:        box,
		Path:          path,
		Observer:      rc.Observer,
		Codec:         rc.Codec,
		Logger:        quiet,
	})
	if err != nil {
		rec.Close()
		b.t.Fatalf("recorder.Start: %v", err)
	}
	return &live{b: b, path: path, store: rec, run: run, box: box}
}

// settle waits until the run is settled (its bounded source ended and
// everything it read was processed and committed), or failed.
func (l *live) settle() {
	l.b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var failed <-chan struct{}
	if l.box != nil {
		failed = l.box.Failed()
	}
	if err := l.run.Wait(ctx, recorder.WaitConfig{Stop: failed}); err != nil {
		l.b.t.Fatalf("wait: %v", err)
	}
	if ctx.Err() != nil {
		l.b.t.Fatal("the run did not settle within a minute")
	}
}

// stop stops the run, closes its recording, then its outbox; it returns
// the outbox's Close error and status.
func (l *live) stop() (outbox.Status, error) {
	l.b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stopErr, recErr := l.run.Stop(ctx)
	if stopErr != nil || recErr != nil {
		l.b.t.Fatalf("stop: %v; recording: %v", stopErr, recErr)
	}
	if err := l.store.Close(); err != nil {
		l.b.t.Fatal(err)
	}
	if l.box == nil {
		return outbox.Status{}, nil
	}
	l.b.beforeClose, _ = os.ReadFile(l.b.marks)
	outbox.SetBeforeCompact(l.box, func() { l.b.beforeClose, _ = os.ReadFile(l.b.marks) })
	err := l.box.Close()
	return l.box.Status(), err
}

// runAll runs box over tp's items until the run settles, then stops it,
// failing the test if the outbox failed.
func (b *bench) runAll(box *outbox.Outbox, tp *tape) outbox.Status {
	b.t.Helper()
	tp.setClosed(true)
	l := b.start(box, runConfig{Source: tp.source()})
	l.settle()
	st, err := l.stop()
	if err != nil {
		b.t.Fatalf("outbox: %v", err)
	}
	return st
}

// lines is the file's lines.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s ends in a line without its line break: %q", path, b)
	}
	var l []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l = append(l, sc.Text())
	}
	return l
}

// markLine is a line of the marks file as docs/FORMAT.md documents it:
// the header, or a line of one kind.
type markLine struct {
	Header *struct {
		Batch int64 `json:"batch"`
		Size  int64 `json:"size"`
	}
	Batch *struct {
		N    int64 `json:"n"`
		Size int64 `json:"size"`
		To   []struct {
			Run    int    `json:"run"`
			Stream string `json:"stream"`
			Feed   string `json:"feed"`
			Key    string `json:"key"`
			Free   bool   `json:"free"`
			Row    int64  `json:"row"`
		} `json:"to"`
	}
	Commit *struct {
		Offset int64 `json:"offset"`
	}
	raw []byte
}

// readMarkLines reads the marks file as lines.
func readMarkLines(t *testing.T, path string) []markLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ls []markLine
	for l := range bytes.Lines(b) {
		m := markLine{raw: l}
		var kinds map[string]json.RawMessage
		err := json.Unmarshal(l, &kinds)
		switch {
		case err != nil:
		case len(ls) == 0:
			err = json.Unmarshal(l, &m.Header)
		case kinds["batch"] != nil:
			err = json.Unmarshal(kinds["batch"], &m.Batch)
		case kinds["commit"] != nil:
			err = json.Unmarshal(kinds["commit"], &m.Commit)
		}
		if err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		ls = append(ls, m)
	}
	return ls
}

// writeMarkLines writes ls as the marks file.
func writeMarkLines(t *testing.T, path string, ls []markLine) {
	t.Helper()
	var b []byte
	for _, l := range ls {
		b = append(b, l.raw...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// batches is the batch marks of ls.
func batches(ls []markLine) []markLine {
	return slices.DeleteFunc(slices.Clone(ls), func(l markLine) bool { return l.Batch == nil })
}

// truncate cuts the file at path to size bytes.
func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// notifyWriter passes the file's writes through, telling each on wrote;
// from the write numbered failFrom (from 1; 0: none) on it writes half of
// what it is given, then fails, as a full disk does.
type notifyWriter struct {
	w        io.Writer
	mu       sync.Mutex
	writes   int
	failFrom int
	wrote    chan int
}

var errDiskFull = fmt.Errorf("test: no space left on device")

func (n *notifyWriter) Write(b []byte) (int, error) {
	n.mu.Lock()
	n.writes++
	i := n.writes
	n.mu.Unlock()
	defer func() {
		if n.wrote != nil {
			n.wrote <- i
		}
	}()
	if n.failFrom > 0 && i >= n.failFrom {
		w, _ := n.w.Write(b[:len(b)/2])
		return w, errDiskFull
	}
	return n.w.Write(b)
}

// begun opens an outbox delivering to sink, its marks in dir, and begins a
// run recorded at dir/run.csv (created t0) whose every feed commits: the
// setup of the tests that hand Written their rows themselves.
func begun(t *testing.T, dir string, sink core.EffectSink) *outbox.Outbox {
	t.Helper()
	box, err := outbox.Open(outbox.Config{Marks: filepath.Join(dir, "out.outbox"), Sink: sink, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Begin(outbox.Run{Path: filepath.Join(dir, "run.csv"), Created: t0,
		Commits: func(string) bool { return true }}); err != nil {
		t.Fatal(err)
	}
	return box
}
