package golden

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/atomicfile"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// The deterministic clocks and epoch of a golden recording.
var (
	// recorderStart is the first reading of the recorder's clock (META
	// creation, row instants), which steps by a second per reading.
	recorderStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// engineStart is the first reading of the cycles' clock (Cycle.Now),
	// which steps by a millisecond per reading.
	engineStart = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
)

// inputEpoch is the input file's epoch in every golden recording (instead
// of a hash of the file's inode, which differs on every machine).
const inputEpoch = 1

// inputFeed is the name of the feed the input lines come from.
const inputFeed = "input"

// stepTimeout bounds how long a recording waits for the engine to take the
// next step.
const stepTimeout = 30 * time.Second

// Update re-records every case of dir from its input.txt, with apps, and
// replaces its recordings, all of a case together (see updateCase): a
// killed update leaves either the old recordings or, with the new ones
// half moved into place, the folder ReadyDir, which Check reports and the
// next Update finishes. It holds a lock (flock) on dir while it runs: a
// second Update of dir fails at once with ErrBusy. The run is
// deterministic, so re-recording the same input with the same code gives
// the same bytes:
//
//   - the input is read with engine/filesource, strategy once-earliest,
//     under the fixed epoch 1 (inputEpoch), its feed named "input";
//   - the cycles' clock (Cycle.Now) is a core.StepClock from
//     2031-01-01T00:00:00Z stepping a millisecond per reading, the
//     recorder's another from 2030-01-01T00:00:00Z stepping a second;
//   - timers are due on a timer clock of their own that stands still and
//     jumps, when an item was handled and when a timer fired, to the
//     earliest pending timer's due time: every timer an item sets, and
//     every timer those set, fires in due order, each at its due time,
//     before the next item, whatever its delay, and no recording waits
//     for one; the last item's timers fire before the run ends. Timers
//     that keep setting timers (more than maxTimers, 10000, after one
//     item) fail the recording (ErrRecord);
//   - the source publishes a line only once the one before was handled
//     and every timer fired, so each input, and each timer, meets the
//     same state every time (a drop case differs: see Case.Drop);
//   - the rows are written in a canonical storage order: META, the JOURNAL
//     rows, then each processor's stream (a live run interleaves them as
//     its goroutines go; the rows themselves are the recorder's); the
//     recorder writes no COMMIT rows (recorder.RunConfig.NoCommits): when
//     a source commits depends on the timing of the run.
//
// A processor's app is the one of apps named by Case.App, built with
// Case.Options.
func Update(dir string, apps ...core.App) error {
	cs, err := Cases(dir)
	if err != nil {
		return err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	for _, c := range cs {
		if err := updateCase(c, apps); err != nil {
			return &CaseError{Case: c.Name, Err: err}
		}
		killpoint.Reach(killpoint.GoldenUpdate) // tests only: dormant unless armed
	}
	return nil
}

// updateCase re-records c. Its new recordings are written into a
// temporary folder inside the case folder (a stale one, left by a killed
// update, is removed first), fsynced, and the folder is renamed to ReadyDir
// (the commit point); then moveReady moves them into place.
func updateCase(c *Case, apps []core.App) error {
	app, err := c.app(apps)
	if err != nil {
		return err
	}
	input, err := os.ReadFile(filepath.Join(c.Dir, InputFile))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCase, err)
	}
	if err := moveReady(c); err != nil {
		return err
	}
	if err := removeStale(c.Dir); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(c.Dir, tempPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed to ReadyDir
	in := filepath.Join(tmp, InputFile)

	// One run, or two when the case restarts: run 2 reads the same file,
	// the rest of the input appended to it (the same position space), and
	// starts from run 1's snapshot.
	parts := [][]byte{input}
	if c.RestartAfter > 0 {
		first, rest := splitLines(input, c.RestartAfter)
		parts = [][]byte{first, rest}
	}
	var recs []*store.Memory
	var snap []byte
	for i, part := range parts {
		if err := appendFile(in, part); err != nil {
			return err
		}
		p, err := app.Build(c.Options)
		if err != nil {
			return err
		}
		if snap != nil {
			if err := p.(core.Snapshotter).Restore(snap); err != nil {
				return fmt.Errorf("run %d: restoring run %d's snapshot: %w", i+1, i, err)
			}
		}
		rec, err := recordRun(c, app, in, p)
		if err != nil {
			if len(parts) > 1 {
				err = fmt.Errorf("run %d: %w", i+1, err)
			}
			return err
		}
		recs = append(recs, rec)
		if i+1 < len(parts) {
			if snap, err = snapshot(p); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(in); err != nil {
		return err
	}
	for i, name := range c.recordings() {
		if err := writeCanonical(filepath.Join(tmp, name), recs[i]); err != nil {
			return err
		}
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		return err
	}
	killpoint.Reach(killpoint.GoldenRecorded) // tests only: dormant unless armed
	if err := os.Rename(tmp, filepath.Join(c.Dir, ReadyDir)); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(c.Dir); err != nil {
		return err
	}
	return moveReady(c)
}

// moveReady moves the recordings of the case folder's ReadyDir, if it has
// one, into place (each a rename over the old one), removes the
// recordings the case no longer has (restart_after changed), then
// ReadyDir. It finishes an update that was killed while moving them.
func moveReady(c *Case) error {
	ready := filepath.Join(c.Dir, ReadyDir)
	ents, err := os.ReadDir(ready)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Rename(filepath.Join(ready, e.Name()), filepath.Join(c.Dir, e.Name())); err != nil {
			return err
		}
		killpoint.Reach(killpoint.GoldenMoved) // tests only: dormant unless armed
	}
	for _, stale := range []string{Recording, "run1.csv", "run2.csv"} {
		if !slices.Contains(c.recordings(), stale) {
			if err := os.Remove(filepath.Join(c.Dir, stale)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if err := atomicfile.SyncDir(c.Dir); err != nil {
		return err
	}
	if err := os.Remove(ready); err != nil {
		return err
	}
	return atomicfile.SyncDir(c.Dir)
}

// removeStale removes what a killed update left in a case folder: its
// temporary folders, and the temporary files of older versions
// (.recording.csv.tmp).
func removeStale(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, tempPrefix) || (strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".csv.tmp")) {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// lockDir takes an exclusive flock on the folder dir, or fails at once
// with ErrBusy. The returned func releases it.
func lockDir(dir string) (func(), error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrBusy, dir)
		}
		return nil, fmt.Errorf("golden: locking %s: %w", dir, err)
	}
	return func() { d.Close() }, nil
}

// appendFile appends b to the file at path, creating it if need be.
func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// splitLines returns the first n lines of b (terminators included) and the
// rest.
func splitLines(b []byte, n int) (first, rest []byte) {
	i := 0
	for ; n > 0 && i < len(b); n-- {
		j := bytes.IndexAny(b[i:], "\r\n")
		if j < 0 {
			i = len(b)
			break
		}
		i += j + 1
		if b[i-1] == '\r' && i < len(b) && b[i] == '\n' {
			i++
		}
	}
	return b[:i], b[i:]
}

func snapshot(p core.Processor) ([]byte, error) {
	s, ok := p.(core.Snapshotter)
	if !ok {
		return nil, nil
	}
	b, err := s.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("run 1's snapshot: %w", err)
	}
	return b, nil
}

