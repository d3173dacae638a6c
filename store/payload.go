package store

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// payloadMark begins the base64 text form of a payload (Format).
const payloadMark = '~'

// MaxRowSize is the longest row a recording holds: the length of the row's
// CSV line, its '\n' included (64 MiB). Readers of CSV read lines up to this
// length; every writer refuses a longer row (ErrTooLarge), whatever its
// backend, so that every recording converts to CSV and reads back.
const MaxRowSize = 64 << 20

// ErrTooLarge: a row whose CSV line would be longer than MaxRowSize. The
// error of Append is a *SizeError naming the column and the size.
var ErrTooLarge = errors.New("store: row too large")

// SizeError is the error of Append for a row longer than MaxRowSize once
// written as a CSV line. Column is the row's largest column. It unwraps to
// ErrTooLarge. It is immutable and safe for concurrent use.
type SizeError struct {
	Processor  string
	Index      int64
	Column     string // the largest column: "payload", "detail" ...
	ColumnSize int    // that column's bytes in the CSV line
	Size       int    // the row's CSV line, '\n' included
	Limit      int    // MaxRowSize
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%v: processor %q index %d: a CSV line of %d bytes (column %s: %d bytes), the limit is %d",
		ErrTooLarge, e.Processor, e.Index, e.Size, e.Column, e.ColumnSize, e.Limit)
}

// Unwrap returns ErrTooLarge.
func (e *SizeError) Unwrap() error { return ErrTooLarge }

// EncodePayload returns the text form of a payload in a recording of
// Format: the bytes themselves when they are valid UTF-8, hold no '\n',
// '\r' or NUL and do not begin with '~'; otherwise '~' followed by the
// standard padded base64 of the bytes (RFC 4648). Any bytes have a text
// form, and the text form holds no line break.
func EncodePayload(b []byte) string {
	if plainPayload(b) {
		return string(b)
	}
	return string(payloadMark) + base64.StdEncoding.EncodeToString(b)
}

// PlainPayload reports whether b is its own payload text (EncodePayload
// returns it as it is): valid UTF-8, not beginning with '~', without a
// line break or NUL.
func PlainPayload(b []byte) bool { return plainPayload(b) }

// plainPayload reports whether b is its own text form.
func plainPayload(b []byte) bool {
	return !startsOrHolds(b) && utf8.Valid(b)
}

// startsOrHolds reports whether b begins with '~' or holds '\n', '\r' or
// NUL.
func startsOrHolds(b []byte) bool {
	if len(b) > 0 && b[0] == payloadMark {
		return true
	}
	for i := 0; i < len(b); i++ {
		if c := b[i]; c == '\n' || c == '\r' || c == 0 {
			return true
		}
	}
	return false
}

// DecodePayload returns the bytes of a payload's text form in a recording
// of Format. It accepts exactly the text EncodePayload writes: a text that
// begins with '~' and is not padded base64, a base64 form of bytes that are
// their own text form, or a plain text that is not its own text form (a
// line break, a NUL, invalid UTF-8) is an error, and the row holding it is
// malformed.
func DecodePayload(s string) ([]byte, error) {
	return PayloadBytes(Format, s)
}

// PayloadText returns the text form of a payload in a recording of format
// (Format, or "" for it: EncodePayload; FormatV1: the bytes verbatim, and an
// error, a *FieldError wrapping ErrMalformed, for bytes with a line break,
// which a FormatV1 recording cannot hold). Writers write the payloads of a
// recording in the format of its META row, so that a FormatV1 recording
// copies row for row.
func PayloadText(format string, b []byte) (string, error) {
	if format != FormatV1 {
		return EncodePayload(b), nil
	}
	s := string(b)
	if strings.ContainsAny(s, "\r\n") {
		return "", &FieldError{Field: "payload", Value: s, Err: ErrMalformed,
			Reason: "contains a line break, which a " + FormatV1 + " recording cannot hold"}
	}
	return s, nil
}

// PayloadBytes returns the payload of a payload text in a recording of
// format, as PayloadText wrote it: DecodePayload's rule for Format, the
// bytes verbatim for FormatV1 (where a line break is an error). An error
// makes the row malformed.
func PayloadBytes(format, s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b := []byte(s)
	decoded, plain, err := ParsePayload(format, b)
	if err != nil || !plain {
		return decoded, err
	}
	return b, nil
}

