package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/recorder"
)

// The log formats of --log-format.
const (
	logText = "text"
	logJSON = "json"
)

// DefaultShutdownTimeout is --shutdown-timeout's default: the engine's
// own drain bound.
const DefaultShutdownTimeout = 5 * time.Second

// opsConfig is what run is told about its operation: the operator window
// (--listen, --control-token-file), the shutdown on a signal
// (--shutdown-delay, --shutdown-timeout) and the logs (--log-format).
type opsConfig struct {
	listen          string
	tokenFile       string
	shutdownDelay   time.Duration
	shutdownTimeout time.Duration
	logFormat       string
}

func (o *opsConfig) flags(f *pflag.FlagSet) {
	f.StringVar(&o.listen, "listen", "", "serve the operator window on `ADDR` (host:port; port 0 picks one, printed on stderr): /metrics, /livez, /readyz, /status, /bindings, /control/ (docs/OPERATIONS.md)")
	f.StringVar(&o.tokenFile, "control-token-file", "", "with --listen: a `FILE` of the operators' bearer tokens, one line NAME TOKEN each; without it the control endpoints are not served (404)")
	f.DurationVar(&o.shutdownDelay, "shutdown-delay", 0, "on SIGINT or SIGTERM: /readyz fails at once, then the run goes on for this long before it stops reading")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "on a stop: how long the queue may drain before what is left stays uncommitted (exit 3 when it did not drain)")
	f.StringVar(&o.logFormat, "log-format", logText, "the warnings on stderr: text or json (slog JSON, with the keys run, feed and group; seq and position for an item)")
}

// check refuses what cannot be honoured: a token file without --listen,
// an unknown log format, a negative delay, a timeout that is not
// positive.
func (o opsConfig) check() error {
	switch {
	case o.tokenFile != "" && o.listen == "":
		return usagef("--control-token-file needs --listen")
	case o.logFormat != logText && o.logFormat != logJSON:
		return usagef("unknown --log-format %q (want %s or %s)", o.logFormat, logText, logJSON)
	case o.shutdownDelay < 0:
		return usagef("--shutdown-delay must not be negative, got %s", o.shutdownDelay)
	case o.shutdownTimeout <= 0:
		return usagef("--shutdown-timeout must be positive, got %s", o.shutdownTimeout)
	}
	return nil
}

// logger is the run's logger on w: the warnings as text lines, or as slog
// JSON with the keys run (the recording's path), feed and group (the
// names run gives them: the recording's source column and its STATE and
// CONTROL rows' group) and, for an engine's warning about an item, its seq
// and position (the recording's key and offset: engine.LogPosition).
func (o opsConfig) logger(w io.Writer, name, store string) *slog.Logger {
	if o.logFormat != logJSON {
		return slog.New(newWarnHandler(w, name))
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})
	return slog.New(&runFields{h: h, fields: []slog.Attr{slog.String("run", store), slog.String(engine.LogFeed, feedName), slog.String(engine.LogGroup, groupName)}})
}

// kafkaLogger is the Kafka source's logger: in JSON its own "group" (the
// consumer group) is written as "kafka_group", "group" being the engine's
// group, as the recording names it.
func (o opsConfig) kafkaLogger(l *slog.Logger) *slog.Logger {
	if o.logFormat != logJSON {
		return l
	}
	return slog.New(&kafkaGroup{h: l.Handler()})
}

// runFields adds the run's fields to each record, first, in their order; a
// record's own attribute of a field's key (an engine's warning about an
// item names its feed and group) takes the field's place. Safe for
// concurrent use.
type runFields struct {
	h      slog.Handler
	fields []slog.Attr
}

func (r *runFields) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r *runFields) Handle(ctx context.Context, rec slog.Record) error {
	own := make(map[string]slog.Attr, rec.NumAttrs())
	var rest []slog.Attr
	rec.Attrs(func(a slog.Attr) bool {
		if slices.ContainsFunc(r.fields, func(f slog.Attr) bool { return f.Key == a.Key }) {
			own[a.Key] = a
		} else {
			rest = append(rest, a)
		}
		return true
	})
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	for _, f := range r.fields {
		if a, ok := own[f.Key]; ok {
			f = a
		}
		out.AddAttrs(f)
	}
	out.AddAttrs(rest...)
	return r.h.Handle(ctx, out)
}

func (r *runFields) WithAttrs(as []slog.Attr) slog.Handler {
	return &runFields{h: r.h, fields: append(append([]slog.Attr(nil), r.fields...), as...)}
}

