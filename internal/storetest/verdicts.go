package storetest

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// The cases of "No silent verdicts": a recording a store cannot vouch for
// is never reported complete, and whatever a writer accepts reads back.

// testAnyPayloadBytesReadBack: a payload is any bytes (a line break, NUL,
// invalid UTF-8, a leading '~'), and reads back as written.
func testAnyPayloadBytesReadBack(t *testing.T, b Backend) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	payloads := [][]byte{
		[]byte("{\n  \"indented\": true\n}"), []byte("cr\r"), []byte("nul\x00"), []byte("\xff\xfe"),
		[]byte("~"), []byte("~looks like base64"), []byte("~"), all, []byte(`"plain, quoted"`),
	}
	rows := []store.Entry{
		store.EncodeMeta(store.Meta{Created: T0, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart, Instant: T0, Payload: []byte("snapshot\nwith a line break")},
		{Processor: "p", Index: 2, Kind: store.KindInline, Source: "push", Seq: 1, Instant: t1, N: int64(len(payloads)),
			Payload: []byte("\r\n")},
	}
	for k, pl := range payloads {
		rows = append(rows, store.Entry{Processor: "p", Index: int64(3 + k), Kind: store.KindOutput, Source: "out",
			Seq: int64(k + 1), Payload: pl})
	}
	rows = append(rows, store.Entry{Processor: "p", Index: int64(3 + len(payloads)), Kind: store.KindEnd, N: 1, Instant: t2})
	p := path(t)
	Write(t, b, p, rows)
	s := open(t, b, p)
	got, errs := ReadAll(s)
	if len(errs) > 0 {
		t.Errorf("Rows errors: %v", errs)
	}
	if d := cmp.Diff(Normalized(rows), got); d != "" {
		t.Errorf("Rows (-want +got):\n%s", d)
	}
	if ps := s.Problems(); len(ps) != 0 {
		t.Errorf("Problems() = %v, want none", ps)
	}
}

