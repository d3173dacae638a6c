package replayer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// Sentinel errors of the replayer, for errors.Is.
var (
	// ErrUnknownApp: a recorded processor names an app Replay was not
	// given (or names none and Options.App is not set). The error names the
	// processor and the app.
	ErrUnknownApp = errors.New("replayer: unknown app")
	// ErrCodec: the recording was written with another codec than the one
	// the replay decodes with (META options "codec").
	ErrCodec = errors.New("replayer: codec mismatch")
	// ErrUsage: a nil reader or context, an App without New, no
	// recording on a side of Diff.
	ErrUsage = errors.New("replayer: bad usage")
)

// ProgressEvery is how many inputs a processor replays between two calls of
// Options.Progress.
const ProgressEvery = 10000

// Options configure Replay. The zero value stops each processor at its first
// divergence, decodes payloads with recorder.JSON and builds each processor
// from the app the recording names. Replay only reads an Options.
type Options struct {
	// KeepGoing counts every divergence instead of stopping the processor
	// at the first. A clock divergence or an unknown timer stops it anyway:
	// past them the replay no longer follows the recording.
	KeepGoing bool
	// Codec decodes OUTPUT payloads and encodes the replayed outputs.
	// Default recorder.JSON. It must be the codec the recording names.
	Codec recorder.Codec
	// App, if set, replays every processor with this app instead of the
	// one the recording names.
	App string
	// AppOptions override, key by key, the options a recording holds
	// for the processors of an app (app name -> options; META's
	// appOptions, store.Meta.AppOptions): each processor is built with
	// the options its stream was recorded with (none when the replay's
	// App is another than the recorded one), each key given here
	// replacing or adding its value (ProcessorReport.Overridden). Of a
	// recording that holds no options for a stream (an earlier version's)
	// these are all the processor is given. Never give an app an option
	// pointing at live side effects (a state file, core.App.Live): a
	// replay captures outputs, but cannot undo what a processor does on
	// its own.
	AppOptions map[string]map[string]string
	// Progress, if set, is called with the processor's name and the count
	// of inputs replayed every ProgressEvery inputs, from the goroutine
	// running Replay.
	Progress func(processor string, inputs int64)
}

// The kinds of a Divergence.
const (
	KindOutput = "output" // an output differs (sink or value)
	KindCount  = "count"  // a different number of outputs
	KindClock  = "clock"  // a different number of clock readings
	KindTimer  = "timer"  // a recorded timer the replayed processor did not set, or fired out of order
)

// The kinds of a ProcessorReport's stop (ProcessorReport.StopKind).
const (
	StopFailed     = "failed"     // the recording holds a FAILED row: not reproducible past it
	StopDivergence = "divergence" // stopped at a divergence
	StopError      = "error"      // the replay could not go on: a panic, a row it cannot resolve or decode, a failed restore
	StopCancelled  = "cancelled"  // the context was cancelled
	// StopIncomplete: the recording is cut at an input: it holds fewer
	// OUTPUT rows than the input's n (an orphan the store reports; a crash
	// cut the write of its rows), so what the input emitted is not known
	// and is not compared; or an input before it is missing (a
	// missing-input problem), so the processor's state there is not known
	// and what differs from it is no divergence.
	StopIncomplete = "incomplete"
)

