package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

// ErrConfig: a window configuration that cannot be honoured (no engine, no
// status, tokens without a way to record the actions they allow).
var ErrConfig = errors.New("console: bad configuration")

// Defaults of Config.
const (
	DefaultLiveAfter    = 10 * time.Second
	DefaultProbeTimeout = time.Second
)

// Auditor records an operator's action as a CONTROL row, durably, before
// it returns (*recorder.Recorder is one). The window writes the row of
// every action but a seek and a release, whose rows the engine's observer
// writes before they take effect (engine.Observer.Acted: the recorder's Observer
// in the engine's Config, as `blackbox run` wires it).
type Auditor interface {
	Control(c store.Control) error
}

// Probe tells whether a feed's source can reach what it reads (a Kafka
// source's brokers: kafkasource.Source.Ping): nil when it can, an error
// wrapping ErrStarting when it has not tried yet (no client), another
// error when it cannot.
type Probe func(ctx context.Context) error

// ErrStarting: a Probe's source has not begun (the feed is starting, not
// unreachable).
var ErrStarting = errors.New("console: the source has not begun")

// Recording is what the recorder wrote so far, for /metrics.
type Recording struct {
	// Rows counts the rows written, by kind (store.Kind).
	Rows map[string]int64
	// Appends counts the writes (each one batch of rows); Batches counts
	// them by their rows.
	Appends int64
	Batches Batches
	// Bytes is the size of the recording's files on disk, -1 unknown.
	Bytes int64
}

// Partition is one Kafka partition's standing for /metrics
// (kafkasource.PartitionStatus).
type Partition struct {
	Topic         string
	Partition     int32
	Committed     int64 // the committed offset, -1 unknown
	HighWatermark int64 // the partition's end at the last fetch, -1 unknown
	Lag           int64 // HighWatermark minus Committed, -1 unknown
	Lost          int64 // records deleted before they were read
	// End is the partition's end the brokers listed for the scrape
	// (kafkasource.Source.EndOffsets), -1 unknown (not listed in time).
	End int64
}

// FileSkips is what a file source skipped or read again that is neither an
// item nor a loss (filesource.Status), for /metrics: kept apart from the
// losses.
type FileSkips struct {
	HoleBytes int64 // NUL bytes of a hole a stale writer left, skipped
	Replaced  int64 // times the input was found replaced and read from its start
}

// Config is a Window's configuration. Only read.
type Config struct {
	// Engine is the run's engine (required).
	Engine *engine.Engine
	// Status writes the run's status JSON, as `run --status` writes it
	// (required): /status serves it.
	Status func(w io.Writer) error
	// Clock reads the time of the heartbeat, the pauses' deadlines and
	// the actions' instants (default: the system clock).
	Clock core.Clock
	// Tokens are the operators allowed to act: without any the control
	// endpoints are not served (404). With tokens Audit is required.
	Tokens Tokens
	Audit  Auditor
	// KillAbandon is the engine's (engine.Config.KillAbandon): whether a
	// kill abandons the items in flight. A kill request asking for the
	// other is refused (422).
	KillAbandon bool
	// Probes tell, per feed, whether its source reaches its brokers;
	// ProbeTimeout bounds each (default DefaultProbeTimeout).
	Probes       map[string]Probe
	ProbeTimeout time.Duration
	// Recording reports the recorder's counts (optional); Partitions a
	// feed's Kafka partitions (optional, by feed), ctx bounding what it
	// asks the brokers (ProbeTimeout).
	Recording  func() Recording
	Partitions map[string]func(ctx context.Context) []Partition
	// Files reports a file feed's skips (optional, by feed).
	Files map[string]func() FileSkips
	// StateSaves counts the durable saves of a group's app state
	// (optional, by group: only for an app that saves its state).
	StateSaves map[string]func() int64
	// Collectors are more collectors of the window's registry (optional:
	// a Kafka client's own metrics), whose series they name and document.
	Collectors []prometheus.Collector
	// LiveAfter: /livez fails once the run loop has not beaten (Beat)
	// for this long (default DefaultLiveAfter).
	LiveAfter time.Duration
	Logger    *slog.Logger
}

// Window is a run's operator window: an http.Handler. Beat is the run
// loop's heartbeat, Drain marks the run draining (SIGTERM). Safe for
// concurrent use.
type Window struct {
	cfg  Config
	mux  *http.ServeMux
	reg  *prometheus.Registry
	born time.Time

	mu       sync.Mutex
	beat     time.Time            // the last Beat; zero before the first
	draining bool                 // Drain was called
	paused   map[string]time.Time // group -> the end of its operator pause
	// base is, for a queue an operator's release or seek put in another's
	// place, the feed sequence its first item follows: its Dispatched
	// counts its own items, a binding's position is the feed's sequence.
	base map[int64]int64 // generation -> feed sequence (mu)
	act  sync.Mutex      // one control action at a time
	// beforeSeek, set by tests only (export_test.go), runs between an
	// applied seek's check of its plan and the engine's seek.
	beforeSeek func()
}

