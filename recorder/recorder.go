package recorder

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store"
)

// Sentinel errors of the recorder, for errors.Is.
var (
	// ErrClosed: the engine called a hook after Close.
	ErrClosed = errors.New("recorder: closed")
	// ErrUsage: a RunConfig without a processor, or a processor without
	// an app name.
	ErrUsage = errors.New("recorder: bad usage")
)

// BrokenError says that the recording of one processor (or the journal of
// one feed) stopped: what was written before it is kept, nothing after it.
// The recorder's hooks return it to the engine, which fails the
// processor's group (engine.ObserverError wraps it).
// Err is the cause: the writer's error, or an error wrapping store.ErrName
// (a name with a line break) or the codec's error. It is immutable and safe for concurrent use.
type BrokenError struct {
	Processor string // "" for a journal
	Feed      string // the journalled feed, when Processor is ""
	Err       error
}

func (e *BrokenError) Error() string {
	if e.Processor == "" {
		return fmt.Sprintf("recorder: journal of feed %q: recording stopped: %v", e.Feed, e.Err)
	}
	return fmt.Sprintf("recorder: processor %q: recording stopped: %v", e.Processor, e.Err)
}

// Unwrap returns the cause.
func (e *BrokenError) Unwrap() error { return e.Err }

// Options configure a Recorder. The zero value records every processor in
// JSON, stamped by the system clock, with no fsync. New reads them once; an
// Options value is not modified and may be shared.
type Options struct {
	// Clock stamps the instants of rows and the META creation time.
	// Default: core.SystemClock().
	Clock core.Clock
	// Codec encodes payloads. Default: JSON.
	Codec Codec
	// Apps maps processor names to app names, written in META so a replay
	// knows which app to build for each stream.
	Apps map[string]string
	// AppOptions maps processor names (the keys of Apps) to the options
	// their app was built with, written in META (store.Meta.AppOptions) so
	// that a replay builds each stream's processor as the run did: give
	// the options a recording may hold (core.App.RecordedOptions). A
	// processor it does not name is recorded without its options.
	AppOptions map[string]map[string]string
	// Processors, if not nil, records only these processors.
	Processors []string
	// SyncEvery forces rows to stable storage (store.Writer.Sync) once at least
	// this many rows were written since the last sync; SyncInterval at
	// least this often while rows are unsynced. With both 0 (the default)
	// every input's rows reach the operating system in one write (with the
	// other rows of its batch) before its completion callbacks run and
	// before the item counts as dispatched,
	// which survives a crash of the process but not a power loss. A failed
	// sync stops every stream (and fails every group at its next item).
	SyncEvery    int
	SyncInterval time.Duration
	// NoCommits records no COMMIT rows: for a recording whose rows must
	// not depend on the timing of the run (when a source commits does),
	// such as golden recordings and byte-stable transcripts.
	NoCommits bool
	// Logger receives a warning for each recording that stops (the
	// *BrokenError, after "blackbox "). Default: slog.Default().
	Logger *slog.Logger
	// Sink names, in META's options (store.OptionSink), what became of
	// the run's outputs: store.SinkLive (a core.Sink given them as
	// emitted), or an outbox's guarantee (outbox.GuaranteeExactlyOnce,
	// ...). Empty: no sink (the option is left out).
	Sink string
	// Written, if set, is told the processor rows of every Append that
	// succeeded, in the order written, with the recorder's lock held (so
	// never concurrently, and in the recording's order): an outbox
	// (package outbox) learns from it which outputs the recording holds.
	// It must not keep rows (the recorder reuses them) nor block.
	Written func(rows []store.Entry)
}