// Report is the result of Replay. Identical: no processor diverged. Complete:
// the recording has no problem (store.Checker: integrity, a seq a COMMIT row
// covers with no row, a FAILED row), holds at least one processor stream,
// and every processor was replayed to the end of its stream (a recording
// of zero streams proves nothing: it is never complete). Lossless: no
// DROPPED or LOST row, and no CONTROL row of an operator's release or
// forward seek that took processed items still holding the commit
// (Released). A Report is a plain value
// built by Replay; it is safe to read from several goroutines once returned.
type Report struct {
	Identical  bool              `json:"identical"`
	Complete   bool              `json:"complete"`
	Lossless   bool              `json:"lossless"`
	Processors []ProcessorReport `json:"processors"`
	// Problems are the recording's integrity problems (Reader.Problems):
	// every check that needs no app is the store's (store.Checker), so
	// verify and replay report the same problems.
	Problems []store.Problem `json:"problems"`
	// Released lists the operator's releases and forward seeks whose
	// CONTROL row says they took processed items that still held the
	// commit (store.Control.Processed): their rows stand, so no stream
	// has a loss of them, but what applied them may never have been
	// saved, and the run counted them in its status (released, not
	// lossless). Absent when none.
	Released []ReleasedHold `json:"released,omitempty"`
}

// ReleasedHold is an operator's release or forward seek that took
// processed items still holding the commit, as its CONTROL row says: a
// plain value.
type ReleasedHold struct {
	Feed   string `json:"feed"`
	Group  string `json:"group"`
	Action string `json:"action"` // store.ControlRelease or store.ControlSeek
	Who    string `json:"who"`
	Reason string `json:"reason"`
	// Released counts the items the action took, Processed those of them
	// the group had completed (the others have DROPPED rows).
	Released  int64 `json:"released"`
	Processed int64 `json:"processed"`
}

// ProcessorReport is the replay of one processor's stream. Like every
// value of a Report, a plain value, safe to read concurrently.
type ProcessorReport struct {
	Processor   string      `json:"processor"`
	App         string      `json:"app"`
	Inputs      int64       `json:"inputs"`      // inputs (INDEXED, INLINE, TIMER rows) replayed
	Outputs     int64       `json:"outputs"`     // recorded outputs compared
	Divergences int64       `json:"divergences"` // divergences found (1 at most unless KeepGoing)
	First       *Divergence `json:"first,omitempty"`
	Losses      []Loss      `json:"losses"`
	// Stop says why this processor's replay stopped before the end of its
	// stream; "" when it ran to the end. StopKind classifies it (StopFailed,
	// StopDivergence, StopError, StopCancelled, StopIncomplete) and
	// StopIndex names the row.
	Stop      string          `json:"stop"`
	StopKind  string          `json:"stopKind,omitempty"`
	StopIndex int64           `json:"stopIndex,omitempty"`
	Problems  []store.Problem `json:"problems"` // the integrity problems of this processor's stream
	// Options are the options the processor was built with;
	// OptionsRecorded says the recording holds its stream's options
	// (else Options are only those Options.AppOptions gave), Overridden
	// the keys given that replaced or added to the recorded ones, sorted.
	Options         map[string]string `json:"options"`
	OptionsRecorded bool              `json:"optionsRecorded"`
	Overridden      []Override        `json:"overridden,omitempty"`
}

// Override is an option a replay was given (Options.AppOptions) in place of
// the one its recording holds: Recorded is the recorded value, Unrecorded
// says the recording holds no value for Key (the option was added). A
// plain value.
type Override struct {
	Key        string `json:"key"`
	Given      string `json:"given"`
	Recorded   string `json:"recorded"`
	Unrecorded bool   `json:"unrecorded,omitempty"`
}

// Divergence is one input whose replay differs from the recording: its
// outputs (Kind "output", "count"), its clock readings ("clock") or its timer
// ("timer"). A plain value, safe to read concurrently.
type Divergence struct {
	Processor string         `json:"processor"`
	Index     int64          `json:"index"` // the input row's index
	Kind      string         `json:"kind"`
	Source    string         `json:"source"` // the feed ("" for a timer)
	Seq       int64          `json:"seq"`    // the feed sequence, or the timer's number
	Delivery  *core.Delivery `json:"delivery,omitempty"`
	Input     string         `json:"input"` // the input's payload text ("timer N" for a timer)
	Want      []string       `json:"want"`  // recorded outputs, "sink: payload"
	Got       []string       `json:"got"`   // replayed outputs, "sink: payload"
	Diff      string         `json:"diff"`  // a readable diff of the decoded outputs (-want +got), or what differs
}