// recordRun runs one engine over the file in with processor p, an
// instance of app, and returns its recording.
func recordRun(c *Case, app core.App, in string, p core.Processor) (*store.Memory, error) {
	mem := store.NewMemory()
	quiet := slog.New(slog.DiscardHandler)
	src, err := filesource.New(in, filesource.Options{Read: filesource.OnceEarliest, Epoch: inputEpoch, Logger: quiet})
	if err != nil {
		return nil, err
	}
	g := newGate(c.Drop)
	var pol engine.Policy
	if c.Policy != "" {
		kind, _ := engine.ParsePolicyKind(c.Policy) // checked when the case was read
		switch kind {
		case engine.DropAfterSpinKind:
			pol = engine.DropAfterSpin(0)
		case engine.BlockKind:
			pol = engine.BlockWithDeadline(time.Second)
		case engine.PauseKind:
			pol = engine.Pause()
		}
	}
	if c.Drop {
		pol = engine.DropAfterSpin(0)
	}
	queue := c.QueueSize
	if queue == 0 {
		queue = 16
	}
	ctx := context.Background()
	run, err := recorder.Start(ctx, recorder.RunConfig{
		Store:         mem,
		Feed:          engine.FeedConfig{Name: inputFeed, Source: src, Policy: pol, QueueSize: queue, Journal: g},
		Journal:       c.Journal,
		Group:         "golden",
		Processors:    []recorder.Processor{{Name: c.processor(), App: app, Processor: wrap(p, g), Options: app.RecordedOptions(c.Options)}},
		Clock:         core.NewStepClock(engineStart, time.Millisecond),
		TimerClock:    g.clock,
		RecorderClock: core.NewStepClock(recorderStart, time.Second),
		Observer:      g.observer(),
		Logger:        quiet,
		NoCommits:     true, // when the source commits depends on the timing of the run
	})
	if err != nil {
		return nil, err
	}
	e := run.Engine()
	stop := func() error {
		stopErr, recErr := run.Stop(ctx)
		return errors.Join(stopErr, recErr, mem.Close())
	}
	if c.Drop {
		// The processor holds its first input until the source has read
		// (published or dropped) every line.
		atEnd := e.When(func(s engine.Status) bool {
			return slices.ContainsFunc(s.Feeds, func(f engine.FeedStatus) bool { return f.Feed == inputFeed && f.State == engine.StateEndOfStream })
		})
		if err := waitFor(ctx, atEnd); err != nil {
			g.release()
			return nil, errors.Join(fmt.Errorf("%w: the source did not reach the end of the input: %v", ErrRecord, err), stop())
		}
		g.release()
	}
	wctx, cancel := context.WithTimeout(ctx, stepTimeout)
	_, err = e.WaitSettled(wctx)
	cancel()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%w: the run did not settle: %v", ErrRecord, err), stop())
	}
	// The last item's timers fire before the run ends, as any other item's.
	g.waitTimers()
	if err := stop(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if err := g.failure(); err != nil {
		return nil, err
	}
	if ps := damage(mem.Problems()); len(ps) > 0 {
		return nil, fmt.Errorf("%w: the recording has problems: %v", ErrRecord, errors.Join(problemErrs(ps)...))
	}
	return mem.ReadOnly(), nil
}