// Recorder records an engine run into a store.Writer. Its methods, and the
// hooks of its Observer and Journal, are safe for concurrent use: hooks of
// different groups run concurrently, each processor's state is touched only
// by its group's goroutine, and Append calls are serialized. One Recorder
// records one engine run.
type Recorder struct {
	w     store.Writer
	clock core.Clock
	codec Codec
	only  map[string]bool // nil: every processor
	log   *slog.Logger

	onWrite func([]store.Entry) // Options.Written
	created time.Time           // META's

	mu         sync.Mutex // serializes the writer; guards the fields below
	globalNext int64      // next index of META/JOURNAL/COMMIT rows
	syncEvery  int
	unsynced   int
	closed     bool
	// The opening: the rows the first write carries, not written yet
	// (open). head is META, the STARTs staged since (their processors in
	// headProcs) and the JOURNAL rows journalled meanwhile; awaiting the
	// streams META lists whose START is not staged yet (a stream that
	// cannot start counts as staged). The last of them writes the opening;
	// so does any write before it (then before its own rows). openErr: the
	// opening could not be written; nothing is, ever.
	head      []store.Entry
	headProcs []*proc
	awaiting  map[string]bool
	listed    bool // META lists streams; if not, the first START writes the opening
	open      bool
	openErr   error

	errMu  sync.Mutex
	errs   []error
	broken map[string]error

	procs  sync.Map // processor name -> *proc
	groups sync.Map // group name -> *groupState
	feeds  sync.Map // feed name -> *feedJournal
	taken  sync.Map // takenKey -> *atomic.Int64: the highest seq of the feed the group took (or dropped)
	feedMu sync.Mutex
	killed atomic.Pointer[string] // why the engine was killed (Observer.Killed): END rows say it

	commits   commitLog
	noCommits bool

	closeOnce sync.Once
	stopSync  chan struct{}
	syncDone  chan struct{}
	closeErr  error
}

// New returns a Recorder writing into w. w must hold no recording yet; the
// caller owns it (Close it after the Recorder's Close).
//
// New writes nothing: the first write carries the META row and the START
// rows of the streams META lists (Options.Apps, Options.Processors), in one
// Append (one write call with a CSV store's header, one transaction with an
// SQLite store's schema), so that a process killed at its start leaves
// either no recording (an empty file) or one whose every stream started.
// The Started hook of the last of those streams writes it (the engine calls
// Started for every processor of a group, its workers' included, before
// the group handles anything); any other write before it (a group that
// handled items before another group started, Close) writes it first, with
// the STARTs staged by then, and the streams that start later each write
// their START on their own. JOURNAL rows journalled before it are written
// with it.
func New(w store.Writer, opts Options) (*Recorder, error) {
	if w == nil {
		return nil, errors.New("recorder: nil writer")
	}
	if opts.SyncEvery < 0 || opts.SyncInterval < 0 {
		return nil, fmt.Errorf("recorder: negative SyncEvery %d or SyncInterval %s", opts.SyncEvery, opts.SyncInterval)
	}
	r := &Recorder{w: w, clock: opts.Clock, codec: opts.Codec, log: opts.Logger, syncEvery: opts.SyncEvery,
		broken: map[string]error{}, noCommits: opts.NoCommits, onWrite: opts.Written}
	if r.clock == nil {
		r.clock = core.SystemClock()
	}
	if r.codec == nil {
		r.codec = JSON
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	durability := "write"
	if opts.SyncEvery > 0 || opts.SyncInterval > 0 {
		durability = "fsync"
	}
	if opts.Processors != nil {
		r.only = map[string]bool{}
		for _, p := range opts.Processors {
			r.only[p] = true
		}
	}
	o := map[string]string{"codec": r.codec.Name(), "durability": durability}
	if opts.SyncEvery > 0 {
		o["syncEvery"] = strconv.Itoa(opts.SyncEvery)
	}
	if opts.SyncInterval > 0 {
		o["syncInterval"] = opts.SyncInterval.String()
	}
	if opts.Sink != "" {
		o[store.OptionSink] = opts.Sink
	}
	apps := maps.Clone(opts.Apps)
	if apps == nil {
		apps = map[string]string{}
	}
	// META lists the streams the recording must hold: a processor whose
	// stream is missing or broke is then an integrity problem of its own.
	streams := slices.Sorted(maps.Keys(apps))
	if opts.Processors != nil {
		streams = slices.Compact(slices.Sorted(slices.Values(opts.Processors)))
	}
	r.created = r.clock.Now()
	var appOpts map[string]map[string]string
	if len(opts.AppOptions) > 0 {
		appOpts = make(map[string]map[string]string, len(opts.AppOptions))
		for p, o := range opts.AppOptions {
			if o == nil {
				o = map[string]string{}
			}
			appOpts[p] = maps.Clone(o)
		}
	}
	meta := store.EncodeMeta(store.Meta{Format: store.Format, Created: r.created, Apps: apps, Options: o, Streams: streams,
		AppOptions: appOpts})
	r.head = []store.Entry{meta}
	r.awaiting = map[string]bool{}
	for _, s := range streams {
		r.awaiting[s] = true
	}
	r.listed = len(streams) > 0
	r.globalNext = meta.Index + 1
	if opts.SyncInterval > 0 {
		r.stopSync, r.syncDone = make(chan struct{}), make(chan struct{})
		go r.syncLoop(opts.SyncInterval)
	}
	return r, nil
}

// Created is the creation instant the recording's META holds: with its
// path, what names the recording to an outbox.
func (r *Recorder) Created() time.Time { return r.created }

// Sync forces every row written so far to stable storage (the writer's
// Sync), whatever SyncEvery and SyncInterval say: an outbox calls it
// before it marks outputs deliverable. A failure stops every stream, as
// a due sync's does. It is safe for concurrent use.
func (r *Recorder) Sync() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.unsynced == 0 {
		return nil
	}
	return r.syncLocked()
}

