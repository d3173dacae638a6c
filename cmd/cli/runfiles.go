package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/outbox/kafkasink"
)

// runPlan is what `run` decided before any work, every check passed: the
// app, the order of its workers (resolved: "" on one worker without
// --order), what to do with the state's layout record and whether an old
// recording is replaced (--force). A plain value.
type runPlan struct {
	app      core.App
	order    engine.Order
	layout   stateLayout
	layoutDo layoutAction
	replace  bool
}

// planRun checks cfg before its outputs are locked: the app, the order of
// its workers (and --state with them: checkStateOrder) and every path
// (checkRunPaths). It completes cfg: the default --pointer, --option
// state=FILE taken as --state FILE, the default --out-format.
func (c *CLI) planRun(cfg *recordConfig) (p runPlan, err error) {
	if p.app, err = c.app(cfg.app); err != nil {
		return p, err
	}
	if cfg.pointer == "" && !cfg.kafka.on() {
		cfg.pointer = cfg.input + ".ptr"
	}
	if err := takeStateOption(cfg); err != nil {
		return p, err
	}
	var key func(any) string
	if cfg.workers > 1 || cfg.order == engine.OrderKey {
		if key, err = p.app.KeyFunc(cfg.options); err != nil {
			return p, usagef("--workers %d: %v", cfg.workers, err)
		}
	}
	p.order = cfg.order
	if cfg.workers > 1 && p.order == "" {
		p.order = engine.OrderNone
		if key != nil {
			p.order = engine.OrderKey
		}
	}
	if cfg.out != "" && cfg.outFormat == "" {
		cfg.outFormat = outbox.FormatValue // a run not from the command line (crashtest's clean run)
	}
	if p.order == engine.OrderKey && key == nil {
		return p, usagef("--order key: app %s has no key function", cfg.app)
	}
	if err := checkStateOrder(*cfg, p.order); err != nil {
		return p, err
	}
	return p, checkRunPaths(*cfg)
}

// checkLocked checks what only the outputs' locks make sure of: the
// pointer is free, the state's layout is this run's (checkStateLayout),
// the store can be created or replaced (checkReplaceable).
func (p *runPlan) checkLocked(cfg recordConfig) (err error) {
	if cfg.read == filesource.Committed && !cfg.kafka.on() {
		if err := checkPointerFree(cfg.pointer); err != nil {
			return err
		}
	}
	p.layout = runLayout(cfg.workers, p.order)
	if p.layoutDo, err = checkStateLayout(cfg.state, p.layout); err != nil {
		return err
	}
	p.replace, err = checkReplaceable(cfg.store, cfg.force)
	return err
}

// runFiles are the files a run writes: its recording (store, which counts
// the rows written) and --out or --sink with its outbox (none without
// either). Its methods are called by the run's goroutine only.
type runFiles struct {
	store *writer
	out   *outbox.File
	kafka *kafkasink.Sink // --sink's producer
	box   *outbox.Outbox  // --out's or --sink's outbox
	// boxStatus is the outbox's status once closed.
	boxStatus *outbox.Status
	undo      []func() // removes what the run created, in reverse
}

// createRunFiles makes the files of a run once every check passed, before
// the engine runs: it takes --out's or --sink's outbox (out, opened by
// openOutbox or openSinkOutbox; nil without either), removes the old recording (plan.replace), creates
// the store and writes or removes the state's layout record
// (applyLayout). On an error it removes what it created, --out and its
// marks included (runOutbox.remove), so that no half-made file stays
// behind.
func createRunFiles(cfg recordConfig, plan runPlan, out *runOutbox) (_ *runFiles, err error) {
	f := &runFiles{}
	defer func() {
		if err != nil {
			f.remove()
		}
	}()
	if out != nil {
		f.out, f.kafka, f.box = out.file, out.kafka, out.box
		f.undo = append(f.undo, func() {
			f.close() // the outbox closed before its files go
			out.remove()
		})
	}
	if plan.replace {
		if err := removeStore(cfg.store); err != nil {
			return nil, &fileError{cfg.store, fmt.Errorf("removing the old recording: %w", unwrapPathError(err))}
		}
	}
	if f.store, err = createStore(cfg.store, cfg.format); err != nil {
		return nil, err
	}
	w := f.store
	f.undo = append(f.undo, func() {
		w.Close()
		removeStore(cfg.store)
	})
	created, err := applyLayout(cfg.state, plan.layoutDo, plan.layout)
	if err != nil {
		return nil, err
	}
	if created {
		f.undo = append(f.undo, func() { os.Remove(layoutPath(cfg.state)) })
	}
	return f, nil
}