// damage is the problems of ps but recorded failures (store.ProblemFailed):
// a case may record a failure on purpose (a fail line), and its replay
// stops there by design; anything else is a recording that cannot be kept.
func damage(ps []store.Problem) []store.Problem {
	var out []store.Problem
	for _, p := range ps {
		if p.Kind != store.ProblemFailed {
			out = append(out, p)
		}
	}
	return out
}

func problemErrs(ps []store.Problem) []error {
	errs := make([]error, len(ps))
	for i := range ps {
		errs[i] = &ps[i]
	}
	return errs
}

// waitFor waits until done is closed, ctx is done, or stepTimeout passed.
func waitFor(ctx context.Context, done <-chan struct{}) error {
	t := time.NewTimer(stepTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("timed out after %s", stepTimeout)
	}
}

// writeCanonical writes m's rows into a new CSV recording at path, in the
// canonical order (the rows of no processor, META, JOURNAL and STATE,
// in their order; then each processor's stream),
// and fsyncs it. path is new (in updateCase's temporary folder).
func writeCanonical(path string, m *store.Memory) error {
	var head []store.Entry
	streams := map[string][]store.Entry{}
	for e, err := range m.Rows() {
		if err != nil {
			return err
		}
		if e.Processor == "" { // META, JOURNAL and STATE rows, in their order
			head = append(head, e)
			continue
		}
		streams[e.Processor] = append(streams[e.Processor], e)
	}
	rows := head
	for _, p := range m.Processors() {
		rows = append(rows, streams[p]...)
	}
	w, err := csvstore.Create(path)
	if err != nil {
		return err
	}
	err = w.Append(rows...)
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("golden: writing %s: %w", path, err)
	}
	return nil
}

// gate makes a live run deterministic. As the feed's Journal it is called
// by the source for every line before the line is queued: it holds line
// k+1 until line k was dispatched (observer AfterDispatch) and every timer
// set so far fired (observers TimerSet and TimerFired). It owns the
// engine's timer clock, which stands still: between cycles (after an item's
// dispatch, after a timer) it jumps to the earliest pending timer's due
// time, so that timer fires next, whatever its delay, without waiting (see
// jump). In a drop case it holds line 2 until the processor has taken line
// 1, and the processor holds line 1 until released, so the queue fills and
// drops exactly.
type gate struct {
	drop bool

	mu         sync.Mutex
	cond       *sync.Cond
	dispatched int64
	pending    map[timerID]time.Time // timers set and not fired: their due times
	fired      int                   // timers fired since the last dispatch
	err        error

	clock    *core.StepClock // the timer clock: step 0, moved by jump alone
	started  chan struct{}   // drop: the processor took line 1
	released chan struct{}   // drop: the processor may go on
	once     sync.Once
	first    atomic.Bool
}

// timerID names a timer: its processor and number.
type timerID struct {
	processor string
	n         int
}

// maxTimers bounds how many timers may fire after one item before the next
// is dispatched (the item's timers, the timers they set, and so on): past
// it the recording fails, since timers that keep setting timers never all
// fire.
const maxTimers = 10000

func newGate(drop bool) *gate {
	g := &gate{drop: drop, pending: map[timerID]time.Time{}, clock: core.NewStepClock(engineStart, 0),
		started: make(chan struct{}), released: make(chan struct{})}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.released) }) }

