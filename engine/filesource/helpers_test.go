package filesource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// losses keeps the losses a group was told of (engine.Observer.Lost).
type losses struct {
	mu  sync.Mutex
	all []engine.SourceLoss
}

func (l *losses) observer() engine.Observer {
	return engine.Observer{Lost: func(_ string, sl engine.SourceLoss) {
		l.mu.Lock()
		l.all = append(l.all, sl)
		l.mu.Unlock()
	}}
}

// got returns the losses told so far.
func (l *losses) got() []engine.SourceLoss {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// lineLen is the length of a numbered test line with its "\n".
const lineLen = 12

func numbered(prefix string, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%s-%0*d\n", prefix, lineLen-2-len(prefix), i)
	}
	return b.String()
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t testing.TB, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// replaceFile puts content at path under a new inode (write a temporary
// file, rename it over the path).
func replaceFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".new"
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func input(t testing.TB, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.log")
	if content != "" {
		writeFile(t, p, content)
	}
	return p
}

func readPointer(t testing.TB, path string) Pointer {
	t.Helper()
	p, err := ReadPointer(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rec records what a processor handled. gate, if set, is called before a
// line is recorded and may block.
type rec struct {
	gate    func(line string)
	ignore  atomic.Bool // a "crashed" run: handle nothing more
	delay   time.Duration
	mu      sync.Mutex
	lines   []string
	ds      []core.Delivery
	handled atomic.Int64
}

func (r *rec) OnEvent(c *core.Cycle, ev any) error {
	s := ev.(string)
	if r.ignore.Load() {
		return nil
	}
	if r.gate != nil {
		r.gate(s)
		if r.ignore.Load() {
			return nil
		}
	}
	if r.delay > 0 {
		time.Sleep(r.delay) // a slow processor, on the bubble's clock
	}
	r.mu.Lock()
	r.lines = append(r.lines, s)
	if d := c.Delivery(); d != nil {
		r.ds = append(r.ds, *d)
	}
	r.mu.Unlock()
	r.handled.Add(1)
	return nil
}

func (r *rec) count() int { return int(r.handled.Load()) }

func (r *rec) got() ([]string, []core.Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...), append([]core.Delivery(nil), r.ds...)
}

// blockAt returns a processor gate that blocks on the line equal to at
// until g is opened.
func blockAt(at string, g *testutil.Gate) func(string) {
	return func(s string) {
		if s == at {
			g.Wait()
		}
	}
}

type setup struct {
	queue    int
	policy   engine.Policy
	drain    time.Duration
	procs    []*rec // one group per processor
	observer engine.Observer
}

type run struct {
	t   testing.TB
	e   *engine.Engine
	src *Source
	log *testutil.Logs
}

func (r *run) feed() engine.FeedStatus { return r.e.Status().Feeds[0] }

func (r *run) stop() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.e.Stop(ctx); err != nil {
		r.t.Fatal(err)
	}
}

// start runs an engine with one feed "in" from a source on path and one
// group per processor.
func start(t testing.TB, path string, opts Options, s setup) *run {
	t.Helper()
	lg := &testutil.Logs{}
	if opts.Logger == nil {
		opts.Logger = lg.Logger()
	}
	src, err := New(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return startSource(t, src, lg, s)
}

func startSource(t testing.TB, src *Source, lg *testutil.Logs, s setup) *run {
	t.Helper()
	if s.queue == 0 {
		s.queue = 1024
	}
	if len(s.procs) == 0 {
		s.procs = []*rec{{}}
	}
	cfg := engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "in", Source: src, QueueSize: s.queue, Policy: s.policy}},
		DrainTimeout: s.drain,
		Observer:     s.observer,
		Logger:       lg.Logger(),
	}
	for i, p := range s.procs {
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: fmt.Sprintf("g%d", i), Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: fmt.Sprintf("p%d", i), Processor: p}}})
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := &run{t: t, e: e, src: src, log: lg}
	t.Cleanup(func() {
		for _, p := range s.procs {
			p.ignore.Store(true)
		}
		e.Stop(context.Background())
	})
	return r
}

// settle waits until the engine is settled and the processors handled want
// lines each.
func (r *run) settle(want int, procs ...*rec) engine.Status {
	r.t.Helper()
	var st engine.Status
	testutil.AdvanceUntil(r.t, fmt.Sprintf("%d lines handled and settled", want), func() bool {
		for _, p := range procs {
			if p.count() < want {
				return false
			}
		}
		st = r.e.Status()
		return st.Settled
	})
	return st
}

// once runs a source to settled with one recording processor, then stops.
func once(t testing.TB, path string, opts Options, want int) (*rec, *run) {
	t.Helper()
	p := &rec{}
	r := start(t, path, opts, setup{procs: []*rec{p}})
	r.settle(want, p)
	r.stop()
	if n := p.count(); n != want {
		t.Fatalf("handled %d lines, want %d", n, want)
	}
	return p, r
}
