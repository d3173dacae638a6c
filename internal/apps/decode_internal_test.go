package apps

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestPlainJSONStringsDecodeAsEncodingJSON: the fast path of Decode takes
// only what json.Unmarshal decodes to the same string, and leaves the rest
// (escapes, invalid UTF-8, control characters, a quote inside, spaces
// around) to it: over a table and 5,000 random payloads of such pieces.
func TestPlainJSONStringsDecodeAsEncodingJSON(t *testing.T) {
	payloads := []string{`"sensor-1,2"`, `""`, `"é ✓ \u00e9"`, `"a\nb"`, `"a\"b"`, "\"tab\there\"", "\"\xff\"", `"a"b"`,
		` "x"`, `"x" `, `"`, `x`, `null`, `12`, "\"\u2028\"", `"/"`}
	pieces := []string{"a", ",", " ", "é", "\\", "\"", "\x01", "\xff", "\u2028", "n", "u00e9", "/"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		b := []byte{'"'}
		for range r.IntN(6) {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		payloads = append(payloads, string(append(b, '"')))
	}
	fast := 0
	for _, p := range payloads {
		got, ok := plainJSONString([]byte(p))
		if !ok {
			continue
		}
		fast++
		var want string
		if err := json.Unmarshal([]byte(p), &want); err != nil || got != want {
			t.Fatalf("%q: fast path %q, json.Unmarshal %q (%v)", p, got, want, err)
		}
	}
	if fast == 0 {
		t.Fatal("the fast path took no payload")
	}
}