func (r *runFields) WithGroup(name string) slog.Handler {
	return &runFields{h: r.h.WithGroup(name), fields: r.fields}
}

// kafkaGroup writes a record's "group" as "kafka_group". Safe for
// concurrent use.
type kafkaGroup struct{ h slog.Handler }

func (k *kafkaGroup) Enabled(ctx context.Context, l slog.Level) bool { return k.h.Enabled(ctx, l) }

func (k *kafkaGroup) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(renameGroup(a))
		return true
	})
	return k.h.Handle(ctx, out)
}

func (k *kafkaGroup) WithAttrs(as []slog.Attr) slog.Handler {
	renamed := make([]slog.Attr, len(as))
	for i, a := range as {
		renamed[i] = renameGroup(a)
	}
	return &kafkaGroup{h: k.h.WithAttrs(renamed)}
}

func (k *kafkaGroup) WithGroup(name string) slog.Handler { return &kafkaGroup{h: k.h.WithGroup(name)} }

// renameGroup is a with the key "kafka_group" for "group".
func renameGroup(a slog.Attr) slog.Attr {
	if a.Key == "group" {
		a.Key = "kafka_group"
	}
	return a
}

// opsServer is the operator window's server: listening from before the
// run's work (an address that cannot be had is refused first), serving
// from serve on, closed by close. Its methods are called by the run's
// goroutine only; the server's goroutine is its own, ended by close.
type opsServer struct {
	ln     net.Listener
	tokens console.Tokens
	srv    *http.Server
	win    *console.Window
	served chan error // Serve's end
	closed bool
}

// openOps reads the token file and takes the address (nil, nil without
// --listen). Either failing is a usage error naming it: before any work.
func openOps(o opsConfig) (*opsServer, error) {
	if o.listen == "" {
		return nil, nil
	}
	s := &opsServer{}
	if o.tokenFile != "" {
		f, err := os.Open(o.tokenFile)
		if err != nil {
			return nil, &usageError{&fileError{o.tokenFile, unwrapPathError(err)}}
		}
		s.tokens, err = console.ParseTokens(f)
		f.Close()
		if err != nil {
			return nil, &usageError{&fileError{o.tokenFile, err}}
		}
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, usagef("--listen %s: %v", o.listen, err)
	}
	s.ln = ln
	return s, nil
}

// serve builds the window over the run and serves it; it prints the
// address it listens on, one line on stderr: "blackbox: listening on
// http://HOST:PORT".
func (s *opsServer) serve(stderr io.Writer, run *recorder.Run, files *runFiles, srcs runSources, clock core.Clock, logger *slog.Logger) error {
	wc := console.Config{Engine: run.Engine(), Tokens: s.tokens, Clock: clock, Logger: logger}
	if len(s.tokens) > 0 {
		wc.Audit = run.Recorder()
	}
	wc.Status = func(w io.Writer) error { return WriteJSON(w, liveStatus(run, files, srcs)) }
	wc.Recording = files.store.recorded
	if fs := srcs.file; fs != nil {
		wc.Files = map[string]func() console.FileSkips{feedName: func() console.FileSkips {
			st := fs.Status()
			return console.FileSkips{HoleBytes: st.HoleBytes, Replaced: st.Replaced}
		}}
	}
	if srcs.client != nil {
		wc.Collectors = []prometheus.Collector{srcs.client}
	}
	if srcs.saves != nil {
		wc.StateSaves = map[string]func() int64{groupName: srcs.saves.total}
	}
	if ks := srcs.kafka; ks != nil {
		wc.Probes = map[string]console.Probe{feedName: func(ctx context.Context) error {
			err := ks.Ping(ctx)
			if errors.Is(err, kafkasource.ErrNoClient) {
				return fmt.Errorf("%w: %w", console.ErrStarting, err)
			}
			return err
		}}
		wc.Partitions = map[string]func(context.Context) []console.Partition{feedName: func(ctx context.Context) []console.Partition { return partitionsOf(ctx, ks) }}
	}
	win, err := console.New(wc)
	if err != nil {
		return err
	}
	s.win = win
	s.srv = &http.Server{Handler: win, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)} // a client's broken connection is no warning of the run's
	s.served = make(chan error, 1)
	go func() { s.served <- s.srv.Serve(s.ln) }()
	fmt.Fprintf(stderr, "blackbox: listening on http://%s\n", s.ln.Addr())
	return nil
}