func (g *gate) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *gate) fail(err error) {
	g.mu.Lock()
	g.failLocked(err)
	g.mu.Unlock()
}

func (g *gate) failLocked(err error) {
	if g.err == nil {
		g.err = err
	}
	g.cond.Broadcast()
}

// Append holds the line (the recorder journals it next, in a journalled
// case).
func (g *gate) Append(ctx context.Context, feed string, seq int64, item any) error {
	if g.drop {
		if seq == 2 {
			select {
			case <-g.started:
			case <-time.After(stepTimeout):
				g.fail(fmt.Errorf("%w: the processor never took line 1", ErrRecord))
			}
		}
	} else if !g.wait(func() bool { return g.dispatched >= seq-1 && len(g.pending) == 0 }) {
		g.fail(fmt.Errorf("%w: line %d waited %s for line %d and the timers before it", ErrRecord, seq, stepTimeout, seq-1))
	}
	return nil
}

// waitTimers waits until every timer set has fired.
func (g *gate) waitTimers() {
	if !g.wait(func() bool { return len(g.pending) == 0 }) {
		g.fail(fmt.Errorf("%w: the timers did not fire within %s", ErrRecord, stepTimeout))
	}
}

// wait waits until done (called with g.mu held) or the gate failed; false
// after stepTimeout.
func (g *gate) wait(done func() bool) bool {
	timedOut := false
	timer := time.AfterFunc(stepTimeout, func() {
		g.mu.Lock()
		timedOut = true
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer timer.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for !done() && g.err == nil {
		if timedOut {
			return false
		}
		g.cond.Wait()
	}
	return true
}

// jump moves the timer clock to the earliest pending timer's due time, if
// it is later than the clock, so the engine fires that timer next (g.mu
// held). It is called on the group's goroutine between cycles, so no
// cycle sees the clock move under it; a timer set in a timer's cycle is
// due from that timer's due time, as on a real clock. The next line is
// held while a timer is pending (and the engine fires due timers before it
// takes the next queued item), so every timer an item sets, and every
// timer those set, fires in due order before the next item.
func (g *gate) jump() {
	if g.err != nil || len(g.pending) == 0 {
		return
	}
	var next time.Time
	for _, due := range g.pending {
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	if now := g.clock.Now(); next.After(now) {
		g.clock.Advance(next.Sub(now))
	}
}

func (g *gate) observer() engine.Observer {
	return engine.Observer{
		AfterDispatch: func(string, *engine.Input) {
			g.mu.Lock()
			g.dispatched++
			g.fired = 0
			g.jump()
			g.cond.Broadcast()
			g.mu.Unlock()
		},
		TimerSet: func(processor string, n int, due time.Time) {
			g.mu.Lock()
			g.pending[timerID{processor, n}] = due
			g.mu.Unlock()
		},
		TimerFired: func(processor string, t *core.Trace) {
			g.mu.Lock()
			delete(g.pending, timerID{processor, t.Timer})
			if g.fired++; g.fired > maxTimers {
				g.failLocked(fmt.Errorf("%w: %d timers fired after item %d and they keep setting timers", ErrRecord, maxTimers, g.dispatched))
			}
			g.jump()
			g.cond.Broadcast()
			g.mu.Unlock()
		},
	}
}

// wrapped is a processor run under a gate: in a drop case, it holds its
// first input until released. It forwards Snapshotter and TimerHandler to
// the processor.
type wrapped struct {
	p core.Processor
	g *gate
}

func wrap(p core.Processor, g *gate) core.Processor { return &wrapped{p: p, g: g} }

func (w *wrapped) OnEvent(c *core.Cycle, ev any) error {
	if w.g.drop && !w.g.first.Swap(true) {
		close(w.g.started)
		<-w.g.released
	}
	return w.p.OnEvent(c, ev)
}

func (w *wrapped) OnTimer(c *core.Cycle, timer int) error {
	th, ok := w.p.(core.TimerHandler)
	if !ok {
		return fmt.Errorf("golden: %w: processor set timer %d", core.ErrNoTimerHandler, timer)
	}
	return th.OnTimer(c, timer)
}

func (w *wrapped) Snapshot() ([]byte, error) {
	if s, ok := w.p.(core.Snapshotter); ok {
		return s.Snapshot()
	}
	return nil, nil
}

func (w *wrapped) Restore(b []byte) error {
	if s, ok := w.p.(core.Snapshotter); ok {
		return s.Restore(b)
	}
	return errors.New("golden: the processor cannot restore a snapshot")
}
