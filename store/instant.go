package store

import (
	"strings"
	"time"
)

// FormatInstant returns the text of an instant in every store (the instant
// column of CSV and SQLite): RFC3339Nano in UTC, "" for the zero time.
func FormatInstant(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// ParseInstant accepts exactly the text FormatInstant writes: "" (the zero
// time) or an RFC3339Nano instant in UTC without trailing zeros.
func ParseInstant(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	t, ok := parseReading(s)
	if !ok || t.IsZero() {
		return time.Time{}, false
	}
	return t, true
}

// FormatReads returns the text of clock readings in every store: each
// reading in RFC3339Nano UTC, joined by ';'; "" for none. A zero reading is
// written in full ("0001-01-01T00:00:00Z"), so one zero reading is not
// confused with none.
func FormatReads(ts []time.Time) string {
	if len(ts) == 0 {
		return ""
	}
	var b []byte
	for i, t := range ts {
		if i > 0 {
			b = append(b, ';')
		}
		b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	return string(b)
}

// ParseReads accepts exactly the text FormatReads writes; "" is no
// reading (nil).
func ParseReads(s string) ([]time.Time, bool) {
	if s == "" {
		return nil, true
	}
	ts := make([]time.Time, 0, strings.Count(s, ";")+1)
	for part := range strings.SplitSeq(s, ";") {
		t, ok := parseReading(part)
		if !ok {
			return nil, false
		}
		ts = append(ts, t)
	}
	return ts, true
}

// parseReading parses one canonical RFC3339Nano UTC instant.
func parseReading(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	t = t.UTC()
	var buf [64]byte
	if string(t.AppendFormat(buf[:0], time.RFC3339Nano)) != s {
		return time.Time{}, false
	}
	if t.IsZero() {
		return time.Time{}, true
	}
	return t, true
}