// Err returns every recording failure so far (each a *BrokenError), joined;
// nil when every stream and journal is whole.
func (r *Recorder) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return errors.Join(r.errs...)
}

// Broken returns the processors whose recording stopped, with the
// *BrokenError of each. The map is a copy.
func (r *Recorder) Broken() map[string]error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return maps.Clone(r.broken)
}

// Close writes the COMMIT rows still pending (commits reported after the
// last rows), forces what was written to stable storage (the writer's Sync), and ends the Recorder: hooks called afterwards stop their
// processor's recording with ErrClosed. It does not close the writer. Call
// it after the engine's Stop. It returns the sync error, if any, joined with
// Err(): nil means the recording holds every stream whole.
func (r *Recorder) Close() error {
	r.closeOnce.Do(func() {
		if r.stopSync != nil {
			close(r.stopSync)
			<-r.syncDone
		}
		r.mu.Lock()
		if !r.closed {
			if err := r.flushCommits(); err != nil {
				r.closeErr = fmt.Errorf("recorder: commits: %w", err)
			}
		}
		if !r.closed && !r.open && r.openErr == nil { // no stream wrote: write what the opening holds
			if _, err := r.appendLocked(nil, true); err != nil {
				r.closeErr = fmt.Errorf("recorder: %w", err)
			}
		}
		if !r.closed {
			if err := r.w.Sync(); err != nil {
				r.closeErr = fmt.Errorf("recorder: sync: %w", err)
			}
		}
		r.closed = true
		r.mu.Unlock()
	})
	return errors.Join(r.closeErr, r.Err())
}

func (r *Recorder) syncLoop(every time.Duration) {
	defer close(r.syncDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stopSync:
			return
		case <-t.C:
			r.mu.Lock()
			if r.unsynced > 0 && !r.closed {
				r.syncLocked()
			}
			r.mu.Unlock()
		}
	}
}

// wrote accounts for n rows written (r.mu held) and syncs when due. It
// returns the sync's error.
func (r *Recorder) wrote(n int) error {
	r.unsynced += n
	if r.syncEvery > 0 && r.unsynced >= r.syncEvery {
		return r.syncLocked()
	}
	return nil
}