// Loss is a DROPPED row (items of the feed lost for the processor's queue)
// or a LOST row (input the feed's source lost, never published): items the
// live processor never saw. The replay reports it and goes on. A plain
// value.
type Loss struct {
	Kind        string `json:"kind"` // LossDropped or LossSource
	Feed        string `json:"feed"`
	Index       int64  `json:"index"` // the row's index
	Count       int64  `json:"count"` // items lost (a LOST row: 0 when the source could not count them)
	First       int64  `json:"first"` // first and last sequence lost (DROPPED)
	Last        int64  `json:"last"`
	Reason      string `json:"reason"`
	Approximate bool   `json:"approximate"`
	// Source is what a LOST row says: the source's reason, the lost range
	// of positions and the input's identity; nil for a DROPPED row.
	Source *store.Lost `json:"source,omitempty"`
}

// The kinds of a Loss.
const (
	LossDropped = "dropped" // a DROPPED row
	LossSource  = "lost"    // a LOST row
)

// Replay re-runs every recorded processor of r from its recording and
// compares what it emits with what was recorded (docs/ARCHITECTURE.md, "Replay").
//
// Each processor gets a fresh instance from its App, restored from its START
// snapshot, and a Host with no sink (outputs are captured, never delivered);
// the rows of its stream are then replayed in order: a DELIVERY is entered
// for the whole input that follows it, INDEXED and INLINE inputs are decoded
// with App.Decode and handled with the recorded clock readings played back,
// completion callbacks run after the input, TIMER fires the timer of that
// number, DROPPED is a Loss, FAILED stops the processor (the stream is not
// reproducible past it). Outputs are encoded with the codec and compared
// with the OUTPUT rows, after decoding both sides when their bytes differ.
// A panic, an unresolvable journal row or an undecodable payload stops that
// processor only; Replay never panics because of a processor.
//
// Replay streams: it holds one input and its outputs per processor at a
// time, so its memory does not grow with the recording. The recording is
// read once: every processor is replayed in one pass over its streams
// (Reader.Streams), which also checks the recording (Report.Problems);
// journal rows are looked up with Reader.Journal. The report lists the
// processors in the order of r.Processors().
//
// The error is for usage and I/O problems only: an unknown app (wrapping
// ErrUnknownApp), a codec mismatch (ErrCodec), a read error of the store, a
// cancelled ctx (with the report so far), a nil ctx or reader (ErrUsage). Divergences, losses and integrity
// problems are in the Report.
func Replay(ctx context.Context, r store.Reader, apps []core.App, opts Options) (*Report, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nil reader", ErrUsage)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrUsage)
	}
	codec := opts.Codec
	if codec == nil {
		codec = recorder.JSON
	}
	meta := r.Meta()
	if name, ok := meta.Options["codec"]; ok && name != codec.Name() {
		return nil, fmt.Errorf("%w: the recording was written with codec %q, replaying with %q", ErrCodec, name, codec.Name())
	}
	resolve := func(p string) (job, error) {
		name := opts.App
		if name == "" {
			name = meta.Apps[p]
		}
		if name == "" {
			return job{}, fmt.Errorf("%w: the recording names no app for processor %q (set the app to replay it with)", ErrUnknownApp, p)
		}
		a, ok := core.FindApp(apps, name)
		if !ok {
			return job{}, fmt.Errorf("%w %q for processor %q (known: %s)", ErrUnknownApp, name, p, core.AppNames(apps))
		}
		if a.New == nil {
			return job{}, fmt.Errorf("%w: app %q has no New", ErrUsage, name)
		}
		if a.Decode == nil {
			a.Decode = codec.Decode
		}
		recorded, ok := meta.AppOptions[p]
		if name != meta.Apps[p] {
			recorded, ok = nil, false // another app's options
		}
		j := job{proc: p, app: a, recorded: ok}
		j.options, j.overridden = withOverrides(recorded, opts.AppOptions[name], ok)
		return j, nil
	}
	return replayOnce(ctx, r, resolve, codec, opts)
}

