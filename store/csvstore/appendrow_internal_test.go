package csvstore

import (
	"bytes"
	"encoding/csv"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/store"
)

// viaEncodingCSV is the CSV line of e as toRecord's texts written by
// encoding/csv (what gocsv writes): the reference appendRow must match.
func viaEncodingCSV(t *testing.T, e *store.Entry, format string) string {
	t.Helper()
	var r record
	if err := toRecord(e, &r, format); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(r.fields(nil)); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	return b.String()
}

// TestAppendRowWritesWhatEncodingCSVWrites: the encoder's line writer
// writes, byte for byte, what encoding/csv writes for the same row's texts:
// for texts that need quotes by each of encoding/csv's rules (a comma, a
// quote, CR, LF, `\.`, a leading space of any kind), payloads plain and
// base64, both formats, and 2,000 random rows of such pieces.
func TestAppendRowWritesWhatEncodingCSVWrites(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	pieces := []string{"", "a", "p,1", `s"q"`, "\r", "\n", "x\r\ny", `\.`, " lead", "\tlead", "\u00a0nbsp", "\u2003em", "é",
		"~tilde", "a;b", "\"", "\\", "null\x00", "\xff\xfe"}
	pick := func(r *rand.Rand) string {
		var b strings.Builder
		for range r.IntN(3) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	tests := []store.Entry{
		{Processor: "p", Index: 1, Kind: store.KindStart, Instant: at},
		{Processor: "p,1", Index: 2, Kind: store.KindInline, Source: `s"q"`, Seq: 3, Instant: at, Epoch: -4, Key: " k", Offset: 5, N: 6,
			Payload: []byte(`{"a":"b,c"}`), Detail: "d\ne", Reads: []time.Time{at, at.Add(time.Second)}},
		{Processor: `\.`, Index: 3, Kind: store.KindOutput, Payload: []byte("line\nbreak")},
		{Processor: "p", Index: 4, Kind: store.KindOutput, Payload: []byte("~starts with the mark")},
		{Processor: "p", Index: 5, Kind: store.KindOutput, Payload: []byte("\xff not utf-8")},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		tests = append(tests, store.Entry{Processor: pick(r), Index: r.Int64N(1000) - 10, Kind: store.Kinds[r.IntN(len(store.Kinds))],
			Source: pick(r), Seq: r.Int64(), Epoch: r.Int64N(5), Key: pick(r), Offset: r.Int64(), N: r.Int64N(9),
			Payload: []byte(pick(r)), Detail: pick(r), Instant: at.Add(time.Duration(r.Int64N(1e12)))})
	}
	for i := range tests {
		e := &tests[i]
		for _, format := range []string{store.Format, store.FormatV1} {
			if format == store.FormatV1 && bytes.ContainsAny(e.Payload, "\r\n") {
				continue // refused by both (TestAppendRowRefusesALineBreakInAVersion1Payload)
			}
			want := viaEncodingCSV(t, e, format)
			got, err := appendRow(nil, e, format)
			if err != nil {
				t.Fatalf("row %d (%s): %v", i, format, err)
			}
			if string(got) != want {
				t.Fatalf("row %d (%s) %+v:\n got %q\nwant %q", i, format, e, got, want)
			}
		}
	}
}

// TestAppendRowRefusesALineBreakInAVersion1Payload: as store.PayloadText.
func TestAppendRowRefusesALineBreakInAVersion1Payload(t *testing.T) {
	e := store.Entry{Processor: "p", Index: 1, Kind: store.KindOutput, Payload: []byte("a\nb")}
	_, err := appendRow(nil, &e, store.FormatV1)
	var fe *store.FieldError
	if !errors.Is(err, store.ErrMalformed) || !errors.As(err, &fe) || fe.Field != "payload" {
		t.Fatalf("appendRow: %v, want PayloadText's *store.FieldError of the payload (ErrMalformed)", err)
	}
}
