package csvstore_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// recordingText is the CSV text of storetest.Recording.
func recordingText(tb testing.TB) []byte {
	tb.Helper()
	b := []byte(csvstore.Header + "\n")
	for _, e := range storetest.Recording() {
		line, err := csvstore.EncodeRow(e)
		if err != nil {
			tb.Fatal(err)
		}
		b = append(b, line...)
	}
	return b
}

// FuzzCSVReader opens arbitrary bytes as a recording. Open must not panic;
// every line that is not a row must be a Problem of its line; the rows read
// must round-trip through a new recording.
func FuzzCSVReader(f *testing.F) {
	rec := seedRec
	f.Add(rec)
	f.Add(rec[:len(rec)-7])                                             // torn
	f.Add(bytes.Replace(rec, []byte(",OUTPUT,"), []byte(",OUTPT,"), 1)) // unknown kind
	f.Add(bytes.Replace(rec, []byte(",2,DELIVERY,"), []byte(",3,DELIVERY,"), 1))
	f.Add(bytes.Replace(rec, []byte("\n"), []byte("\r\n"), -1))
	f.Add([]byte(csvstore.Header + "\n" + `a,1,START,,0,,0,,0,0,"{,,` + "\n" + "a,2,END,,0,,0,,0,0,,,\n"))
	f.Add([]byte(csvstore.Header + "\n" + // version 6: a COMPLETED row covers seqs 1-2 of p's feed
		`,1,META,,0,,0,,0,0,,"{""format"":""blackbox-recording/6"",""streams"":[""p""]}",` + "\n" +
		"p,1,START,,0,2024-01-01T00:00:00.5Z,0,,0,0,,,\n" +
		`p,2,COMPLETED,f,1,,3,k,9,2,,"{""last"":12}",` + "\n" +
		"p,3,INLINE,f,3,2024-01-01T00:00:01Z,0,,0,0,x,,\n" +
		",2,COMMIT,f,3,,3,k,13,0,,,\n" +
		"p,4,END,,0,2024-01-01T00:00:03Z,0,,0,1,,,\n"))
	f.Add([]byte(csvstore.Header + "\n\n\n"))
	f.Add([]byte(csvstore.Header))
	f.Add([]byte{})
	f.Fuzz(checkReader)
}

// seedRec is a small recording using every kind. Seeds are small: an
// input the fuzzer finds interesting is minimised, and minimising costs
// executions in proportion to the square of its size.
var seedRec = []byte(csvstore.Header + "\n" +
	`,1,META,,0,,0,,0,0,,"{""format"":""blackbox-recording/1""}",` + "\n" +
	",2,JOURNAL,f,1,,0,,0,0,{},,\n" +
	"p,1,START,,0,2024-01-01T00:00:00.5Z,0,,0,0,,,\n" +
	"p,2,DELIVERY,f,1,,3,k,9,0,,,\n" +
	"p,3,INDEXED,f,1,2024-01-01T00:00:01Z,0,,0,1,,,2024-01-01T00:00:01Z;0001-01-01T00:00:00Z\n" +
	`p,4,OUTPUT,s,1,,0,,0,0,"{""a"":""b,c""}",,` + "\n" +
	"p,5,DROPPED,f,2,,0,,0,1,,lost,\n" +
	"p,6,TIMER,,1,2024-01-01T00:00:02Z,0,,0,0,,,\n" +
	"p,7,FAILED,f,0,2024-01-01T00:00:02Z,0,,0,0,,boom,\n" +
	"p,8,END,,0,2024-01-01T00:00:03Z,0,,0,1,,,\n")

