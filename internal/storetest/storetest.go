package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// Store is a recording as a Backend creates or opens it: a store.Reader and
// a store.Writer (a *store.Recording, a *store.Memory).
type Store interface {
	store.Reader
	store.Writer
}

// Backend creates and opens recordings of one store. Paths are files under
// a test's temporary directory; a backend without files keys its
// recordings by path. Open is called from several goroutines at once (while
// a writer appends), so a Backend must be safe for concurrent use.
type Backend interface {
	// Create creates a new, writable recording at path.
	Create(path string) (Store, error)
	// Open opens the recording at path for reading.
	Open(path string) (Store, error)
}

// Corrupter is implemented by a Backend that can damage a closed recording
// the way a crash or a hand edit does. Rows are numbered in storage order
// from 1 (META), counting the rows present now. An operation the store
// cannot express returns an error wrapping errors.ErrUnsupported and the
// cases that need it are skipped.
type Corrupter interface {
	// Truncate removes the last n bytes (a torn last row).
	Truncate(path string, n int64) error
	// DeleteRow removes a row.
	DeleteRow(path string, row int64) error
	// SetField sets one column of a row to a value, given as the CSV text
	// of the column (column names as in the CSV header).
	SetField(path string, row int64, column, value string) error
}

// Run runs the conformance suite against b. Every store of this module
// passes it; Memory, the reference, gives the Problems the others must
// give.
func Run(t *testing.T, b Backend) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, b) })
	t.Run("AFailedRowReadsBackAndIsItsStreamsOneProblem", func(t *testing.T) { testFailedRow(t, b) })
	t.Run("Journal", func(t *testing.T) { testJournal(t, b) })
	t.Run("Problems", func(t *testing.T) { testProblems(t, b) })
	t.Run("ReadOnly", func(t *testing.T) { testReadOnly(t, b) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, b) })
	t.Run("CreateRefusesRecording", func(t *testing.T) { testCreateRefuses(t, b) })
	t.Run("NamesRefused", func(t *testing.T) { testNamesRefused(t, b) })
	t.Run("Copy", func(t *testing.T) { testCopy(t, b) })
	t.Run("ConcurrentReaders", func(t *testing.T) { testConcurrent(t, b) })
	t.Run("AnyPayloadBytesReadBack", func(t *testing.T) { testAnyPayloadBytesReadBack(t, b) })
	t.Run("MissingStreams", func(t *testing.T) { testMissingStreams(t, b) })
	t.Run("AMetaWithARepeatedKeyIsRefused", func(t *testing.T) { testMetaRefused(t, b) })
	t.Run("VerifyFindsWhatReplayFinds", func(t *testing.T) { testVerifyFindsWhatReplayFinds(t, b) })
	t.Run("AnEndRowsUnprocessedSeqsAreNotMissingOnOpen", func(t *testing.T) { testEndUnprocessedOnOpen(t, b) })
	t.Run("TheLargestRowReadsBackOneByteMoreIsRefused", func(t *testing.T) { testRowSizeLimit(t, b) })
	t.Run("ASecondWriterIsLockedOut", func(t *testing.T) { testSecondWriterIsLocked(t, b) })
	t.Run("AFileIsEmptyUntilItsFirstAppendPlacesItWhole", func(t *testing.T) { testAFileIsEmptyUntilItsFirstAppendPlacesItWhole(t, b) })
	t.Run("AFirstAppendThatFailsLeavesNoFileItMade", func(t *testing.T) { testAFirstAppendThatFailsLeavesNoFileItMade(t, b) })
	t.Run("ARecordingReachedThroughASymlinkIsWrittenWhereItPoints", func(t *testing.T) {
		testARecordingReachedThroughASymlinkIsWrittenWhereItPoints(t, b)
	})
	t.Run("StreamsYieldWhatEveryStreamYieldsAndCheckAsOpenDoes", func(t *testing.T) { testStreams(t, b) })
	t.Run("CommitRowsReadBackAmongTheGlobalRows", func(t *testing.T) { testCommitRowsReadBack(t, b) })
	t.Run("ScanYieldsTheCommitRowsAndChecksAsItGoes", func(t *testing.T) { testScanYieldsTheCommitRows(t, b) })
	t.Run("CommitRowsAreRefusedInVersion2AndWithAProcessor", func(t *testing.T) { testCommitRowsRefusedInVersion2(t, b) })
	t.Run("StateRowsReadBackAmongTheGlobalRowsAndAreRefusedInVersion4", func(t *testing.T) { testStateRows(t, b) })
}