// syncLocked syncs the writer (r.mu held). A failed fsync may have lost
// rows already written, so every stream stops.
func (r *Recorder) syncLocked() error {
	if err := r.w.Sync(); err != nil {
		err = fmt.Errorf("sync: %w", err)
		r.procs.Range(func(_, v any) bool {
			if p := v.(*proc); p.record {
				r.breakProc(p, err)
			}
			return true
		})
		return err
	}
	r.unsynced = 0
	return nil
}

// breakProc stops p's recording, once, and reports why.
func (r *Recorder) breakProc(p *proc, err error) {
	be := &BrokenError{Processor: p.name, Err: err}
	r.errMu.Lock()
	if _, done := r.broken[p.name]; done {
		r.errMu.Unlock()
		return
	}
	r.errs = append(r.errs, be)
	r.broken[p.name] = be
	r.errMu.Unlock()
	// Set after the map: whoever sees broken finds its error (brokenErr).
	p.broken.Store(true)
	r.log.Warn(fmt.Sprintf("blackbox %v", be))
}

// brokenErr returns the *BrokenError of each of ps whose recording
// stopped, joined; nil when none did.
func (r *Recorder) brokenErr(ps ...*proc) error {
	var errs []error
	for _, p := range ps {
		if p.broken.Load() {
			r.errMu.Lock()
			errs = append(errs, r.broken[p.name])
			r.errMu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// checkName refuses a name the format cannot hold.
func checkName(what, name string) error {
	if strings.ContainsAny(name, "\r\n") {
		return fmt.Errorf("recorder: %s name %q contains a line break: %w", what, name, store.ErrName)
	}
	return nil
}

var lineBreaks = strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\r", `\r`)

// oneLine makes an error text fit a Detail field.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return lineBreaks.Replace(s)
	}
	return s
}

// encode encodes v with the codec and refuses a payload with a line break.
func (r *Recorder) encode(v any) ([]byte, error) {
	b, err := r.codec.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("codec %s: %w", r.codec.Name(), err)
	}
	return b, nil
}

// part is the rows of one processor within a batch: rows[lo:hi].
type part struct {
	p      *proc
	lo, hi int
	inputs int64 // input rows among them (INDEXED, INLINE, TIMER)
}

// appendParts writes rows, the rows of every part, with one Append. On
// success each part's processor moves its next index on. A row the store
// refuses as unholdable (a *store.FieldError: nothing was written) stops
// only the processors whose rows fail store.Validate (their later parts are
// not written either), and the others are written; any other failure stops
// every processor of the batch. It returns nil when every part was
// written, else the *BrokenError of each processor whose rows were not. It
// is called on the group's goroutine of every part's processor.
func (r *Recorder) appendParts(rows []store.Entry, parts []part) error {
	if len(parts) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.breakParts(parts, ErrClosed)
	}
	wrote, err := r.appendLocked(rows, true)
	var fe *store.FieldError
	if err != nil && errors.As(err, &fe) {
		// Nothing was written. Keep the parts every store can hold.
		var keep, refused []part
		var krows []store.Entry
		for _, pt := range parts {
			if slices.ContainsFunc(refused, func(x part) bool { return x.p == pt.p }) {
				refused = append(refused, pt)
				continue
			}
			if verr := validate(rows[pt.lo:pt.hi]); verr != nil {
				r.breakProc(pt.p, verr)
				refused = append(refused, pt)
				continue
			}
			lo := len(krows)
			krows = append(krows, rows[pt.lo:pt.hi]...)
			keep = append(keep, part{p: pt.p, lo: lo, hi: len(krows), inputs: pt.inputs})
		}
		if len(refused) == 0 { // the store refused what Validate accepts
			return r.breakParts(parts, err)
		}
		if len(keep) > 0 {
			n, err := r.appendLocked(krows, true)
			if err != nil {
				return r.breakParts(parts, err)
			}
			r.tell(krows)
			if err := r.written(keep, n); err != nil {
				return r.brokenErr(procsOf(parts)...)
			}
		}
		return r.brokenErr(procsOf(refused)...)
	}
	if err != nil {
		return r.breakParts(parts, err)
	}
	r.tell(rows)
	if err := r.written(parts, wrote); err != nil {
		return r.brokenErr(procsOf(parts)...)
	}
	return nil
}

