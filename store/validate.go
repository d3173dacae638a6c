package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FieldError is the error of Append for a row the format cannot hold: a name
// with a line break, an unknown kind, an instant outside years 0-9999, a
// number the format forbids (a negative n, seq or offset, a DROPPED row of no
// item). It unwraps to ErrName (processor, source, key, detail) or
// ErrMalformed (kind, instant, reads, seq, offset, n, and a payload a
// FormatV1 recording cannot hold). It is immutable and safe for concurrent
// use.
type FieldError struct {
	Field  string // the column: "processor", "source", "key", "detail", "payload", "kind", "instant", "reads", "seq", "offset", "n"
	Value  string // the refused value
	Err    error  // ErrName or ErrMalformed
	Reason string // why, when it is not the column's usual reason
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
	case e.Reason != "":
		return e.Reason
	case e.Field == "kind":
		return "unknown kind"
	case e.Field == "instant" || e.Field == "reads":
		return "instant outside years 0-9999"
	default:
		return "contains a line break"
	}
}

// Unwrap returns the sentinel: ErrName or ErrMalformed.
func (e *FieldError) Unwrap() error { return e.Err }

// Validate reports whether every store can hold e: a known kind, no line
// break ('\n' or '\r') in Processor, Source, Key or Detail, instants between
// years 0 and 9999, and the numbers ValidateNumbers allows. The Payload may
// be any bytes. Every backend's Append calls it on every row before writing
// any, and every reader treats a row that fails it as malformed. The error
// is a *FieldError.
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
	if err := ValidateNumbers(&e); err != nil {
		return err
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

// ValidateNumbers reports whether the numbers of e are ones the format
// allows: seq, offset and n are never negative, and a DROPPED row loses at
// least one item (n >= 1). Index and epoch may hold any value (an index out
// of order is a gap, not a malformed row). The error is a *FieldError
// wrapping ErrMalformed.
func ValidateNumbers(e *Entry) error {
	bad := func(field string, v int64, why string) error {
		return &FieldError{Field: field, Value: strconv.FormatInt(v, 10), Err: ErrMalformed, Reason: why}
	}
	switch {
	case e.Seq < 0:
		return bad("seq", e.Seq, "negative")
	case e.Offset < 0:
		return bad("offset", e.Offset, "negative")
	case e.N < 0:
		return bad("n", e.N, "negative")
	case e.Kind == KindDropped && e.N < 1:
		return bad("n", e.N, "a DROPPED row loses at least one item")
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
