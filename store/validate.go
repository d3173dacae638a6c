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
// years 0 and 9999, and the fields ValidateFields allows. The Payload may
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
		if lineBreak(f.v) {
			return &FieldError{Field: f.name, Value: f.v, Err: ErrName}
		}
	}
	if err := ValidateFields(&e); err != nil {
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

// lineBreak reports whether s holds a '\r' or a '\n': two IndexByte
// scans, several times faster than strings.ContainsAny on the short names
// every row holds (a tenth of a replay's decoding before).
func lineBreak(s string) bool {
	return strings.IndexByte(s, '\n') >= 0 || strings.IndexByte(s, '\r') >= 0
}

// ValidateIn is Validate for a row of a recording of format (the format of
// its META row): it also refuses, with a *FieldError wrapping ErrMalformed,
// a kind that version does not have (a CONTROL or COMPLETED row in a
// FormatV5 recording, a STATE row in a FormatV4 one,
// a STATE or LOST row in a FormatV3 one, a STATE, LOST or COMMIT row in a
// FormatV2 or FormatV1 one). Writers check every row with it.
func ValidateIn(format string, e Entry) error {
	if err := Validate(e); err != nil {
		return err
	}
	if !e.Kind.In(format) {
		return &FieldError{Field: "kind", Value: string(e.Kind), Err: ErrMalformed, Reason: "a " + format + " recording has no " + string(e.Kind) + " rows"}
	}
	return nil
}

// ValidateFields reports whether the fields of e are ones the format
// allows: seq, offset and n are never negative, a DROPPED row loses at least
// one item (n >= 1), and every field its kind does not use is zero (0, empty,
// no instant: docs/FORMAT.md, "Kinds"). Index and epoch may hold any value
// where they are used (an index out of order is a gap, not a malformed
// row). The error is a *FieldError wrapping ErrMalformed.
func ValidateFields(e *Entry) error {
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
	case e.Kind == KindCompleted && e.N < 1:
		return bad("n", e.N, "a COMPLETED row covers at least one item")
	}
	used, ok := usedFields[e.Kind]
	if !ok {
		return nil // an unknown kind is Validate's to report
	}
	unused := func(field, v string) error {
		return &FieldError{Field: field, Value: v, Err: ErrMalformed, Reason: "a " + string(e.Kind) + " row does not use it: it must be empty or 0"}
	}
	switch {
	case used&fSource == 0 && e.Source != "":
		return unused("source", e.Source)
	case used&fSeq == 0 && e.Seq != 0:
		return unused("seq", strconv.FormatInt(e.Seq, 10))
	case used&fInstant == 0 && !e.Instant.IsZero():
		return unused("instant", e.Instant.String())
	case used&fEpoch == 0 && e.Epoch != 0:
		return unused("epoch", strconv.FormatInt(e.Epoch, 10))
	case used&fKey == 0 && e.Key != "":
		return unused("key", e.Key)
	case used&fOffset == 0 && e.Offset != 0:
		return unused("offset", strconv.FormatInt(e.Offset, 10))
	case used&fN == 0 && e.N != 0:
		return unused("n", strconv.FormatInt(e.N, 10))
	case used&fPayload == 0 && len(e.Payload) != 0:
		return unused("payload", string(e.Payload))
	case used&fDetail == 0 && e.Detail != "":
		return unused("detail", e.Detail)
	case used&fReads == 0 && len(e.Reads) != 0:
		return unused("reads", e.Reads[0].String())
	}
	return nil
}

// The fields a kind may use (docs/FORMAT.md, "Kinds"); processor, index and
// kind are every row's.
const (
	fSource = 1 << iota
	fSeq
	fInstant
	fEpoch
	fKey
	fOffset
	fN
	fPayload
	fDetail
	fReads
)

var usedFields = map[Kind]int{
	KindMeta:      fDetail,
	KindStart:     fInstant | fPayload,
	KindDelivery:  fSource | fSeq | fEpoch | fKey | fOffset | fN,
	KindIndexed:   fSource | fSeq | fInstant | fN | fReads,
	KindInline:    fSource | fSeq | fInstant | fN | fPayload | fReads,
	KindTimer:     fSeq | fInstant | fN | fReads,
	KindOutput:    fSource | fSeq | fPayload,
	KindDropped:   fSource | fSeq | fOffset | fN | fDetail,
	KindFailed:    fSource | fSeq | fInstant | fDetail,
	KindEnd:       fInstant | fN | fDetail,
	KindJournal:   fSource | fSeq | fPayload,
	KindCommit:    fSource | fSeq | fEpoch | fKey | fOffset,
	KindLost:      fSource | fSeq | fEpoch | fKey | fOffset | fN | fDetail,
	KindState:     fSource | fInstant | fDetail,
	KindControl:   fSource | fInstant | fDetail,
	KindCompleted: fSource | fSeq | fEpoch | fKey | fOffset | fN | fDetail,
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