// appendLocked writes rows with one Append, after the opening while it is
// not written (head) and, with commits, followed by the pending COMMIT rows
// (r.mu held; rows hold no META, JOURNAL or COMMIT row when commits is
// set: the COMMIT rows take the indexes from r.globalNext on). It returns
// how many rows it wrote. A failure to write the opening stops the
// recording: every processor whose START it held breaks, and every later
// call fails with that error.
func (r *Recorder) appendLocked(rows []store.Entry, commits bool) (int, error) {
	if r.openErr != nil {
		return 0, r.openErr
	}
	all := rows
	if !r.open {
		all = append(slices.Clip(r.head), rows...)
	}
	ncommits := 0
	if commits {
		all, ncommits = r.withCommits(all)
	}
	if len(all) == 0 {
		return 0, nil
	}
	err := r.w.Append(all...)
	var fe *store.FieldError
	switch {
	case err == nil:
		r.commitsWritten(ncommits)
		if !r.open {
			r.open, r.head, r.headProcs, r.awaiting = true, nil, nil, nil
		}
		return len(all), nil
	case !r.open && !errors.As(err, &fe) && !errors.Is(err, store.ErrTooLarge):
		// The opening could not be written. (A row the store refuses, a
		// *store.FieldError or *store.SizeError, writes nothing: the
		// caller goes on without it, and the opening stays to be written.)
		r.openErr = fmt.Errorf("writing the recording's first rows (META, STARTs): %w", err)
		for _, p := range r.headProcs {
			r.breakProc(p, r.openErr)
		}
		return 0, r.openErr
	}
	return 0, err
}

// tell tells Options.Written the processor rows just written (r.mu held).
func (r *Recorder) tell(rows []store.Entry) {
	if r.onWrite != nil && len(rows) > 0 {
		r.onWrite(rows)
	}
}

// written moves each part's processor on past its rows, n rows written in
// all (r.mu held). It returns the error of a sync that was due and failed
// (every stream stopped).
func (r *Recorder) written(parts []part, n int) error {
	for _, pt := range parts {
		pt.p.next += int64(pt.hi - pt.lo)
		pt.p.inputs += pt.inputs
	}
	return r.wrote(n)
}

// breakParts stops the recording of every part's processor with err and
// returns their *BrokenError.
func (r *Recorder) breakParts(parts []part, err error) error {
	for _, pt := range parts {
		r.breakProc(pt.p, err)
	}
	return r.brokenErr(procsOf(parts)...)
}

// procsOf is the processors of parts, each once, in order.
func procsOf(parts []part) []*proc {
	var ps []*proc
	for _, pt := range parts {
		if !slices.Contains(ps, pt.p) {
			ps = append(ps, pt.p)
		}
	}
	return ps
}

// holdable reports whether every store can hold every row: Validate, and
// no row longer than store.MaxRowSize. The opening holds only such rows, so
// that one row refused cannot refuse the others.
func holdable(rows []store.Entry) error {
	for i := range rows {
		if err := store.Validate(rows[i]); err != nil {
			return err
		}
		if err := store.CheckRowSize(&rows[i], store.Format); err != nil {
			return err
		}
	}
	return nil
}

func validate(rows []store.Entry) error {
	for _, e := range rows {
		if err := store.Validate(e); err != nil {
			return err
		}
	}
	return nil
}
