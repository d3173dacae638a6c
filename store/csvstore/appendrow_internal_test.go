package csvstore

import (
	"bytes"
	"encoding/csv"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/store"
	"github.com/gocarina/gocsv"
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

// TestGocsvMapsTheDocumentedColumns: record's csv tags (read by gocsv) are
// the documented header, in order; gocsv writes what appendRow writes for
// the same texts; and gocsv maps the i-th field of a line to the i-th text
// of record.fields, the order in which the fast decoder assigns them. (These
// checks ran in an init, reflecting on record in every binary; they are the
// tests' now.)
func TestGocsvMapsTheDocumentedColumns(t *testing.T) {
	h, err := gocsv.MarshalString([]record{})
	if err != nil || h != Header+"\n" {
		t.Fatalf("gocsv header %q (%v), want %q", h, err, Header)
	}
	e := store.Entry{Processor: "p,1", Index: 1, Kind: store.KindInline, Source: `s"q"`, Seq: 2,
		Instant: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), Epoch: 3, Key: " k", Offset: 4, N: 5,
		Payload: []byte(`{"a":"b,c"}`), Detail: "d;e"}
	var r record
	if err := toRecord(&e, &r, store.Format); err != nil {
		t.Fatal(err)
	}
	want, err := gocsv.MarshalStringWithoutHeaders([]record{r})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := appendRow(nil, &e, store.Format); err != nil || string(got) != want {
		t.Fatalf("appendRow writes %q (%v), gocsv %q", got, err, want)
	}
	probe := []byte(`c0,"c""1",c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12` + "\n")
	d := newDecoder()
	um, err := d.unmarshaller()
	if err != nil {
		t.Fatal(err)
	}
	d.feed.b = probe
	v, err := um.Read()
	got, ok := v.(record)
	if err != nil || !ok || !d.fast.split(probe[:len(probe)-1]) {
		t.Fatalf("probe line: %v %T", err, v)
	}
	for i, text := range got.fields(nil) {
		want := "c" + strconv.Itoa(i)
		if i == 1 {
			want = `c"1`
		}
		if text != want || string(d.fast.fields[i]) != want {
			t.Errorf("column %d: gocsv maps %q, the fast decoder %q, want %q", i, text, d.fast.fields[i], want)
		}
	}
}
