package store

import (
	"encoding/json"
	"fmt"
)

// EncodeMeta returns the META row holding m: Processor "", Index 1, Detail
// the JSON of m. An empty m.Format is written as Format; Created is kept in
// UTC.
func EncodeMeta(m Meta) Entry {
	if m.Format == "" {
		m.Format = Format
	}
	m.Created = normTime(m.Created)
	b, err := json.Marshal(m)
	if err != nil {
		// Meta holds only strings, maps of strings and a time: Marshal
		// fails only for a time outside years 0-9999.
		panic(fmt.Sprintf("store: EncodeMeta: %v", err))
	}
	return Entry{Kind: KindMeta, Index: 1, Detail: string(b)}
}

// DecodeMeta decodes a META row. It refuses, with an error wrapping
// ErrFormat, a row that is not META, a Detail that is not the JSON of a
// Meta, and a format other than Format: a reader does not guess at another
// version's rows.
func DecodeMeta(e Entry) (Meta, error) {
	if e.Kind != KindMeta {
		return Meta{}, fmt.Errorf("%w: first row is %q, want META", ErrFormat, e.Kind)
	}
	var m Meta
	if err := json.Unmarshal([]byte(e.Detail), &m); err != nil {
		return Meta{}, fmt.Errorf("%w: META detail is not JSON: %v", ErrFormat, err)
	}
	if m.Format != Format {
		return Meta{}, fmt.Errorf("%w: recording format %q, this build reads %q", ErrFormat, m.Format, Format)
	}
	m.Created = normTime(m.Created)
	return m, nil
}
