package store_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blackbox-audit/blackbox/store"
)

// TestPayloadTextForm: a payload is its own text when it is valid UTF-8
// with no '\n', '\r' or NUL and does not begin with '~'; otherwise '~' and
// padded base64. Decoding accepts exactly what encoding writes.
func TestPayloadTextForm(t *testing.T) {
	tests := []struct {
		payload []byte
		text    string
	}{
		{nil, ""},
		{[]byte(`{"a":1}`), `{"a":1}`},
		{[]byte("ünïcødé, \"quoted\""), "ünïcødé, \"quoted\""},
		{[]byte("a~b"), "a~b"},
		{[]byte("~"), "~fg=="},
		{[]byte("line\nbreak"), "~bGluZQpicmVhaw=="},
		{[]byte("cr\r"), "~Y3IN"},
		{[]byte{0}, "~AA=="},
		{[]byte{0xff}, "~/w=="},
	}
	for _, tt := range tests {
		if got := store.EncodePayload(tt.payload); got != tt.text {
			t.Errorf("EncodePayload(%q) = %q, want %q", tt.payload, got, tt.text)
		}
		got, err := store.DecodePayload(tt.text)
		if err != nil || !bytes.Equal(got, tt.payload) {
			t.Errorf("DecodePayload(%q) = %q, %v; want %q", tt.text, got, err, tt.payload)
		}
	}
	for _, bad := range []string{"~", "~not base64", "~AA", "~e30=", "line\nbreak", "nul\x00", "\xff", "~AA==\n"} {
		if got, err := store.DecodePayload(bad); err == nil {
			t.Errorf("DecodePayload(%q) = %q, want an error", bad, got)
		}
	}
	// Version 1 stores payloads verbatim.
	if got, err := store.PayloadBytes(store.FormatV1, "~fee"); err != nil || string(got) != "~fee" {
		t.Errorf("PayloadBytes(v1, ~fee) = %q, %v; want ~fee", got, err)
	}
	if _, err := store.PayloadText(store.FormatV1, []byte("a\nb")); !errors.Is(err, store.ErrMalformed) {
		t.Errorf("PayloadText(v1, a line break) = %v, want ErrMalformed", err)
	}
}
