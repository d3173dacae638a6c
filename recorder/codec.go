package recorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Codec turns inputs, outputs and journalled items into payload bytes and
// back. A payload may hold any bytes: the store encodes those a text format
// cannot hold (docs/FORMAT.md, "Payloads"). Name is
// written in the recording's META options. Implementations must be safe for
// concurrent use: groups encode on their own goroutines.
type Codec interface {
	Name() string
	Encode(v any) ([]byte, error)
	Decode(data []byte) (any, error)
}

// JSONCodec is the default Codec: compact JSON (no raw line breaks, HTML
// characters not escaped; map keys sorted, so equal values encode to equal
// bytes), decoded into generic values (map[string]any, []any, string, bool,
// nil and json.Number, so that numbers stay exact). It is safe for
// concurrent use.
type JSONCodec struct{}

// JSON is the JSON codec.
var JSON JSONCodec

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Name returns "json".
func (JSONCodec) Name() string { return "json" }

// Encode returns the compact JSON of v.
func (JSONCodec) Encode(v any) ([]byte, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return bytes.Clone(b[:len(b)-1]), nil // Encode ends with '\n'
}

// Decode decodes one JSON value; trailing data other than white space is an
// error.
func (JSONCodec) Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("recorder: json payload: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("recorder: json payload: trailing data after the value")
	}
	return v, nil
}