// Write creates a recording at path holding rows, appended as a recorder
// does (Groups), and closes it.
func Write(t testing.TB, b Backend, path string, rows []store.Entry) {
	t.Helper()
	s, err := b.Create(path)
	if err != nil {
		t.Fatalf("Create(%s): %v", path, err)
	}
	for _, g := range Groups(rows) {
		if err := s.Append(g...); err != nil {
			t.Fatalf("Append(%s %s index %d): %v", g[0].Kind, g[0].Processor, g[0].Index, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// ReadAll returns every row of r (Rows) and the errors it yielded.
func ReadAll(r store.Reader) ([]store.Entry, []error) {
	var rows []store.Entry
	var errs []error
	for e, err := range r.Rows() {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rows = append(rows, e)
	}
	return rows, errs
}

// testStreams: Streams of the fixture recording, while it is written and
// once it is closed (CheckStreams); testProblems checks every corruption.
func testStreams(t *testing.T, b Backend) {
	p := path(t)
	w, err := b.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	groups := Groups(Recording())
	for i, g := range groups {
		if err := w.Append(g...); err != nil {
			t.Fatal(err)
		}
		if i == len(groups)/2 {
			checkStreamsOf(t, w, w.Problems(), w.Processors()) // a recording in progress
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkStreams(t, b, p)
}

// checkStreams checks the recording at path through b's store.StreamsReader
// (skipping a backend without one): on a Store just opened, Streams yields,
// for every processor, what its Stream yields (rows and problems), and
// nothing of a row without a processor; on another, Scan yields what Rows
// yields; after each, Problems and Processors are those of another Store
// opened on the same file.
func checkStreams(t *testing.T, b Backend, path string) {
	t.Helper()
	ref := open(t, b, path)
	checkStreamsOf(t, open(t, b, path), ref.Problems(), ref.Processors())
	checkScanOf(t, open(t, b, path), ref)
}

// checkScanOf checks that Scan of s yields, row for row and problem for
// problem, what Rows of ref (the same recording) yields, and that after it
// Problems and Processors of s are ref's.
func checkScanOf(t *testing.T, s, ref store.Reader) {
	t.Helper()
	type item struct {
		Row     store.Entry
		Problem *store.Problem
	}
	read := func(rows iter.Seq2[store.Entry, error]) []item {
		var out []item
		for e, err := range rows {
			var p *store.Problem
			if err != nil && !errors.As(err, &p) {
				t.Fatalf("reading: %v", err)
			}
			// Payload and Reads are valid until the iteration goes on.
			e.Payload, e.Reads = bytes.Clone(e.Payload), slices.Clone(e.Reads)
			out = append(out, item{e, p})
		}
		return out
	}
	got := read(s.Scan())
	if d := cmp.Diff(ref.Problems(), s.Problems()); d != "" {
		t.Errorf("Problems after Scan (-want +got):\n%s", d)
	}
	if d := cmp.Diff(ref.Processors(), s.Processors()); d != "" {
		t.Errorf("Processors after Scan (-want +got):\n%s", d)
	}
	if d := cmp.Diff(read(ref.Rows()), got); d != "" {
		t.Errorf("Scan differs from Rows (-rows +scan):\n%s", d)
	}
}

func checkStreamsOf(t *testing.T, s Store, problems []store.Problem, procs []string) {
	t.Helper()
	sr := s
	type item struct {
		Row     store.Entry
		Problem *store.Problem
	}
	got := map[string][]item{}
	for e, err := range sr.Streams() {
		var p *store.Problem
		if err != nil && !errors.As(err, &p) {
			t.Fatalf("Streams: %v", err)
		}
		if e.Processor == "" {
			t.Errorf("Streams yielded a row of no processor: %+v %v", e, err)
			continue
		}
		name := e.Processor
		if p != nil {
			e = store.Entry{}
		}
		// Payload and Reads are valid until the iteration goes on.
		e.Payload, e.Reads = bytes.Clone(e.Payload), slices.Clone(e.Reads)
		got[name] = append(got[name], item{e, p})
	}
	// Problems and Processors, from the view Streams left, equal another
	// Store's.
	if d := cmp.Diff(problems, s.Problems()); d != "" {
		t.Errorf("Problems after Streams (-want +got):\n%s", d)
	}
	if d := cmp.Diff(procs, s.Processors()); d != "" {
		t.Errorf("Processors after Streams (-want +got):\n%s", d)
	}
	want := map[string][]item{}
	names := append([]string(nil), procs...)
	for name := range got {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		for e, err := range s.Stream(name) {
			var p *store.Problem
			if err != nil && !errors.As(err, &p) {
				t.Fatalf("Stream(%q): %v", name, err)
			}
			if p != nil {
				e = store.Entry{}
			}
			want[name] = append(want[name], item{e, p})
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Streams, by processor, differs from Stream (-stream +streams):\n%s", d)
	}
}

func readStream(r store.Reader, p string) ([]store.Entry, []error) {
	var rows []store.Entry
	var errs []error
	for e, err := range r.Stream(p) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rows = append(rows, e)
	}
	return rows, errs
}

// Normalized returns rows as every store reads them back.
func Normalized(rows []store.Entry) []store.Entry {
	out := make([]store.Entry, len(rows))
	for i, e := range rows {
		out[i] = store.Normalize(e)
	}
	return out
}

// reopened returns the problems of the recording at p opened again: what
// a fresh read of the file finds, beside what a reader kept.
func reopened(t *testing.T, b Backend, p string) []store.Problem {
	t.Helper()
	return open(t, b, p).Problems()
}

func path(t *testing.T) string { return filepath.Join(t.TempDir(), "recording") }

func open(t *testing.T, b Backend, p string) Store {
	t.Helper()
	s, err := b.Open(p)
	if err != nil {
		t.Fatalf("Open(%s): %v", p, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testFailedRow: Failed (Recording with a FAILED row) reads back row for
// row, and its one problem is that row's (store.ProblemFailed, at its
// line), the same through Problems, Verify and a Streams pass: a recorded
// failure ends what its stream proves, in every store.
func testFailedRow(t *testing.T, b Backend) {
	p := path(t)
	Write(t, b, p, failed())
	s := open(t, b, p)
	got, errs := ReadAll(s)
	if d := cmp.Diff(Normalized(failed()), got); d != "" || len(errs) > 0 {
		t.Errorf("Rows (-want +got):\n%s%v", d, errs)
	}
	for what, ps := range map[string][]store.Problem{"Problems": s.Problems(), "Verify": reopened(t, b, p)} {
		if d := cmp.Diff([]want{{store.ProblemFailed, Alerts, 8, store.KindFailed}}, wantsOf(ps)); d != "" {
			t.Errorf("%s (-want +got):\n%s", what, d)
		}
		if len(ps) == 1 && (ps[0].Line <= 0 || !errors.Is(&ps[0], store.ErrFailed)) {
			t.Errorf("%s: %v, want a line and store.ErrFailed", what, ps[0])
		}
	}
	checkStreams(t, b, p)
}

func testRoundTrip(t *testing.T, b Backend) {
	want := Normalized(Recording())
	p := path(t)
	Write(t, b, p, Recording())
	s := open(t, b, p)

	got, errs := ReadAll(s)
	if len(errs) > 0 {
		t.Errorf("Rows errors: %v", errs)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Rows (-want +got):\n%s", d)
	}
	if got := s.Problems(); len(got) != 0 {
		t.Errorf("Problems() = %v, want none", got)
	}
	if got := reopened(t, b, p); len(got) != 0 {
		t.Errorf("Verify() = %v, want none", got)
	}
	wantMeta, err := store.DecodeMeta(want[0])
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantMeta, s.Meta()); d != "" {
		t.Errorf("Meta (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ledger", Alerts}, s.Processors()); d != "" {
		t.Errorf("Processors (-want +got):\n%s", d)
	}
	for _, proc := range []string{"ledger", Alerts, "", "nobody"} {
		var wantStream []store.Entry
		for _, e := range want {
			if e.Processor == proc {
				wantStream = append(wantStream, e)
			}
		}
		got, errs := readStream(s, proc)
		if len(errs) > 0 {
			t.Errorf("Stream(%q) errors: %v", proc, errs)
		}
		if d := cmp.Diff(wantStream, got); d != "" {
			t.Errorf("Stream(%q) (-want +got):\n%s", proc, d)
		}
	}
	// Breaking out of an iteration early is allowed.
	for range s.Rows() {
		break
	}
	for range s.Stream("ledger") {
		break
	}
}

func testJournal(t *testing.T, b Backend) {
	p := path(t)
	Write(t, b, p, Recording())
	s := open(t, b, p)
	type key struct {
		feed string
		seq  int64
	}
	journal := map[key]store.Entry{}
	for _, e := range Normalized(Recording()) {
		if e.Kind == store.KindJournal {
			journal[key{e.Source, e.Seq}] = e
		}
	}
	tests := []struct {
		feed    string
		seq     int64
		missing bool
	}{
		{"orders", 1, false},
		{"orders", 2, false},
		{"orders", 2, false}, // the same again
		{"orders", 3, false}, // written after the rows naming it
		{"audit", 1, false},  // another feed, written before
		{"orders", 1, false}, // backwards
		{"orders", 99, true},
		{"orders", 3, false}, // after a miss
		{"other", 1, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := s.Journal(tt.feed, tt.seq)
		if tt.missing {
			if !errors.Is(err, store.ErrMissingJournal) {
				t.Errorf("Journal(%q, %d) error = %v, want ErrMissingJournal", tt.feed, tt.seq, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Journal(%q, %d): %v", tt.feed, tt.seq, err)
			continue
		}
		if d := cmp.Diff(journal[key{tt.feed, tt.seq}], got); d != "" {
			t.Errorf("Journal(%q, %d) (-want +got):\n%s", tt.feed, tt.seq, d)
		}
	}
}

func testReadOnly(t *testing.T, b Backend) {
	p := path(t)
	Write(t, b, p, Recording())
	s := open(t, b, p)
	err := s.Append(store.Entry{Processor: "ledger", Index: 16, Kind: store.KindEnd})
	if !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Append to an opened recording: %v, want ErrReadOnly", err)
	}
	got, _ := ReadAll(s)
	if d := cmp.Diff(Normalized(Recording()), got); d != "" {
		t.Errorf("rows changed by a refused Append (-want +got):\n%s", d)
	}
}

func testClosed(t *testing.T, b Backend) {
	s, err := b.Create(path(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(Recording()[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(Recording()[1]); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
}

func testCreateRefuses(t *testing.T, b Backend) {
	p := path(t)
	Write(t, b, p, Recording()[:3])
	before, _ := os.ReadFile(p) // nil for a backend without files
	s, err := b.Create(p)
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, store.ErrHoldsRecording) {
		t.Fatalf("Create over a recording: %v, want ErrHoldsRecording", err)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Errorf("Create changed the bytes of the recording it refused")
	}
	got, _ := ReadAll(open(t, b, p))
	if d := cmp.Diff(Normalized(Recording()[:3]), got); d != "" {
		t.Errorf("rows after a refused Create (-want +got):\n%s", d)
	}
}

func testNamesRefused(t *testing.T, b Backend) {
	base := store.Entry{Processor: "ledger", Index: 1, Kind: store.KindStart}
	tests := []struct {
		name   string
		edit   func(*store.Entry)
		field  string
		value  string
		target error
	}{
		{"processor LF", func(e *store.Entry) { e.Processor = "led\nger" }, "processor", "led\nger", store.ErrName},
		{"processor CR", func(e *store.Entry) { e.Processor = "ledger\r" }, "processor", "ledger\r", store.ErrName},
		{"source", func(e *store.Entry) { e.Source = "or\nders" }, "source", "or\nders", store.ErrName},
		{"key", func(e *store.Entry) { e.Key = "p\r\n0" }, "key", "p\r\n0", store.ErrName},
		{"detail", func(e *store.Entry) { e.Detail = "two\nlines" }, "detail", "two\nlines", store.ErrName},
		{"DROPPED of no item", func(e *store.Entry) { e.Kind = store.KindDropped }, "n", "0", store.ErrMalformed},
		{"negative n", func(e *store.Entry) { e.N = -1 }, "n", "-1", store.ErrMalformed},
		{"negative seq", func(e *store.Entry) { e.Seq = -1 }, "seq", "-1", store.ErrMalformed},
		{"negative offset", func(e *store.Entry) { e.Offset = -1 }, "offset", "-1", store.ErrMalformed},
		{"kind", func(e *store.Entry) { e.Kind = "BOGUS" }, "kind", "BOGUS", store.ErrMalformed},
		{"instant", func(e *store.Entry) { e.Instant = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
			"instant", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).String(), store.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := path(t)
			s, err := b.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			meta := Recording()[0]
			bad := base
			tt.edit(&bad)
			err = s.Append(meta, bad)
			if !errors.Is(err, tt.target) {
				t.Fatalf("Append: %v, want %v", err, tt.target)
			}
			var fe *store.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Append: %v is not a *store.FieldError", err)
			}
			if fe.Field != tt.field || fe.Value != tt.value {
				t.Errorf("FieldError names %s %q, want %s %q", fe.Field, fe.Value, tt.field, tt.value)
			}
			// All or none: META was not written either; the store goes on.
			if err := s.Append(meta); err != nil {
				t.Fatalf("Append after a refused Append: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ := ReadAll(open(t, b, p))
			if d := cmp.Diff(Normalized([]store.Entry{meta}), got); d != "" {
				t.Errorf("rows (-want +got):\n%s", d)
			}
		})
	}
}

func testCopy(t *testing.T, b Backend) {
	src, err := store.OpenMemory(Recording()...)
	if err != nil {
		t.Fatal(err)
	}
	p := path(t)
	dst, err := b.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Copy(dst, src); err != nil {
		t.Fatalf("Copy(memory -> store): %v", err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	back := store.NewMemory()
	if err := store.Copy(back, open(t, b, p)); err != nil {
		t.Fatalf("Copy(store -> memory): %v", err)
	}
	got, _ := ReadAll(back)
	if d := cmp.Diff(Normalized(Recording()), got); d != "" {
		t.Errorf("memory -> store -> memory (-want +got):\n%s", d)
	}

	// A recording with an unreadable row copies the rest and says so.
	c, ok := b.(Corrupter)
	if !ok {
		return
	}
	if err := c.SetField(p, 8, "kind", "BOGUS"); err != nil {
		t.Fatal(err)
	}
	back = store.NewMemory()
	err = store.Copy(back, open(t, b, p))
	var prob *store.Problem
	if !errors.Is(err, store.ErrMalformed) || !errors.As(err, &prob) || prob.Index != 4 {
		t.Errorf("Copy of a recording with a malformed row: %v, want a malformed *store.Problem of index 4", err)
	}
	if got := back.Len(); got != len(Recording())-1 {
		t.Errorf("Copy copied %d rows, want %d", got, len(Recording())-1)
	}
}

// testConcurrent: readers open and read the recording again and again
// while a writer appends 1000 inputs. Each sees a prefix of what is
// written, and no problem other than unfinished, torn, or an orphan input
// or DELIVERY that is the last row of its stream in that prefix (a write
// seen in part: the rest of its input is not written yet).
func testConcurrent(t *testing.T, b Backend) {
	const inputs = 1000
	p := path(t)
	rows := []store.Entry{
		store.EncodeMeta(store.Meta{Created: T0, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart, Instant: T0},
	}
	for i := int64(1); i <= inputs; i++ {
		rows = append(rows, Input("p", i)...)
	}
	rows = append(rows, store.Entry{Processor: "p", Index: 3*inputs + 2, Kind: store.KindEnd, N: inputs, Instant: t3})
	want := Normalized(rows)

	w, err := b.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(rows[:2]...); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for last := false; !last; {
				last = done.Load()
				if err := readPrefix(b, p, want); err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	for _, g := range Groups(rows[2:]) {
		if err := w.Append(g...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d reads while writing", reads.Load())
	s := open(t, b, p)
	if ps := s.Problems(); len(ps) != 0 {
		t.Errorf("Problems after the writer closed: %v", ps)
	}
}

func readPrefix(b Backend, p string, want []store.Entry) error {
	s, err := b.Open(p)
	if err != nil {
		return fmt.Errorf("Open while writing: %w", err)
	}
	defer s.Close()
	got, errs := ReadAll(s)
	for _, err := range errs {
		if !errors.Is(err, store.ErrTorn) {
			return fmt.Errorf("Rows while writing: %w", err)
		}
	}
	if len(got) > len(want) {
		return fmt.Errorf("read %d rows, only %d written", len(got), len(want))
	}
	if d := cmp.Diff(want[:len(got)], got); d != "" {
		return fmt.Errorf("rows read while writing are not a prefix (-want +got):\n%s", d)
	}
	var lastIndex int64
	for _, e := range got {
		if e.Processor == "p" {
			lastIndex = e.Index
		}
	}
	for _, pr := range s.Problems() {
		switch {
		case pr.Kind == store.ProblemUnfinished, pr.Kind == store.ProblemTorn:
		case pr.Kind == store.ProblemOrphan && pr.Index == lastIndex &&
			(pr.Row == store.KindDelivery || pr.Row == store.KindInline):
		default:
			return fmt.Errorf("problem while writing (%d rows read): %v", len(got), &pr)
		}
	}
	return nil
}