// New returns the window of cfg. It refuses (ErrConfig) a configuration
// without an engine or a status, and tokens without an Auditor: an action
// that cannot be recorded is not offered.
func New(cfg Config) (*Window, error) {
	switch {
	case cfg.Engine == nil:
		return nil, fmt.Errorf("%w: no engine", ErrConfig)
	case cfg.Status == nil:
		return nil, fmt.Errorf("%w: no status", ErrConfig)
	case len(cfg.Tokens) > 0 && cfg.Audit == nil:
		return nil, fmt.Errorf("%w: control tokens without a recording to record the actions in", ErrConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock()
	}
	if cfg.LiveAfter <= 0 {
		cfg.LiveAfter = DefaultLiveAfter
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Window{cfg: cfg, mux: http.NewServeMux(), reg: prometheus.NewRegistry(), born: cfg.Clock.Now(),
		paused: map[string]time.Time{}, base: map[int64]int64{}}
	for _, c := range append([]prometheus.Collector{&collector{w: w}}, cfg.Collectors...) {
		if err := w.reg.Register(c); err != nil {
			return nil, fmt.Errorf("%w: metrics: %w", ErrConfig, err)
		}
	}
	w.mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(w.reg, promhttp.HandlerOpts{ErrorLog: slogErrorLog{cfg.Logger}}))
	w.mux.HandleFunc("GET "+PathLivez, w.livez)
	w.mux.HandleFunc("GET "+PathReadyz, w.readyz)
	w.mux.HandleFunc("GET "+PathStatus, w.status)
	w.mux.HandleFunc("GET "+PathBindings, w.bindings)
	if len(cfg.Tokens) > 0 {
		w.mux.HandleFunc("POST "+PathControl+"{action}", w.control)
	}
	return w, nil
}

// ServeHTTP serves the window's paths.
func (w *Window) ServeHTTP(rw http.ResponseWriter, r *http.Request) { w.mux.ServeHTTP(rw, r) }

// Registry is the window's own Prometheus registry (never the default).
func (w *Window) Registry() *prometheus.Registry { return w.reg }

// Beat is the run loop's heartbeat: /livez succeeds while the last one is
// recent. It also ends the operator pauses that are due (their deadline
// passed on Config.Clock): the group is unfenced, a CONTROL row records it
// (one control action at a time: a Beat that ends a pause waits for an
// action under way).
func (w *Window) Beat() {
	now := w.cfg.Clock.Now()
	w.mu.Lock()
	w.beat = now
	due := false
	for _, until := range w.paused {
		due = due || !until.IsZero() && !now.Before(until)
	}
	w.mu.Unlock()
	if due {
		w.act.Lock()
		w.endPauses(now)
		w.act.Unlock()
	}
}

// Drain marks the run draining (a SIGTERM): /readyz fails from now on.
func (w *Window) Drain() {
	w.mu.Lock()
	w.draining = true
	w.mu.Unlock()
}

// livez answers 200 while the run loop beats: never on the engine's state
// (backpressure, a latch, a sink down), which /readyz and /metrics say.
func (w *Window) livez(rw http.ResponseWriter, _ *http.Request) {
	now := w.cfg.Clock.Now()
	w.mu.Lock()
	last := w.beat
	w.mu.Unlock()
	if last.IsZero() {
		last = w.born // starting: alive until it has had the time to beat
	}
	if silent := now.Sub(last); silent > w.cfg.LiveAfter {
		http.Error(rw, fmt.Sprintf("the run loop has not beaten for %s", silent), http.StatusServiceUnavailable)
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(rw, "ok\n")
}

// status serves the run's status JSON (Config.Status).
func (w *Window) status(rw http.ResponseWriter, _ *http.Request) {
	var b bytes.Buffer
	if err := w.cfg.Status(&b); err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Write(b.Bytes())
}

// bindings serves every live binding ([]Binding), by feed and group.
func (w *Window) bindings(rw http.ResponseWriter, _ *http.Request) {
	writeJSON(rw, http.StatusOK, w.liveBindings(w.cfg.Engine.Status()))
}

// liveBindings are st's live queues as Bindings.
func (w *Window) liveBindings(st engine.Status) []Binding {
	fenced := map[string]bool{}
	for _, g := range st.Groups {
		fenced[g.Group] = g.Fenced
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := []Binding{}
	for _, f := range st.Feeds {
		for _, s := range f.Subscribers {
			if s.Removed {
				continue
			}
			group := s.Group
			b := Binding{Feed: f.Feed, Group: group, Generation: s.Generation, Position: w.base[s.Generation] + s.Dispatched, // w.mu held: as queuePosition
				Fenced: fenced[group], LossState: lossState(s.Loss), MoveBack: s.MoveBack}
			if until, ok := w.paused[group]; ok && !until.IsZero() {
				b.PausedUntil = &until
			}
			out = append(out, b)
		}
	}
	return out
}

// lossState is a binding's loss state, UP for the zero value.
func lossState(l engine.LossStatus) string {
	if l.State == "" {
		return string(engine.LossUp)
	}
	return string(l.State)
}

// writeJSON writes v as the JSON answer with code.
func writeJSON(rw http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the wire types marshal
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	rw.Write(append(b, '\n'))
}

// slogErrorLog is promhttp's error log on the window's logger.
type slogErrorLog struct{ l *slog.Logger }

func (s slogErrorLog) Println(v ...any) { s.l.Warn("console: metrics: " + fmt.Sprint(v...)) }