// outboxPath is the marks file of --out's outbox.
func outboxPath(out string) string { return out + ".outbox" }

// runOutbox is --out (file) or --sink (kafka) and its outbox, opened
// before the run creates anything else, and what of them the run created.
type runOutbox struct {
	file  *outbox.File
	kafka *kafkasink.Sink
	box   *outbox.Outbox
	marks string // the outbox's marks file
	// newOut and newMarks: --out and the marks did not exist before.
	newOut, newMarks bool
}

// openOutbox opens --out and its outbox before the run creates anything
// else: the outbox first delivers what earlier runs recorded and committed
// but did not deliver (their recordings are read before --force may
// replace one). wrap, when not nil, wraps --out's writer (tests). A marks
// file the outbox refuses (another --out-format, a bad line: an
// *outbox.MarksError naming the file and line), an --out that does not
// hold what its marks say (outbox.ErrOut) or a recording they need that
// is gone (outbox.ErrRecording) refuses the run before any work: exit 2,
// and what it created (--out, its marks) is removed.
func openOutbox(cfg recordConfig, wrap func(io.Writer) io.Writer, logger *slog.Logger) (*runOutbox, error) {
	marks := outboxPath(cfg.out)
	o := &runOutbox{marks: marks, newOut: missing(cfg.out), newMarks: missing(marks)}
	file, err := outbox.OpenFile(cfg.out, cfg.outFormat, false)
	if err != nil {
		return nil, &fileError{cfg.out, fmt.Errorf("--out: %w", unwrapPathError(err))}
	}
	o.file = file
	if wrap != nil {
		file.Wrap(wrap)
	}
	if o.box, err = outbox.Open(outbox.Config{Marks: marks, Sink: file, Logger: logger}); err != nil {
		file.Close()
		o.remove()
		var me *outbox.MarksError
		if errors.As(err, &me) { // it names the file and the line
			return nil, fmt.Errorf("--out: %w", err)
		}
		return nil, &fileError{marks, fmt.Errorf("--out: %w", err)}
	}
	return o, nil
}

// remove removes what the run created of --out (or --sink's marks) and
// its marks, once the outbox is closed: its marks, and --out while nothing
// was appended to it. (A marks file that existed is kept: rewritten by the
// outbox's recovery, it says what --out or the topic holds.)
func (o *runOutbox) remove() {
	if o.newMarks {
		os.Remove(o.marks)
	}
	if o.file != nil && o.newOut && o.file.Size() == 0 {
		os.Remove(o.file.Path())
	}
}

// missing reports whether nothing is at path.
func missing(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// remove undoes the files of a run whose engine never ran: it removes
// those it created (--out and its marks when they did not exist:
// runOutbox.remove) and closes --out's outbox and --out.
func (f *runFiles) remove() {
	for i := len(f.undo) - 1; i >= 0; i-- {
		f.undo[i]()
	}
	f.undo = nil
	f.close()
}

// close closes the outbox and --out or --sink's producer, once the run is
// over (after the run's Stop and the store's Close: the outbox's last
// batch follows the last commit). It returns the outbox's delivery
// failure.
func (f *runFiles) close() error {
	var err error
	if f.box != nil {
		err = f.box.Close()
		st := f.box.Status()
		f.boxStatus, f.box = &st, nil
	}
	if f.out != nil {
		f.out.Close()
		f.out = nil
	}
	if f.kafka != nil {
		f.kafka.Close()
		f.kafka = nil
	}
	return err
}
