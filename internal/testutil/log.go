package testutil

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Logger returns a logger writing text to t's output.
func Logger(t testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// Logs is a slog.Handler keeping each record's message, at every level, so
// that a test can check what was warned. The zero Logs is ready to use.
// Safe for concurrent use.
type Logs struct {
	mu  sync.Mutex
	all []string
}

// Logger returns a *slog.Logger whose records l keeps.
func (l *Logs) Logger() *slog.Logger { return slog.New(l) }

// Enabled reports true: l keeps records of every level.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs returns l: attributes are not kept.
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l: groups are not kept.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Handle keeps r's message.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.all = append(l.all, r.Message)
	l.mu.Unlock()
	return nil
}

// Has reports whether a message kept contains sub.
func (l *Logs) Has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.all {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Count returns the number of messages kept.
func (l *Logs) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// String returns the messages kept, one a line.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}