// checkReader is the body of FuzzCSVReader. It reads the bytes with
// NewReader, the reader Open runs over a file, without the file: the
// fuzzer minimises an interesting input with O(n²) executions, which file
// I/O would make take minutes.
func checkReader(t *testing.T, data []byte) {
	s, err := csvstore.NewReader(bytes.NewReader(data), int64(len(data)), "fuzz.csv")
	if err != nil {
		if !errors.Is(err, store.ErrFormat) {
			t.Fatalf("NewReader: %v, want nil or ErrFormat", err)
		}
		return
	}
	defer s.Close()

	// Every line that is not a row is a malformed or torn Problem of
	// that line.
	problemLines := map[int64]store.ProblemKind{}
	for _, pr := range s.Problems() {
		if pr.Kind == store.ProblemMalformed || pr.Kind == store.ProblemTorn {
			problemLines[pr.Line] = pr.Kind
		}
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	valid := 0
	for i, line := range lines[1:] {
		n := int64(i + 2)
		if len(line) == 0 {
			continue
		}
		if line[len(line)-1] != '\n' {
			if problemLines[n] != store.ProblemTorn {
				t.Fatalf("torn line %d %q: no torn problem; problems %v", n, line, s.Problems())
			}
			continue
		}
		if _, err := csvstore.DecodeRowFormat(line, s.Meta().Format); err != nil {
			if problemLines[n] != store.ProblemMalformed {
				t.Fatalf("line %d %q (%v): no malformed problem; problems %v", n, line, err, s.Problems())
			}
			continue
		}
		valid++
	}

	rows, errs := storetest.ReadAll(s)
	if len(rows) != valid {
		t.Fatalf("Rows yielded %d rows, %d lines are rows", len(rows), valid)
	}
	for _, err := range errs {
		var pr *store.Problem
		if !errors.As(err, &pr) {
			t.Fatalf("Rows error %v is not a *store.Problem", err)
		}
	}
	// Scan, on another reader of the same bytes, yields what Rows yields
	// (its Payloads copied: they are borrowed), and checks as Open does.
	sc, err := csvstore.NewReader(bytes.NewReader(data), int64(len(data)), "fuzz.csv")
	if err != nil {
		t.Fatalf("NewReader again: %v", err)
	}
	defer sc.Close()
	var scanned []store.Entry
	var scanErrs []error
	for e, err := range sc.Scan() {
		if err != nil {
			scanErrs = append(scanErrs, err)
			continue
		}
		e.Payload, e.Reads = bytes.Clone(e.Payload), slices.Clone(e.Reads)
		scanned = append(scanned, e)
	}
	if !sameRows(rows, scanned) || !reflect.DeepEqual(errs, scanErrs) {
		t.Fatalf("Scan yielded %d rows and %v, Rows %d rows and %v", len(scanned), scanErrs, len(rows), errs)
	}
	if !reflect.DeepEqual(sc.Problems(), s.Problems()) {
		t.Fatalf("Problems after Scan %v, after Open %v", sc.Problems(), s.Problems())
	}
	for _, proc := range s.Processors() {
		for range s.Stream(proc) {
		}
	}
	for _, e := range rows {
		if e.Kind == store.KindJournal && e.Processor == "" {
			if _, err := s.Journal(e.Source, e.Seq); err != nil {
				t.Fatalf("Journal(%q, %d): %v", e.Source, e.Seq, err)
			}
		}
	}

	// Round trip: the rows read, written as a new recording (in the
	// format of the original), read back.
	out := []byte(csvstore.Header + "\n")
	for _, e := range rows {
		line, err := csvstore.EncodeRowFormat(e, s.Meta().Format)
		if err != nil {
			t.Fatalf("EncodeRow of a row read: %v", err)
		}
		out = append(out, line...)
	}
	r, err := csvstore.NewReader(bytes.NewReader(out), int64(len(out)), "copy.csv")
	if err != nil {
		if _, merr := store.DecodeMeta(rows[0]); errors.Is(err, store.ErrFormat) && rows[0].Kind == store.KindMeta && merr != nil {
			return // a META of another format, behind a malformed first line
		}
		t.Fatalf("reading the copy: %v", err)
	}
	back, errs := storetest.ReadAll(r)
	if len(errs) > 0 {
		t.Fatalf("copy: %v", errs)
	}
	if !sameRows(rows, back) {
		t.Fatalf("round trip (-read +copy):\n%s", cmp.Diff(rows, back))
	}
}

// sameRows compares rows by their canonical lines (FuzzRowDecode checks
// that a row has one line): much cheaper than cmp.Diff, which keeps the
// fuzzer's executions (and its minimisation) fast.
func sameRows(a, b []store.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		la, erra := csvstore.EncodeRow(a[i])
		lb, errb := csvstore.EncodeRow(b[i])
		if erra != nil || errb != nil || !bytes.Equal(la, lb) {
			return false
		}
	}
	return true
}