// close stops the server (its connections given until ctx ends), or the
// listener when it never served.
func (s *opsServer) close(ctx context.Context) error {
	if s == nil || s.closed {
		return nil
	}
	s.closed = true
	if s.srv == nil {
		return s.ln.Close()
	}
	err := s.srv.Shutdown(ctx)
	if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// window is the served window, nil without --listen or before serve.
func (s *opsServer) window() *console.Window {
	if s == nil {
		return nil
	}
	return s.win
}

// liveStatus is the status JSON of a run under way, as --status writes it
// at its end (statusJSON): the engine's, the file source's, the outbox's.
func liveStatus(run *recorder.Run, files *runFiles, srcs runSources) statusJSON {
	st := statusJSON{Status: run.Engine().Status()}
	if srcs.file != nil {
		fst := srcs.file.Status()
		st.Source = &fst
	}
	if files.box != nil {
		bs := files.box.Status()
		st.Outbox = &bs
	}
	return st
}

// partitionsOf is the Kafka source's partitions for /metrics, with the
// ends the brokers list within ctx (-1 those they did not).
func partitionsOf(ctx context.Context, ks *kafkasource.Source) []console.Partition {
	ends, _ := ks.EndOffsets(ctx) // not listed: the ends stay unknown, the fetch's high watermarks stand
	var out []console.Partition
	for _, p := range ks.Status().Partitions {
		end, ok := ends[p.Topic][p.Partition]
		if !ok {
			end = -1
		}
		out = append(out, console.Partition{Topic: p.Topic, Partition: p.Partition, Committed: p.Committed,
			HighWatermark: p.HighWatermark, Lag: p.Lag, Lost: p.Lost, End: end})
	}
	return out
}

// beatEvery is how often the run's loop beats while it waits for its stop.
const beatEvery = 100 * time.Millisecond

// shutdown stops the run. After a signal (signalled) the window says
// draining at once (/readyz fails), the run goes on for --shutdown-delay,
// then stops reading and drains for at most --shutdown-timeout (the
// engine's drain bound), commits the prefix processed and closes the
// recording. A second signal during the delay ends it. The loop beats
// (win, when served) while it waits.
func (c *CLI) shutdown(ctx context.Context, o opsConfig, run *recorder.Run, win *console.Window, signalled bool) (stopErr, recErr error) {
	var beat <-chan time.Time
	if win != nil {
		t := time.NewTicker(beatEvery)
		defer t.Stop()
		beat = t.C
	}
	if signalled {
		var again chan os.Signal // a second signal ends the delay: listened to before the line says so
		if o.shutdownDelay > 0 {
			again = make(chan os.Signal, 1)
			signal.Notify(again, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(again)
		}
		if win != nil {
			win.Drain()
			delay := ""
			if o.shutdownDelay > 0 {
				delay = fmt.Sprintf("reading on for --shutdown-delay %s (a second SIGINT or SIGTERM ends it), then ", o.shutdownDelay)
			}
			fmt.Fprintf(c.stderr, "blackbox: stopping: /readyz fails from now on; %sdraining for at most --shutdown-timeout %s\n", delay, o.shutdownTimeout)
		}
		if o.shutdownDelay > 0 {
			delay := time.NewTimer(o.shutdownDelay)
		wait:
			for {
				select {
				case <-delay.C:
					break wait
				case <-again:
					delay.Stop()
					break wait
				case <-beat:
					win.Beat()
				}
			}
		}
	}
	// The groups' stop is bounded apart from the drain: a processor that
	// does not return is reported, not waited for.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout+time.Minute)
	defer cancel()
	type stopped struct{ stopErr, recErr error }
	done := make(chan stopped, 1)
	go func() {
		s, r := run.Stop(stopCtx)
		done <- stopped{s, r}
	}()
	for {
		select {
		case st := <-done:
			return st.stopErr, st.recErr
		case <-beat:
			win.Beat()
		}
	}
}

// ErrUndrained: a run stopped by a signal did not drain its queue within
// --shutdown-timeout.
var ErrUndrained = errors.New("the queue did not drain")

// undrained is why the run, stopped by a signal, did not drain within
// timeout (an error wrapping ErrUndrained naming what is left), nil when
// every feed drained.
func undrained(st engine.Status, timeout time.Duration) error {
	for _, f := range st.Feeds {
		if f.Drained {
			continue
		}
		var left int64
		for _, s := range f.Subscribers {
			if !s.Removed {
				left += max(0, s.Position-s.Dispatched)
			}
		}
		return fmt.Errorf("feed %s: %w within --shutdown-timeout %s: %d items read and not processed stay uncommitted (the next run reads them again); the prefix processed is committed",
			f.Feed, ErrUndrained, timeout, left)
	}
	return nil
}
