package apps

import (
	"fmt"

	"github.com/blackbox-audit/blackbox/core"
)

// DefaultThreshold is the alerts threshold when none is set.
const DefaultThreshold = 1000

// AlertsOptions configure the alerts app. A plain value: NewAlerts only reads it.
type AlertsOptions struct {
	// Threshold: an account,amount line with |amount| >= Threshold alerts.
	// 0 means DefaultThreshold; negative is refused.
	Threshold int64
}

// Alert is the output of the alerts app, to sink "alerts". A plain value,
// not modified after it is emitted.
type Alert struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	At      string `json:"at"` // Cycle.Now, RFC 3339 with nanoseconds, UTC
}

// Alerts is a stateless threshold filter: for each account,amount line with
// |amount| >= its threshold it emits an Alert; every other line (other
// commands, malformed lines) emits nothing. It is not safe for concurrent
// use (the engine never calls a processor concurrently).
type Alerts struct {
	threshold int64
}

// NewAlerts returns the alerts app.
func NewAlerts(opts AlertsOptions) (*Alerts, error) {
	switch {
	case opts.Threshold < 0:
		return nil, fmt.Errorf("apps: alerts threshold %d is negative", opts.Threshold)
	case opts.Threshold == 0:
		opts.Threshold = DefaultThreshold
	}
	return &Alerts{threshold: opts.Threshold}, nil
}

// OnEvent handles one line.
func (a *Alerts) OnEvent(c *core.Cycle, ev any) error {
	line, ok := ev.(string)
	if !ok {
		return nil
	}
	fs := fields(line)
	if len(fs) != 2 {
		return nil
	}
	n, err := parseAmount(fs[0], fs[1])
	if err != nil || (n < a.threshold && n > -a.threshold) {
		return nil
	}
	c.Emit(AlertsSink, Alert{Account: fs[0], Amount: n, At: stamp(c.Now())})
	return nil
}