// replayOnce replays every processor of r in one pass over its streams
// (store.Reader.Streams), which checks the recording as it goes. A
// processor's app is resolved at its first row; when one cannot be, the
// error is the one Replay returns for the first such processor of
// r.Processors(), before any replay. A ctx cancelled before the pass
// replays nothing: every processor is "not replayed".
func replayOnce(ctx context.Context, r store.Reader, resolve func(string) (job, error), codec recorder.Codec, opts Options) (*Report, error) {
	ps := &pass{ctx: ctx, r: r, resolve: resolve, codec: codec, opts: opts,
		reps: map[string]*ProcessorReport{}, replays: map[string]*replay{}}
	err := ps.read()
	if errors.Is(err, ErrUnknownApp) || errors.Is(err, ErrUsage) {
		// The error for the first such processor in r.Processors() order,
		// as Replay gives it.
		for _, p := range r.Processors() {
			if _, rerr := resolve(p); rerr != nil {
				return nil, rerr
			}
		}
		return nil, err
	}
	return ps.report(err)
}

// pass is one replayOnce: the replay of each processor met so far, and
// its report. It is used by one goroutine.
type pass struct {
	ctx     context.Context
	r       store.Reader
	resolve func(string) (job, error)
	codec   recorder.Codec
	opts    Options
	reps    map[string]*ProcessorReport
	replays map[string]*replay
}

// start resolves processor p's app and begins its replay.
func (ps *pass) start(p string) (*replay, error) {
	j, err := ps.resolve(p)
	if err != nil {
		return nil, err
	}
	pr := j.report()
	rp := newReplay(ps.ctx, ps.r, j, ps.codec, ps.opts, pr)
	rp.begin()
	ps.reps[p], ps.replays[p] = pr, rp
	return rp, nil
}

// read hands each row of the one pass over r's streams to its processor's
// replay, started at the processor's first row, and returns the error that
// ended the pass early (nil: r was read to its end): ctx cancelled before
// it or during it (every replay begun stops, StopCancelled), a read error
// of the store (every replay begun stops, StopError), or an app that
// cannot be resolved. An unreadable row stops its processor's replay only;
// past its stop, a processor's losses are still counted.
func (ps *pass) read() error {
	var err error
	var rows int64
	if cerr := ps.ctx.Err(); cerr != nil {
		err = fmt.Errorf("replayer: %w", cerr)
	}
	for e, rerr := range ps.r.Streams() {
		if err != nil {
			break
		}
		if rows++; rows%ctxEvery == 0 {
			if cerr := ps.ctx.Err(); cerr != nil {
				for _, rp := range ps.replays {
					rp.stop(rp.last, StopCancelled, "cancelled at index %d: %v", rp.last, cerr)
				}
				err = fmt.Errorf("replayer: processor %q: %w", e.Processor, cerr)
				break
			}
		}
		var pb *store.Problem
		if rerr != nil && !errors.As(rerr, &pb) {
			for _, rp := range ps.replays {
				rp.stop(rp.last, StopError, "reading the recording: %v", rerr)
			}
			err = fmt.Errorf("replayer: reading the recording: %w", rerr)
			break
		}
		rp := ps.replays[e.Processor]
		if rp == nil {
			if rp, err = ps.start(e.Processor); err != nil {
				break
			}
		}
		if rp.stopped {
			rp.loss(&e) // past the stop a recorded loss is still one
			rp.follow(&e)
			continue
		}
		if pb != nil {
			rp.finish()
			rp.stop(pb.Index, StopError, "unreadable row (index %d): %s", pb.Index, pb.Detail)
			continue
		}
		rp.last = e.Index
		rp.row(&e)
		rp.follow(&e)
	}
	return err
}

