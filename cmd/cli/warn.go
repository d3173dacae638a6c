package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/blackbox-audit/blackbox/engine"
)

// warnHandler is the slog.Handler of a run's warnings (the engine's, the
// file source's, the recorder's): each record is one line on the CLI's
// stderr, "<name>: warning: <message>" (name: the CLI's, WithName; empty:
// blackbox), the engine's own prefix dropped,
// followed by its attributes as key=value, but for the attributes of the
// item an engine's warning is about (engine.LogFeed ...), which its
// message names already. Records below Warn are discarded. It is safe for
// concurrent use: a line is one Write, made under a lock the handlers
// derived from it (WithAttrs, WithGroup) share, so that a writer that is
// not itself safe for concurrent use (a test's buffer) gets one at a time.
type warnHandler struct {
	mu    *sync.Mutex // guards w's writes (newWarnHandler's, shared by derived handlers)
	w     io.Writer
	name  string
	attrs []slog.Attr // WithAttrs, group-qualified keys
	group string      // WithGroup, as a key prefix "a.b."
}

// engineLogPrefix begins the engine's messages.
const engineLogPrefix = "blackbox engine: "

// engineItemKeys are the keys of the engine's attributes of an item.
var engineItemKeys = map[string]bool{engine.LogFeed: true, engine.LogGroup: true, engine.LogSeq: true, engine.LogPosition: true}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	name := h.name
	if name == "" {
		name = DefaultName
	}
	b.WriteString(name + ": warning: ")
	msg, ofEngine := strings.CutPrefix(r.Message, engineLogPrefix)
	b.WriteString(msg)
	for _, a := range h.attrs {
		writeAttr(&b, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		if !ofEngine || !engineItemKeys[a.Key] {
			writeAttr(&b, h.group, a)
		}
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b.Bytes())
	return err
}

// newWarnHandler is the handler of warnings on w, named name.
func newWarnHandler(w io.Writer, name string) *warnHandler {
	return &warnHandler{mu: new(sync.Mutex), w: w, name: name}
}

func writeAttr(b *bytes.Buffer, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			writeAttr(b, prefix, g)
		}
		return
	}
	b.WriteString(" " + prefix + a.Key + "=" + a.Value.String())
}

func (h *warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := &warnHandler{mu: h.mu, w: h.w, name: h.name, group: h.group, attrs: append([]slog.Attr(nil), h.attrs...)}
	for _, a := range as {
		if h.group != "" {
			a.Key = h.group + a.Key
		}
		n.attrs = append(n.attrs, a)
	}
	return n
}

func (h *warnHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &warnHandler{mu: h.mu, w: h.w, name: h.name, attrs: h.attrs, group: h.group + name + "."}
}