// ParsePayload checks a payload text of a recording of format, as
// PayloadBytes does, without copying it: plain means the payload is the text
// itself; otherwise decoded holds its bytes (a base64 form). A plain text
// costs no allocation.
func ParsePayload(format string, text []byte) (decoded []byte, plain bool, err error) {
	switch {
	case format == FormatV1:
		if bytes.ContainsAny(text, "\r\n") {
			return nil, false, errors.New("payload contains a line break")
		}
		return nil, true, nil
	case len(text) == 0 || text[0] != payloadMark:
		if !plainPayload(text) {
			return nil, false, errors.New("payload text holds a line break, a NUL or invalid UTF-8 and does not begin with '~'")
		}
		return nil, true, nil
	}
	if bytes.ContainsAny(text, "\r\n") { // base64 decoders skip them
		return nil, false, errors.New("payload text after '~' holds a line break")
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(text)-1))
	n, err := base64.StdEncoding.Strict().Decode(b, text[1:])
	if err != nil {
		return nil, false, fmt.Errorf("payload text after '~' is not padded base64: %v", err)
	}
	b = b[:n]
	if plainPayload(b) {
		return nil, false, errors.New("payload in base64 whose bytes are their own text form")
	}
	return b, false, nil
}

// CheckRowSize returns a *SizeError if the CSV line of e, in a recording of
// format (its payload written by PayloadText), is longer than MaxRowSize.
// Every writer calls it on every row before writing any. It allocates
// nothing for a row that cannot be that long, and never copies the payload.
func CheckRowSize(e *Entry, format string) error {
	// A bound first: every text quoted with every byte doubled (base64
	// makes 4 bytes of 3), every number and instant at its longest.
	bound := 2*(len(e.Processor)+len(e.Source)+len(e.Key)+len(e.Payload)+1+len(e.Detail)) + 10 +
		5*20 + len("DELIVERY") + 64*(1+len(e.Reads)) + 13
	if bound <= MaxRowSize {
		return nil
	}
	size, col, colSize := rowSize(e, format)
	if size <= MaxRowSize {
		return nil
	}
	return &SizeError{Processor: e.Processor, Index: e.Index, Column: col, ColumnSize: colSize, Size: size, Limit: MaxRowSize}
}

// RowSize returns the length of the CSV line of e in a recording of format,
// its '\n' included: what CheckRowSize compares with MaxRowSize.
func RowSize(e *Entry, format string) int {
	size, _, _ := rowSize(e, format)
	return size
}

// rowSize returns the length of e's CSV line, and its largest column.
func rowSize(e *Entry, format string) (size int, col string, colSize int) {
	cols := [...]struct {
		name string
		size int
	}{
		{"processor", csvFieldSize(e.Processor)},
		{"index", len(strconv.FormatInt(e.Index, 10))},
		{"kind", csvFieldSize(string(e.Kind))},
		{"source", csvFieldSize(e.Source)},
		{"seq", len(strconv.FormatInt(e.Seq, 10))},
		{"instant", len(FormatInstant(e.Instant))},
		{"epoch", len(strconv.FormatInt(e.Epoch, 10))},
		{"key", csvFieldSize(e.Key)},
		{"offset", len(strconv.FormatInt(e.Offset, 10))},
		{"n", len(strconv.FormatInt(e.N, 10))},
		{"payload", payloadFieldSize(format, e.Payload)},
		{"detail", csvFieldSize(e.Detail)},
		{"reads", csvFieldSize(FormatReads(e.Reads))},
	}
	size, big := len(cols), 0 // 12 commas and the '\n'
	for i, c := range cols {
		size += c.size
		if c.size > cols[big].size {
			big = i
		}
	}
	return size, cols[big].name, cols[big].size
}

// payloadFieldSize is the length of the CSV field of a payload as
// PayloadText writes it, without writing it: the base64 form ('~' and the
// base64 alphabet) is never quoted.
func payloadFieldSize(format string, b []byte) int {
	if format != FormatV1 && !plainPayload(b) {
		return 1 + base64.StdEncoding.EncodedLen(len(b))
	}
	return csvFieldSize(b)
}

// csvFieldSize is the length of s as a CSV field written by encoding/csv
// (Comma ',', no CRLF): quoted when it holds ',', '"', '\r' or '\n', begins
// with a space or is `\.`, each '"' doubled.
func csvFieldSize[T string | []byte](s T) int {
	if len(s) == 0 {
		return 0
	}
	quote, quotes := len(s) == 2 && s[0] == '\\' && s[1] == '.', 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quotes++
			quote = true
		case ',', '\r', '\n':
			quote = true
		}
	}
	if !quote {
		var r rune
		if s[0] < utf8.RuneSelf {
			r = rune(s[0])
		} else {
			r, _ = utf8.DecodeRuneInString(string(s[:min(len(s), utf8.UTFMax)]))
		}
		quote = unicode.IsSpace(r)
	}
	if !quote {
		return len(s)
	}
	return len(s) + 2 + quotes
}
