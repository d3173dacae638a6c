package apps

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// The app names.
const (
	LedgerName = "ledger"
	AlertsName = "alerts"
)

// The sinks the apps emit to.
const (
	LedgerSink = "ledger"
	AlertsSink = "alerts"
)

// ErrUnknownApp: New was asked for an app that does not exist.
var ErrUnknownApp = errors.New("apps: unknown app")

// Options configure the apps New builds. A plain value: New only reads it.
type Options struct {
	Ledger LedgerOptions
	Alerts AlertsOptions
}

// Names lists the built-in apps, sorted.
func Names() []string { return []string{AlertsName, LedgerName} }

// New builds the named app. An unknown name gives an error wrapping
// ErrUnknownApp.
func New(name string, opts Options) (core.Processor, error) {
	switch name {
	case LedgerName:
		return NewLedger(opts.Ledger)
	case AlertsName:
		return NewAlerts(opts.Alerts)
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownApp, name, strings.Join(Names(), ", "))
}

// Decode decodes a recorded input payload, the JSON string of a line, back
// into the line (a string), for replay.
func Decode(payload []byte) (any, error) {
	var s string
	if err := json.Unmarshal(payload, &s); err != nil {
		return nil, fmt.Errorf("apps: input payload %.80q is not a JSON string: %w", payload, err)
	}
	return s, nil
}

// fields splits a line on commas and trims each field.
func fields(line string) []string {
	fs := strings.Split(strings.TrimSpace(line), ",")
	for i, f := range fs {
		fs[i] = strings.TrimSpace(f)
	}
	return fs
}

// parseAmount parses an account,amount pair.
func parseAmount(account, amount string) (int64, error) {
	if account == "" {
		return 0, errors.New("empty account")
	}
	n, err := strconv.ParseInt(amount, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q is not a 64-bit integer", amount)
	}
	return n, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