// FuzzRowDecode decodes arbitrary bytes as one row. A row decoded must
// encode to a line that decodes to the same row and encodes to itself.
func FuzzRowDecode(f *testing.F) {
	for _, line := range bytes.SplitAfter(recordingText(f), []byte("\n")) {
		f.Add(line)
	}
	f.Add([]byte(`"a""b",1,START,,0,,0,,0,0,,,`))
	f.Add([]byte(`p,2,COMPLETED,f,1,,3,k,9,2,,"{""last"":12}",` + "\n"))
	f.Add([]byte("p,1,INLINE,f,1,2024-01-01T00:00:00.000000001Z,0,,0,0,x,,0001-01-01T00:00:00Z;2024-01-01T00:00:00Z\n"))
	f.Add([]byte("p,1,START,,0,,0,,0,0,\"{\r}\",,\n"))
	f.Add([]byte("p,+1,START,,0,,0,,0,0,,,\n"))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := csvstore.DecodeRow(line)
		// The fast decoder agrees with gocsv, the reference: the same row
		// or the same error; so does the integrity scan's decoding, but
		// for the fields it does not read.
		ref, referr := csvstore.DecodeRowGocsv(line)
		if (err == nil) != (referr == nil) || (err != nil && err.Error() != referr.Error()) {
			t.Fatalf("DecodeRow error %v, gocsv %v", err, referr)
		}
		if d := cmp.Diff(ref, e); d != "" || !reflect.DeepEqual(ref, e) {
			t.Fatalf("DecodeRow (-gocsv +DecodeRow):\n%s", d)
		}
		be, berr := csvstore.DecodeRowBorrow(line)
		if (berr == nil) != (err == nil) || (berr != nil && berr.Error() != err.Error()) {
			t.Fatalf("borrowing decoding error %v, DecodeRow %v", berr, err)
		}
		if d := cmp.Diff(e, be); d != "" || !reflect.DeepEqual(e, be) {
			t.Fatalf("borrowing decoding (-DecodeRow +borrowing):\n%s", d)
		}
		ce, cerr := csvstore.DecodeRowCheck(line)
		if (cerr == nil) != (err == nil) || (cerr != nil && cerr.Error() != err.Error()) {
			t.Fatalf("check decoding error %v, DecodeRow %v", cerr, err)
		}
		ref.Payload, ref.Detail, ref.Key, ref.Reads = nil, "", "", nil
		ce.Payload, ce.Detail, ce.Key, ce.Reads = nil, "", "", nil // set when gocsv decoded the line
		if d := cmp.Diff(ref, ce); cerr == nil && d != "" {
			t.Fatalf("check decoding (-gocsv +check):\n%s", d)
		}
		if err != nil {
			var re *csvstore.RowError
			if !errors.Is(err, store.ErrMalformed) || !errors.As(err, &re) {
				t.Fatalf("DecodeRow error %v: want a *RowError wrapping ErrMalformed", err)
			}
			return
		}
		enc, err := csvstore.EncodeRow(e)
		if err != nil {
			t.Fatalf("EncodeRow of a decoded row %+v: %v", e, err)
		}
		e2, err := csvstore.DecodeRow(enc)
		if err != nil {
			t.Fatalf("DecodeRow(%q) of an encoded row: %v", enc, err)
		}
		if d := cmp.Diff(e, e2); d != "" {
			t.Fatalf("decode(encode(row)) (-row +again):\n%s", d)
		}
		enc2, _ := csvstore.EncodeRow(e2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not canonical: %q then %q", enc, enc2)
		}
	})
}

// FuzzRowRoundTrip writes a row of arbitrary payload bytes (and arbitrary
// names, numbers) as a line and reads it back: every row a writer accepts
// reads back equal, and store.RowSize is the length of its line.
func FuzzRowRoundTrip(f *testing.F) {
	f.Add("ledger", "orders", " key", []byte(`{"a":1}`), "detail, \"quoted\"", int64(3), int64(7))
	f.Add("p", "", "", []byte("{\n  \"snapshot\": true\r\n}"), "", int64(0), int64(0))
	f.Add("p", "s", "", []byte("~not base64"), "", int64(1), int64(0))
	f.Add("p", "s", "", []byte("\x00\xff\xfe~"), `\.`, int64(1), int64(-1))
	f.Add("p", "s", "", []byte(" leading space"), "", int64(1), int64(1))
	f.Fuzz(func(t *testing.T, processor, source, key string, payload []byte, detail string, seq, n int64) {
		e := store.Entry{Processor: processor, Index: 1, Kind: store.KindInline, Source: source, Seq: seq, Key: key,
			N: n, Payload: payload, Detail: detail}
		line, err := csvstore.EncodeRow(e)
		if verr := store.Validate(e); (err == nil) != (verr == nil) {
			t.Fatalf("EncodeRow error %v, Validate %v", err, verr)
		}
		if err != nil {
			return // a name with a line break, a negative number
		}
		if got := store.RowSize(&e, store.Format); got != len(line) {
			t.Fatalf("RowSize %d, the line is %d bytes: %q", got, len(line), line)
		}
		if bytes.IndexByte(line[:len(line)-1], '\n') >= 0 {
			t.Fatalf("line break inside the line %q", line)
		}
		back, err := csvstore.DecodeRow(line)
		if err != nil {
			t.Fatalf("DecodeRow(%q): %v", line, err)
		}
		if d := cmp.Diff(store.Normalize(e), back); d != "" {
			t.Fatalf("row (-written +read):\n%s", d)
		}
		text := store.EncodePayload(payload)
		if got, err := store.DecodePayload(text); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("DecodePayload(EncodePayload(%q)) = %q, %v", payload, got, err)
		}
	})
}
