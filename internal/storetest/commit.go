package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// commitRecording is a complete recording of Format whose COMMIT rows
// interleave with the JOURNAL rows, counting their index among them, each
// after the rows of the inputs it covers.
func commitRecording() []store.Entry {
	meta := store.EncodeMeta(store.Meta{Created: T0, Apps: map[string]string{"p": "app"}, Streams: []string{"p"}})
	return []store.Entry{
		meta,
		{Index: 2, Kind: store.KindJournal, Source: "orders", Seq: 1, Payload: []byte(`"a"`)},
		{Processor: "p", Index: 1, Kind: store.KindStart, Instant: T0},
		{Processor: "p", Index: 2, Kind: store.KindDelivery, Source: "orders", Seq: 1, Epoch: 7, Offset: 4},
		{Processor: "p", Index: 3, Kind: store.KindIndexed, Source: "orders", Seq: 1, Instant: T0},
		{Index: 3, Kind: store.KindCommit, Source: "orders", Seq: 1, Epoch: 7, Offset: 4},
		{Index: 4, Kind: store.KindJournal, Source: "orders", Seq: 2, Payload: []byte(`"b"`)},
		{Processor: "p", Index: 4, Kind: store.KindDelivery, Source: "orders", Seq: 2, Epoch: 7, Key: "t/0", Offset: 8},
		{Processor: "p", Index: 5, Kind: store.KindIndexed, Source: "orders", Seq: 2, Instant: T0},
		{Index: 5, Kind: store.KindCommit, Source: "orders", Seq: 2, Epoch: 7, Key: "t/0", Offset: 8},
		{Processor: "p", Index: 6, Kind: store.KindEnd, Instant: T0, N: 2},
	}
}

// testCommitRowsReadBack: COMMIT rows of a Format recording are stored and
// read back row for row, counted among META and JOURNAL rows, and the
// recording is complete.
func testCommitRowsReadBack(t *testing.T, b Backend) {
	readBackWhole(t, b, path(t), commitRecording())
}

// readBackWhole writes rows to a recording at p, reads them back row for
// row (normalised) and wants the recording complete.
func readBackWhole(t *testing.T, b Backend, p string, rows []store.Entry) {
	t.Helper()
	Write(t, b, p, rows)
	s, err := b.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, errs := ReadAll(s)
	if len(errs) > 0 {
		t.Fatalf("Rows errors: %v", errs)
	}
	want := make([]store.Entry, len(rows))
	for i, e := range rows {
		want[i] = store.Normalize(e)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
	if ps := s.Problems(); len(ps) != 0 {
		t.Errorf("Problems = %v, want none", ps)
	}
}

// testScanYieldsTheCommitRows: Scan, the one pass of a StreamsReader over
// every row, yields the COMMIT rows (and META and JOURNAL rows) of a
// Format recording where Rows yields them, and checks the recording as it
// goes (CheckStreams).
func testScanYieldsTheCommitRows(t *testing.T, b Backend) {
	p := path(t)
	Write(t, b, p, commitRecording())
	s := open(t, b, p)
	sr := s
	var commits []store.Entry
	for e, err := range sr.Scan() {
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if e.Kind == store.KindCommit {
			commits = append(commits, e)
		}
	}
	var want []store.Entry
	for _, e := range commitRecording() {
		if e.Kind == store.KindCommit {
			want = append(want, store.Normalize(e))
		}
	}
	if d := cmp.Diff(want, commits); d != "" {
		t.Errorf("COMMIT rows of Scan (-want +got):\n%s", d)
	}
	checkStreams(t, b, p)
}

// testCommitRowsRefusedInVersion2: a writer refuses a COMMIT row into a
// FormatV2 recording (the set of kinds is closed within a version), and a
// COMMIT row with a processor makes the recording malformed.
func testCommitRowsRefusedInVersion2(t *testing.T, b Backend) {
	t.Run("version 2", func(t *testing.T) {
		s, err := b.Create(path(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Append(store.EncodeMeta(store.Meta{Format: store.FormatV2, Created: T0, Streams: []string{"p"}})); err != nil {
			t.Fatal(err)
		}
		err = s.Append(store.Entry{Index: 2, Kind: store.KindCommit, Source: "orders", Seq: 1, Offset: 4})
		var fe *store.FieldError
		if !errors.As(err, &fe) || fe.Field != "kind" || !errors.Is(err, store.ErrMalformed) {
			t.Fatalf("Append(COMMIT) into version 2: %v, want a *FieldError of kind wrapping ErrMalformed", err)
		}
	})
	t.Run("with a processor", func(t *testing.T) {
		p := path(t)
		rows := commitRecording()
		rows[5].Processor, rows[5].Index = "q", 1
		rows[9].Index = 3
		Write(t, b, p, rows)
		s, err := b.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ReadAll(s)
		ps := s.Problems()
		if len(ps) == 0 || !errors.Is(&ps[0], store.ErrMalformed) || ps[0].Row != store.KindCommit {
			t.Fatalf("Problems = %v, want the COMMIT row with a processor malformed", ps)
		}
	})
}