// report is the Report of the pass, which err ended (nil: read to its
// end), with its verdict: the processors in r.Processors() order, each
// with its integrity problems. A processor the pass met is finished; one
// it did not meet is "not replayed" when err ended it, and otherwise (a
// stream with no row Streams yields) replayed empty. The error is err, or
// an app that cannot be resolved.
func (ps *pass) report(err error) (*Report, error) {
	procs := ps.r.Processors()
	rep := &Report{Processors: make([]ProcessorReport, 0, len(procs)), Problems: nonNil(ps.r.Problems())}
	for _, p := range procs {
		pr := ps.reps[p]
		switch {
		case pr != nil:
			ps.replays[p].finish()
			ps.replays[p].pastMissing(rep.Problems)
		case err != nil:
			j, rerr := ps.resolve(p)
			if rerr != nil {
				return nil, rerr
			}
			pr = j.report()
			pr.Stop, pr.StopKind = "not replayed: "+err.Error(), StopCancelled
		default: // a stream with no row Streams yields: replayed empty, as Replay does
			rp, rerr := ps.start(p)
			if rerr != nil {
				return nil, rerr
			}
			rp.finish()
			pr = ps.reps[p]
		}
		for _, pb := range rep.Problems {
			if pb.Processor == p {
				pr.Problems = append(pr.Problems, pb)
			}
		}
		rep.Processors = append(rep.Processors, *pr)
	}
	for _, c := range ps.r.Controls() {
		if c.Processed > 0 {
			rep.Released = append(rep.Released, ReleasedHold{Feed: c.Feed, Group: c.Group, Action: c.Action,
				Who: c.Who, Reason: c.Reason, Released: c.Released, Processed: c.Processed})
		}
	}
	rep.verdict()
	return rep, err
}

// verdict sets Identical, Complete and Lossless from the processors'
// reports and the problems.
func (rep *Report) verdict() {
	rep.Identical, rep.Complete, rep.Lossless = true, len(rep.Problems) == 0 && len(rep.Processors) > 0, true
	for _, pr := range rep.Processors {
		if pr.Divergences > 0 {
			rep.Identical = false
		}
		if pr.Stop != "" {
			rep.Complete = false
		}
		if len(pr.Losses) > 0 {
			rep.Lossless = false
		}
	}
	if len(rep.Released) > 0 {
		rep.Lossless = false
	}
}

// job is a processor to replay and the app it is replayed with, built with
// options (recorded: the recording holds the stream's; overridden: the
// keys given in place of the recorded values).
type job struct {
	proc       string
	app        core.App
	options    map[string]string
	recorded   bool
	overridden []Override
}

// report is a new report of j's processor.
func (j job) report() *ProcessorReport {
	opts := j.options
	if opts == nil {
		opts = map[string]string{}
	}
	return &ProcessorReport{Processor: j.proc, App: j.app.Name, Losses: []Loss{}, Problems: []store.Problem{},
		Options: opts, OptionsRecorded: j.recorded, Overridden: j.overridden}
}

// withOverrides returns the recorded options with each given one in place
// of the recorded value, and the overrides, sorted by key: a given value
// equal to the recorded one is none, and of options not recorded
// (recorded false) nothing is overridden.
func withOverrides(recorded, given map[string]string, isRecorded bool) (map[string]string, []Override) {
	if len(given) == 0 {
		return recorded, nil
	}
	out := maps.Clone(recorded)
	if out == nil {
		out = make(map[string]string, len(given))
	}
	var over []Override
	for _, k := range slices.Sorted(maps.Keys(given)) {
		v := given[k]
		old, had := recorded[k]
		out[k] = v
		if isRecorded && (!had || old != v) {
			over = append(over, Override{Key: k, Given: v, Recorded: old, Unrecorded: !had})
		}
	}
	return out, over
}

// nonNil is s, or an empty slice for nil (JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
