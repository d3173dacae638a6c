package recorder_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

func TestJSONCodec(t *testing.T) {
	type point struct {
		X int    `json:"x"`
		S string `json:"s"`
	}
	tests := []struct {
		name     string
		in       any
		wantEnc  string
		wantBack any
	}{
		{"string with line breaks", "a\nb\rc<&>", `"a\nb\rc<&>"`, "a\nb\rc<&>"},
		{"exact large integer", int64(1<<62 + 1), "4611686018427387905", json.Number("4611686018427387905")},
		{"float", 0.1, "0.1", json.Number("0.1")},
		{"map keys sorted", map[string]any{"b": 1, "a": []any{true, nil}}, `{"a":[true,null],"b":1}`,
			map[string]any{"a": []any{true, nil}, "b": json.Number("1")}},
		{"struct", point{X: 3, S: "line\u2028sep"}, `{"x":3,"s":"line\u2028sep"}`,
			map[string]any{"x": json.Number("3"), "s": "line\u2028sep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := recorder.JSON.Encode(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.wantEnc {
				t.Errorf("Encode = %s, want %s", b, tt.wantEnc)
			}
			got, err := recorder.JSON.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantBack, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
	if got := recorder.JSON.Name(); got != "json" {
		t.Errorf("Name() = %q", got)
	}
}

func TestJSONCodecErrors(t *testing.T) {
	if _, err := recorder.JSON.Encode(func() {}); err == nil {
		t.Error("Encode(func) succeeded")
	}
	for _, in := range []string{"", "{", `1 2`, `"a" x`} {
		if _, err := recorder.JSON.Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) succeeded", in)
		}
	}
	if _, err := recorder.JSON.Decode([]byte(" 1 \n")); err != nil {
		t.Errorf("Decode with trailing white space: %v", err)
	}
}

// rawCodec encodes []byte as is: it can produce a line break.
type rawCodec struct{}

func (rawCodec) Name() string                 { return "raw" }
func (rawCodec) Encode(v any) ([]byte, error) { return []byte(v.(string)), nil }
func (rawCodec) Decode(b []byte) (any, error) { return string(b), nil }

// TestACodecPayloadWithALineBreakIsRecorded: a codec may produce any bytes,
// a raw line break included: the payload is recorded as it is (the store
// encodes it), and the processor is not stopped.
func TestACodecPayloadWithALineBreakIsRecorded(t *testing.T) {
	w := &fakeWriter{}
	rec, st := run(t, w, recorder.Options{Codec: rawCodec{}}, func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{listFeed("push", nil, "a", "b\nc", "d")},
			Groups: []engine.GroupConfig{group("g", []string{"push"}, 1, pc("p", &testProc{}))},
		}
	})
	if err := rec.Err(); err != nil || !st.Lossless {
		t.Fatalf("Err() = %v, lossless %v; want the run recorded", err, st.Lossless)
	}
	var got []string
	for _, e := range w.rows() {
		if e.Kind == store.KindInline {
			got = append(got, string(e.Payload))
		}
	}
	if want := []string{"a", "b\nc", "d"}; !slices.Equal(got, want) {
		t.Errorf("recorded inputs %q, want %q", got, want)
	}
	m, err := store.DecodeMeta(w.rows()[0])
	if err != nil || m.Options["codec"] != "raw" {
		t.Errorf("META codec %q (%v), want raw", m.Options["codec"], err)
	}
}
