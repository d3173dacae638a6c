package store

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrPayload: a payload the format cannot hold (a raw line break). Compact
// JSON never holds one.
var ErrPayload = errors.New("store: invalid payload")

// FieldError is the error of Append for a row the format cannot hold: a name
// or payload with a line break, an unknown kind, an instant outside years
// 0-9999. It unwraps to ErrName (processor, source, key, detail), ErrPayload
// (payload) or ErrMalformed (kind, instant, reads). It is immutable and safe
// for concurrent use.
type FieldError struct {
	Field string // the column: "processor", "source", "key", "detail", "payload", "kind", "instant", "reads"
	Value string // the refused value
	Err   error  // ErrName, ErrPayload or ErrMalformed
}

func (e *FieldError) Error() string {
	v := e.Value
	if len(v) > 80 {
		v = v[:77] + "..."
	}
	return fmt.Sprintf("%v: %s %q: %s", e.Err, e.Field, v, e.reason())
}

func (e *FieldError) reason() string {
	switch {
	case e.Field == "kind":
		return "unknown kind"
	case e.Field == "instant" || e.Field == "reads":
		return "instant outside years 0-9999"
	default:
		return "contains a line break"
	}
}

// Unwrap returns the sentinel: ErrName, ErrPayload or ErrMalformed.
func (e *FieldError) Unwrap() error { return e.Err }

// Validate reports whether every store can hold e: a known kind, no line
// break ('\n' or '\r') in Processor, Source, Key, Detail or Payload, instants
// between years 0 and 9999. Every backend's Append calls it on every row
// before writing any, and every reader treats a row that fails it as
// malformed. The error is a *FieldError.
func Validate(e Entry) error {
	if !e.Kind.Valid() {
		return &FieldError{Field: "kind", Value: string(e.Kind), Err: ErrMalformed}
	}
	for _, f := range [...]struct{ name, v string }{
		{"processor", e.Processor}, {"source", e.Source}, {"key", e.Key}, {"detail", e.Detail},
	} {
		if strings.ContainsAny(f.v, "\r\n") {
			return &FieldError{Field: f.name, Value: f.v, Err: ErrName}
		}
	}
	for _, b := range e.Payload {
		if b == '\n' || b == '\r' {
			return &FieldError{Field: "payload", Value: string(e.Payload), Err: ErrPayload}
		}
	}
	if !instantOK(e.Instant) {
		return &FieldError{Field: "instant", Value: e.Instant.String(), Err: ErrMalformed}
	}
	for _, t := range e.Reads {
		if !instantOK(t) {
			return &FieldError{Field: "reads", Value: t.String(), Err: ErrMalformed}
		}
	}
	return nil
}

func instantOK(t time.Time) bool {
	if t.IsZero() {
		return true
	}
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

// Normalize returns e as every store reads it back, sharing no memory with
// e: instants in UTC without a monotonic reading (the zero time stays the
// zero time), an empty Payload or Reads as nil.
func Normalize(e Entry) Entry {
	e.Instant = normTime(e.Instant)
	if len(e.Payload) == 0 {
		e.Payload = nil
	} else {
		e.Payload = append([]byte(nil), e.Payload...)
	}
	if len(e.Reads) == 0 {
		e.Reads = nil
	} else {
		rs := make([]time.Time, len(e.Reads))
		for i, t := range e.Reads {
			rs[i] = normTime(t)
		}
		e.Reads = rs
	}
	return e
}

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}