// testMissingStreams: META lists the streams a recording must hold; a
// listed stream without rows, a stream META does not list, and a recording
// of no stream at all (whatever META says) are missing-stream problems.
func testMissingStreams(t *testing.T, b Backend) {
	meta := func(streams ...string) store.Entry {
		return store.EncodeMeta(store.Meta{Created: T0, Streams: streams})
	}
	metaV1 := func(apps ...string) store.Entry {
		m := store.Meta{Format: store.FormatV1, Created: T0, Apps: map[string]string{}}
		for _, a := range apps {
			m.Apps[a] = "ledger"
		}
		return store.EncodeMeta(m)
	}
	stream := func(name string) []store.Entry {
		return []store.Entry{
			{Processor: name, Index: 1, Kind: store.KindStart, Instant: T0},
			{Processor: name, Index: 2, Kind: store.KindEnd, Instant: t1},
		}
	}
	cat := func(parts ...[]store.Entry) []store.Entry {
		var out []store.Entry
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	const missing = store.ProblemMissingStream
	tests := []struct {
		name string
		rows []store.Entry
		want []want
	}{
		{"complete", cat([]store.Entry{meta("a", "b")}, stream("a"), stream("b")), []want{}},
		{"META only, streams listed", []store.Entry{meta("a", "b")}, []want{
			{missing, "", 1, store.KindMeta}, {missing, "a", 0, store.KindMeta}, {missing, "b", 0, store.KindMeta},
		}},
		{"META only, no stream listed", []store.Entry{meta()}, []want{{missing, "", 1, store.KindMeta}}},
		{"version 1 META only, no app", []store.Entry{metaV1()}, []want{{missing, "", 1, store.KindMeta}}},
		{"listed stream without rows", cat([]store.Entry{meta("a", "b")}, stream("a")), []want{
			{missing, "b", 0, store.KindMeta},
		}},
		{"stream not listed", cat([]store.Entry{meta("a")}, stream("a"), stream("b")), []want{
			{missing, "b", 1, store.KindStart},
		}},
		{"version 1: the apps are the streams", cat([]store.Entry{metaV1("a", "c")}, stream("a"), stream("b")), []want{
			{missing, "c", 0, store.KindMeta}, {missing, "b", 1, store.KindStart},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := path(t)
			Write(t, b, p, tt.rows)
			_, ps := checkProblems(t, b, p, tt.want)
			for i := range ps {
				if !errors.Is(&ps[i], store.ErrMissingStream) || ps[i].Detail == "" {
					t.Errorf("problem %v: not ErrMissingStream or no detail", &ps[i])
				}
			}
		})
	}
}

// testMetaRefused: a META row whose detail repeats a key (at any depth) or
// is not one JSON object is not read as a recording (ErrFormat).
func testMetaRefused(t *testing.T, b Backend) {
	good := store.EncodeMeta(store.Meta{Created: T0, Streams: []string{"p"}}).Detail
	tests := []struct{ name, detail string }{
		{"format twice, another version first", `{"format":"blackbox-recording/9","format":"` + store.Format + `","streams":["p"]}`},
		{"format twice, another case", `{"format":"blackbox-recording/9","Format":"` + store.Format + `","streams":["p"]}`},
		{"format twice, the same", strings.Replace(good, `{`, `{"format":"`+store.Format+`",`, 1)},
		{"key repeated in a nested object", strings.Replace(good, `"options":null`, `"options":{"codec":"json","codec":"raw"}`, 1)},
		{"two JSON objects", good + good},
		{"an array", `[` + good + `]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(tt.detail, "format") || tt.detail == good {
				t.Fatalf("bad test detail %s", tt.detail)
			}
			p := path(t)
			Write(t, b, p, []store.Entry{
				{Index: 1, Kind: store.KindMeta, Detail: tt.detail},
				{Processor: "p", Index: 1, Kind: store.KindStart},
				{Processor: "p", Index: 2, Kind: store.KindEnd},
			})
			s, err := b.Open(p)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, store.ErrFormat) {
				t.Errorf("Open: %v, want ErrFormat", err)
			}
		})
	}
}

// testVerifyFindsWhatReplayFinds: END counts the stream's inputs
// (INDEXED, INLINE, TIMER); a stream cut or edited so that they disagree is
// a gap, found without replaying it.
func testVerifyFindsWhatReplayFinds(t *testing.T, b Backend) {
	in := func(seq int64) []store.Entry {
		return []store.Entry{
			{Processor: "p", Kind: store.KindDelivery, Source: "orders", Seq: seq, Epoch: 1, Offset: 10 * seq},
			{Processor: "p", Kind: store.KindInline, Source: "orders", Seq: seq, Instant: t1, N: 1, Payload: []byte(`{}`)},
			{Processor: "p", Kind: store.KindOutput, Source: "out", Seq: 1, Payload: []byte(`1`)},
		}
	}
	timer := []store.Entry{{Processor: "p", Kind: store.KindTimer, Seq: 1, Instant: t2}}
	// build numbers the rows of p from 1, START first, END (counting
	// inputs) last.
	build := func(inputs int64, parts ...[]store.Entry) []store.Entry {
		rows := []store.Entry{store.EncodeMeta(store.Meta{Created: T0, Streams: []string{"p"}}),
			{Processor: "p", Kind: store.KindStart, Instant: T0}}
		for _, part := range parts {
			rows = append(rows, part...)
		}
		rows = append(rows, store.Entry{Processor: "p", Kind: store.KindEnd, N: inputs, Instant: t3})
		for i := 1; i < len(rows); i++ {
			rows[i].Index = int64(i)
		}
		return rows
	}
	tests := []struct {
		name string
		rows []store.Entry
		want []want
	}{
		{"complete", build(4, in(1), timer, in(2), in(3)), []want{}},
		{"last input removed, END renumbered", build(4, in(1), timer, in(2)), []want{
			{store.ProblemGap, "p", 9, store.KindEnd}}},
		{"END's count edited", build(5, in(1), timer, in(2), in(3)), []want{
			{store.ProblemGap, "p", 12, store.KindEnd}}},
		{"TIMER removed, END renumbered", build(4, in(1), in(2), in(3)), []want{
			{store.ProblemGap, "p", 11, store.KindEnd}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := path(t)
			Write(t, b, p, tt.rows)
			s := open(t, b, p)
			if d := cmp.Diff(tt.want, wantsOf(s.Problems())); d != "" {
				t.Errorf("Problems (-want +got):\n%s\ngot: %v", d, s.Problems())
			}
			if d := cmp.Diff(tt.want, wantsOf(reopened(t, b, p))); d != "" {
				t.Errorf("Verify (-want +got):\n%s", d)
			}
		})
	}
}

// LargestRow returns the row of processor "p", index 2 (an INLINE input
// of no output, after START) whose CSV line is exactly store.MaxRowSize
// bytes long plus extra: the largest row a writer accepts when extra is 0.
func LargestRow(extra int) store.Entry {
	e := store.Entry{Processor: "p", Index: 2, Kind: store.KindInline, Source: "s", Seq: 1}
	overhead := store.RowSize(&e, store.Format) // "p,2,INLINE,s,1,,0,,0,0,,,\n"
	e.Payload = bytes.Repeat([]byte{'a'}, store.MaxRowSize-overhead+extra)
	return e
}

// testRowSizeLimit: a row one byte longer than the largest a reader
// reads (a CSV line of store.MaxRowSize bytes) is refused with a
// *store.SizeError naming the column, and nothing of that Append is
// written; the store goes on. (Each backend's tests read the largest row
// back.)
func testRowSizeLimit(t *testing.T, b Backend) {
	if testing.Short() {
		t.Skip("allocates 64 MiB")
	}
	meta := store.EncodeMeta(store.Meta{Created: T0, Streams: []string{"p"}})
	start := store.Entry{Processor: "p", Index: 1, Kind: store.KindStart}
	end := store.Entry{Processor: "p", Index: 2, Kind: store.KindEnd}
	p := path(t)
	s, err := b.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(meta, start); err != nil {
		t.Fatal(err)
	}
	big := LargestRow(1)
	err = s.Append(big, store.Entry{Processor: "p", Index: 3, Kind: store.KindEnd})
	var se *store.SizeError
	if !errors.Is(err, store.ErrTooLarge) || !errors.As(err, &se) {
		t.Fatalf("Append of a row of %d bytes: %v, want a *store.SizeError", store.MaxRowSize+1, err)
	}
	if se.Column != "payload" || se.Size != store.MaxRowSize+1 || se.Limit != store.MaxRowSize || se.Index != 2 {
		t.Errorf("SizeError names index %d, column %s, size %d, limit %d; want 2, payload, %d, %d",
			se.Index, se.Column, se.Size, se.Limit, store.MaxRowSize+1, store.MaxRowSize)
	}
	if err := s.Append(end); err != nil {
		t.Fatalf("Append after a refused Append: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, errs := ReadAll(open(t, b, p))
	if d := cmp.Diff(Normalized([]store.Entry{meta, start, end}), got); d != "" || len(errs) > 0 {
		t.Errorf("rows after a refused Append (-want +got):\n%s%v", d, errs)
	}
}

// testSecondWriterIsLocked: a recording being written is locked: a second
// Create, or store.Lock (taken before removing or replacing a recording),
// fails at once with ErrLocked naming the file; a reader may still open it;
// Close releases the lock.
func testSecondWriterIsLocked(t *testing.T, b Backend) {
	p := path(t)
	w, err := b.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := os.Stat(p); err != nil {
		t.Skipf("backend without files: %v", err)
	}
	rows := []store.Entry{store.EncodeMeta(store.Meta{Created: T0, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart}}
	if err := w.Append(rows...); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { // a lock that waited would never send
		w2, err := b.Create(p)
		if err == nil {
			w2.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		var fe *store.FileError
		if !errors.Is(err, store.ErrLocked) || !errors.As(err, &fe) || fe.Path != p {
			t.Errorf("second Create: %v, want ErrLocked naming %s", err, p)
		}
	case <-time.After(time.Minute):
		t.Fatal("second Create waited for the lock")
	}
	if l, err := store.Lock(p, 0o644); !errors.Is(err, store.ErrLocked) {
		l.Unlock()
		t.Errorf("Lock of a recording being written: %v, want ErrLocked", err)
	}
	r := open(t, b, p)
	if got, _ := ReadAll(r); len(got) != 2 {
		t.Errorf("a reader read %d rows of the recording being written, want 2", len(got))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := store.Lock(p, 0o644)
	if err != nil {
		t.Fatalf("Lock after the writer closed: %v", err)
	}
	l.Unlock()
}

// testEndUnprocessedOnOpen: the integrity check a store runs when it opens
// a recording reads an END row's detail (store.EndOf): the seqs a clean
// stop or a kill left unprocessed, published (JOURNAL rows) and never
// committed, are not missing-input, and the reason of a kill reads back.
// (The CSV store's check left the detail out, so verify reported them
// missing where replay, reading the rows whole, did not.)
func testEndUnprocessedOnOpen(t *testing.T, b Backend) {
	end := store.End{Killed: "operator", Unprocessed: []store.Unprocessed{{Feed: "f", First: 2, Last: 3}}}
	rows := []store.Entry{
		store.EncodeMeta(store.Meta{Created: T0, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart, Instant: T0},
		{Processor: "p", Index: 2, Kind: store.KindInline, Source: "f", Seq: 1, Instant: t1, Payload: []byte(`"a"`)},
		{Index: 2, Kind: store.KindJournal, Source: "f", Seq: 2, Payload: []byte(`"b"`)},
		{Index: 3, Kind: store.KindJournal, Source: "f", Seq: 3, Payload: []byte(`"c"`)},
		{Processor: "p", Index: 3, Kind: store.KindEnd, N: 1, Instant: t2, Detail: end.Detail()},
	}
	p := path(t)
	Write(t, b, p, rows)
	s := open(t, b, p)
	if ps := s.Problems(); len(ps) != 0 {
		t.Errorf("Problems() = %v, want none: the END row lists seqs 2-3 as unprocessed", ps)
	}
	got, errs := ReadAll(s)
	if len(errs) > 0 {
		t.Fatalf("Rows errors: %v", errs)
	}
	if e, err := store.EndOf(got[len(got)-1]); err != nil || !cmp.Equal(e, end) {
		t.Errorf("END reads back %+v, %v, want %+v", e, err, end)
	}
}
