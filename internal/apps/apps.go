package apps

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// All returns the built-in apps: alerts and ledger.
func All() []core.App { return []core.App{AlertsApp(), LedgerApp()} }

// AlertsApp is the alerts app. Its option: threshold (a non-negative integer;
// 0 or none: DefaultThreshold).
func AlertsApp() core.App {
	return core.App{Name: AlertsName, Decode: Decode, KeyFor: keyFor, New: func(o map[string]string) (core.Processor, error) {
		var opts AlertsOptions
		for k, v := range o {
			if k != "threshold" {
				return nil, fmt.Errorf("%w: alerts takes no option %q (only threshold)", core.ErrOption, k)
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: alerts threshold %q is not a non-negative integer", core.ErrOption, v)
			}
			opts.Threshold = n
		}
		return NewAlerts(opts)
	}}
}

// The ledger's options (core.App options): its state file and how it
// batches its saves (LedgerOptions).
const (
	OptionState         = "state"          // LedgerOptions.StatePath
	OptionStateEvery    = "state-every"    // LedgerOptions.SaveEvery: a positive integer
	OptionStateInterval = "state-interval" // LedgerOptions.SaveInterval: a positive Go duration ("100ms")
)

// LedgerApp is the ledger app. Its options: state (the durable state file;
// none: the ledger keeps its state in memory only), state-every and
// state-interval (its batches of saves; LedgerOptions).
func LedgerApp() core.App {
	return core.App{Name: LedgerName, Decode: Decode, KeyFor: keyFor, Live: []string{OptionState, OptionStateEvery, OptionStateInterval}, New: func(o map[string]string) (core.Processor, error) {
		var opts LedgerOptions
		for k, v := range o {
			switch k {
			case OptionState:
				opts.StatePath = v
			case OptionStateEvery:
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return nil, fmt.Errorf("%w: ledger %s %q is not a positive integer", core.ErrOption, k, v)
				}
				opts.SaveEvery = n
			case OptionStateInterval:
				d, err := time.ParseDuration(v)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("%w: ledger %s %q is not a positive duration (like 100ms)", core.ErrOption, k, v)
				}
				opts.SaveInterval = d
			default:
				return nil, fmt.Errorf("%w: ledger takes no option %q (only %s, %s, %s)", core.ErrOption, k, OptionState, OptionStateEvery, OptionStateInterval)
			}
		}
		return NewLedger(opts)
	}}
}

// Key is the key of a line for key-ordered workers: its account (the
// first field; for a transfer the debited account), so that one account's
// lines reach one worker in order. The ledger's balances of a worker hold
// the postings of its accounts, and the credits of the transfers they made
// (a credit to another worker's account is applied where the transfer
// is): with several workers an account's balance is the sum over the
// workers' states. The alerts' sensor is the account too.
func Key(item any) string {
	line, _ := item.(string)
	fs := fields(line)
	if fs[0] == "transfer" && len(fs) > 1 {
		return fs[1]
	}
	return fs[0]
}

// keyFor is the built-in apps' core.App.KeyFor: Key, whatever the options.
func keyFor(map[string]string) (func(any) string, error) { return Key, nil }

// Decode decodes a recorded input payload, the JSON string of a line, back
// into the line (a string), for replay.
func Decode(payload []byte) (any, error) {
	if s, ok := plainJSONString(payload); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(payload, &s); err != nil {
		return nil, fmt.Errorf("apps: input payload %.80q is not a JSON string: %w", payload, err)
	}
	return s, nil
}

// plainJSONString is the string a JSON string literal without escapes
// stands for: a quote, valid UTF-8 with no quote, backslash or control
// character, a quote; what json.Unmarshal gives, without its reflection
// (the common payload of a replay). ok is false for anything else, which
// json.Unmarshal then decodes (TestPlainJSONStringsDecodeAsEncodingJSON).
func plainJSONString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
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
