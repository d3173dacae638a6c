package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// ErrFormat, a row that is not META, a Detail that is not one JSON object
// of a Meta, a Detail with a key repeated in one object (at any depth, keys
// compared without regard to case as encoding/json matches them: a reader
// does not pick one of two values), and a format other than Format,
// FormatV5, FormatV4, FormatV3, FormatV2 and FormatV1: a reader does not guess at
// another version's rows.
func DecodeMeta(e Entry) (Meta, error) {
	if e.Kind != KindMeta {
		return Meta{}, fmt.Errorf("%w: first row is %q, want META", ErrFormat, e.Kind)
	}
	if err := uniqueKeys([]byte(e.Detail)); err != nil {
		return Meta{}, fmt.Errorf("%w: META detail: %v", ErrFormat, err)
	}
	var m Meta
	if err := json.Unmarshal([]byte(e.Detail), &m); err != nil {
		return Meta{}, fmt.Errorf("%w: META detail is not JSON: %v", ErrFormat, err)
	}
	if m.Format != Format && m.Format != FormatV5 && m.Format != FormatV4 && m.Format != FormatV3 && m.Format != FormatV2 && m.Format != FormatV1 {
		return Meta{}, fmt.Errorf("%w: recording format %q, this build reads %q, %q, %q, %q, %q and %q", ErrFormat, m.Format, Format, FormatV5, FormatV4, FormatV3, FormatV2, FormatV1)
	}
	m.Created = normTime(m.Created)
	return m, nil
}

// uniqueKeys checks that b is one JSON object, with no key repeated within
// any object it holds.
func uniqueKeys(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	t, err := d.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if t != json.Delim('{') {
		return fmt.Errorf("not a JSON object")
	}
	if err := objectKeys(d, ""); err != nil {
		return err
	}
	if _, err := d.Token(); err == nil {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

// objectKeys reads the rest of an object whose '{' was read.
func objectKeys(d *json.Decoder, path string) error {
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %v", err)
		}
		key, _ := t.(string)
		// encoding/json matches keys without regard to case: "Format"
		// would set the format too.
		folded := strings.ToUpper(strings.ToLower(key))
		if seen[folded] {
			return fmt.Errorf("key %q repeated in object %s", key, objectName(path))
		}
		seen[folded] = true
		if err := valueKeys(d, path+"."+key); err != nil {
			return err
		}
	}
	_, err := d.Token() // '}'
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return nil
}

func valueKeys(d *json.Decoder, path string) error {
	t, err := d.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	switch t {
	case json.Delim('{'):
		return objectKeys(d, path)
	case json.Delim('['):
		for i := 0; d.More(); i++ {
			if err := valueKeys(d, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		if _, err := d.Token(); err != nil { // ']'
			return fmt.Errorf("not JSON: %v", err)
		}
	}
	return nil
}

func objectName(p string) string {
	if p == "" {
		return "(top level)"
	}
	return p[1:]
}

// ExpectedStreams returns the processor streams the recording must hold,
// sorted: Streams for a recording of Format, the keys of Apps for one of
// FormatV1 (which has no stream list).
func (m Meta) ExpectedStreams() []string {
	if m.Format == FormatV1 {
		return slices.Sorted(maps.Keys(m.Apps))
	}
	s := slices.Clone(m.Streams)
	slices.Sort(s)
	return slices.Compact(s)
}
