package csvstore_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// backend corrupts recordings by editing the file's text.
type backend struct{}

func (backend) Create(path string) (storetest.Store, error) { return csvstore.Create(path) }
func (backend) Open(path string) (storetest.Store, error)   { return csvstore.Open(path) }

func (backend) Truncate(path string, n int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, fi.Size()-n)
}

// lines splits a file into lines, each with its "\n".
func lines(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return bytes.SplitAfter(b, []byte("\n")), nil
}

func (backend) DeleteRow(path string, row int64) error {
	ls, err := lines(path)
	if err != nil {
		return err
	}
	ls = slices.Delete(ls, int(row), int(row)+1) // line 1 is the header
	return os.WriteFile(path, bytes.Join(ls, nil), 0o644)
}

func (backend) SetField(path string, row int64, column, value string) error {
	ls, err := lines(path)
	if err != nil {
		return err
	}
	col := slices.Index(strings.Split(csvstore.Header, ","), column)
	if col < 0 {
		return fmt.Errorf("no column %q", column)
	}
	fields, err := csv.NewReader(bytes.NewReader(ls[row])).Read()
	if err != nil {
		return err
	}
	fields[col] = value
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(fields)
	w.Flush()
	ls[row] = b.Bytes()
	return os.WriteFile(path, bytes.Join(ls, nil), 0o644)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, backend{})
}

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "r.csv")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	meta  = `,1,META,,0,,0,,0,0,,"{""format"":""blackbox-recording/1"",""created"":""0001-01-01T00:00:00Z"",""apps"":{""p"":""p""},""options"":null}",` + "\n"
	start = "p,1,START,,0,,0,,0,0,,,\n"
	end   = "p,2,END,,0,,0,,0,0,,,\n"
)

// TestLines checks that problems name the physical line (the header is
// line 1) and the column at fault.
func TestLines(t *testing.T) {
	type want struct {
		Kind  store.ProblemKind
		Line  int64
		Index int64
	}
	tests := []struct {
		name string
		text string
		want []want
	}{
		{"complete", csvstore.Header + "\n" + meta + start + end, nil},
		{"torn", csvstore.Header + "\n" + meta + start + "p,2,EN", []want{
			{store.ProblemUnfinished, 3, 1}, {store.ProblemTorn, 4, 2}}},
		{"torn in a quote", csvstore.Header + "\n" + meta + start + `p,2,END,,0,,0,,0,0,"{`, []want{
			{store.ProblemUnfinished, 3, 1}, {store.ProblemTorn, 4, 2}}},
		{"bad quote swallows nothing", csvstore.Header + "\n" + meta + `p,1,START,,0,,0,,0,0,"{,,` + "\n" + end, []want{
			{store.ProblemMalformed, 3, 0}, {store.ProblemGap, 4, 2}}},
		{"bad number", csvstore.Header + "\n" + meta + start + "p,2,END,,0,,0,,0,zero,,,\n", []want{
			{store.ProblemMalformed, 4, 2}, {store.ProblemUnfinished, 4, 2}}},
		{"empty line", csvstore.Header + "\n" + meta + start + "\n" + end, []want{
			{store.ProblemMalformed, 4, 0}}},
		{"few fields", csvstore.Header + "\n" + meta + start + "p,2,END\n", []want{
			{store.ProblemUnfinished, 3, 1}, {store.ProblemMalformed, 4, 0}}},
		{"non-canonical instant", csvstore.Header + "\n" + meta + "p,1,START,,0,2024-01-01T00:00:00+01:00,0,,0,0,,,\n" + end, []want{
			{store.ProblemMalformed, 3, 1}}},
		{"CR in a quoted name", csvstore.Header + "\n" + meta + "\"p\r\",1,START,,0,,0,,0,0,,,\n", []want{
			{store.ProblemMissingStream, 2, 0}, // p
			{store.ProblemMalformed, 3, 1}, {store.ProblemUnfinished, 3, 1},
			{store.ProblemMissingStream, 3, 1}}}, // "p\r"
		{"no rows", csvstore.Header + "\n", []want{{store.ProblemMalformed, 0, 0}, {store.ProblemMissingStream, 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := csvstore.Open(write(t, tt.text))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []want
			for _, p := range s.Problems() {
				got = append(got, want{p.Kind, p.Line, p.Index})
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", d, s.Problems())
			}
		})
	}
}

func TestMalformedNamesColumn(t *testing.T) {
	s, err := csvstore.Open(write(t, csvstore.Header+"\n"+meta+start+"p,2,END,,0,,0,,0,zero,,,\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, err := range s.Rows() {
		if err == nil {
			continue
		}
		var p *store.Problem
		if !errors.As(err, &p) || !errors.Is(err, store.ErrMalformed) {
			t.Fatalf("Rows error %v, want a malformed *store.Problem", err)
		}
		if p.Line != 4 || !strings.Contains(p.Detail, "column n") {
			t.Errorf("problem %v: want line 4 naming column n", p)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	otherFormat := strings.Replace(meta, "blackbox-recording/1", "blackbox-recording/9", 1)
	tests := []struct {
		name string
		text string
	}{
		{"empty", ""},
		{"other header", "a,b,c\n"},
		{"header without newline", csvstore.Header},
		{"other version", csvstore.Header + "\n" + otherFormat},
		{"binary", "SQLite format 3\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(t, tt.text)
			s, err := csvstore.Open(p)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, store.ErrFormat) || !strings.Contains(err.Error(), p) {
				t.Errorf("Open: %v, want ErrFormat naming %s", err, p)
			}
		})
	}
	if _, err := csvstore.Open(filepath.Join(t.TempDir(), "none.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing file: %v, want ErrNotExist", err)
	}
}

func TestCreateRefusesAnyBytes(t *testing.T) {
	p := write(t, "not a recording\n")
	if _, err := csvstore.Create(p); !errors.Is(err, store.ErrHoldsRecording) || !strings.Contains(err.Error(), p) {
		t.Errorf("Create: %v, want ErrHoldsRecording naming %s", err, p)
	}
	if b, _ := os.ReadFile(p); string(b) != "not a recording\n" {
		t.Errorf("Create changed the file: %q", b)
	}
}

// TestAppendOneWrite checks the bytes of one Append: every row on its own
// line, the whole group appended at once.
func TestAppendOneWrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.csv")
	s, err := csvstore.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	rows := storetest.Recording()
	if err := s.Append(rows...); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bytes.Count(b, []byte("\n")), len(rows)+1; got != want {
		t.Errorf("%d lines, want %d", got, want)
	}
	for i, e := range rows {
		line, err := csvstore.EncodeRow(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, line) {
			t.Errorf("row %d: line %q not in the file", i+1, line)
		}
	}
}

func TestWriterReadsItsRows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.csv")
	s, err := csvstore.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows := storetest.Recording()
	if err := s.Append(rows[:5]...); err != nil {
		t.Fatal(err)
	}
	got, errs := storetest.ReadAll(s)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if d := cmp.Diff(storetest.Normalized(rows[:5]), got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ledger", storetest.Alerts}, s.Processors()); d != "" {
		t.Errorf("Processors (-want +got):\n%s", d)
	}
	if got := len(s.Problems()); got != 2 { // both streams unfinished
		t.Errorf("%d problems, want 2: %v", got, s.Problems())
	}
	if e, err := s.Journal("orders", 2); err != nil || e.Seq != 2 {
		t.Errorf("Journal: %v %v", e, err)
	}
	if err := s.Append(rows[5:]...); err != nil {
		t.Fatal(err)
	}
	if got := s.Problems(); len(got) != 0 {
		t.Errorf("problems after END: %v", got)
	}
	if e, err := s.Journal("orders", 3); err != nil || e.Seq != 3 {
		t.Errorf("Journal after more rows: %v %v", e, err)
	}
}

// TestFormatExample checks the example recording of docs/FORMAT.md: it is
// testdata/example.csv, its one problem is its FAILED row (a recorded
// failure: the stream is not reproducible past it), and cut in half its
// last line gives the problems the document says.
func TestFormatExample(t *testing.T) {
	example, err := os.ReadFile("testdata/example.csv")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("```csv\n"+string(example)+"```")) {
		t.Errorf("docs/FORMAT.md does not show testdata/example.csv")
	}
	s, err := csvstore.NewReader(bytes.NewReader(example), int64(len(example)), "example.csv")
	if err != nil {
		t.Fatal(err)
	}
	if ps := s.Problems(); len(ps) != 1 || ps[0].Kind != store.ProblemFailed || ps[0].Line != 16 || ps[0].Index != 11 {
		t.Errorf("problems: %v, want the FAILED row's (line 16, index 11)", ps)
	}
	cut := example[:len(example)-12]
	s, err = csvstore.NewReader(bytes.NewReader(cut), int64(len(cut)), "example.csv")
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		Kind  store.ProblemKind
		Line  int64
		Index int64
		Row   store.Kind
	}
	var got []want
	for _, p := range s.Problems() {
		got = append(got, want{p.Kind, p.Line, p.Index, p.Row})
	}
	if d := cmp.Diff([]want{{store.ProblemFailed, 16, 11, store.KindFailed}, {store.ProblemUnfinished, 16, 11, store.KindFailed},
		{store.ProblemTorn, 17, 12, store.KindEnd}}, got); d != "" {
		t.Errorf("problems of the cut example (-want +got):\n%s", d)
	}
}

// TestAVersion1RecordingStillReadsAndVerifies: a blackbox-recording/1 file
// (testdata/v1.csv, the format example of version 1, one payload beginning
// with '~') opens, has no problem but its FAILED row's (failedOnly), and
// its payloads are read verbatim (no '~' rule in version 1); written again
// by a writer, it stays version 1 and reads back row for row.
func TestAVersion1RecordingStillReadsAndVerifies(t *testing.T) {
	s, err := csvstore.Open("testdata/v1.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Meta().Format; got != store.FormatV1 {
		t.Errorf("format %q, want %q", got, store.FormatV1)
	}
	if ps := s.Problems(); !failedOnly(ps) {
		t.Errorf("Problems: %v", ps)
	}
	rows, errs := storetest.ReadAll(s)
	if len(errs) > 0 || len(rows) != 13 {
		t.Fatalf("read %d rows, errors %v; want 13 rows", len(rows), errs)
	}
	if got := string(rows[9].Payload); got != "~fee" {
		t.Errorf("payload of index 8 = %q, want ~fee verbatim", got)
	}
	p := filepath.Join(t.TempDir(), "copy.csv")
	back := storetest.Reopen(t, storetest.CSV, p, s)
	if ps := back.Problems(); !failedOnly(ps) {
		t.Errorf("Problems of the copy: %v", ps)
	}
	got, _ := storetest.ReadAll(back)
	if d := cmp.Diff(rows, got); d != "" {
		t.Errorf("copy (-v1 +copy):\n%s", d)
	}
	want, _ := os.ReadFile("testdata/v1.csv")
	if b, _ := os.ReadFile(p); !bytes.Equal(b, want) {
		t.Errorf("the copy of a version 1 recording is not byte for byte the original:\n%s", b)
	}
}

// TestAVersion2RecordingStillReadsAndVerifies: a blackbox-recording/2 file
// (testdata/v2.csv, the format example of version 2, before COMMIT rows)
// opens and has no problem but its FAILED row's (failedOnly); written again
// by a writer, it stays version 2 byte for byte. A COMMIT row added to it
// makes it malformed.
func TestAVersion2RecordingStillReadsAndVerifies(t *testing.T) {
	s, err := csvstore.Open("testdata/v2.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Meta().Format; got != store.FormatV2 {
		t.Errorf("format %q, want %q", got, store.FormatV2)
	}
	if ps := s.Problems(); !failedOnly(ps) {
		t.Errorf("Problems: %v", ps)
	}
	p := filepath.Join(t.TempDir(), "copy.csv")
	storetest.Reopen(t, storetest.CSV, p, s)
	want, _ := os.ReadFile("testdata/v2.csv")
	if b, _ := os.ReadFile(p); !bytes.Equal(b, want) {
		t.Errorf("the copy of a version 2 recording is not byte for byte the original:\n%s", b)
	}
	withCommit := append(bytes.Clone(want), ",3,COMMIT,orders,1,,1,,27,0,,,\n"...)
	r, err := csvstore.NewReader(bytes.NewReader(withCommit), int64(len(withCommit)), "v2.csv")
	if err != nil {
		t.Fatal(err)
	}
	ps := r.Problems()
	if len(ps) != 2 || !failedOnly(ps[:1]) || !errors.Is(&ps[1], store.ErrMalformed) || ps[1].Row != store.KindCommit {
		t.Errorf("Problems of a version 2 recording with a COMMIT row = %v, want its FAILED row's and the COMMIT row malformed", ps)
	}
}

// TestAVersion4RecordingStillReadsAndVerifies: a blackbox-recording/4
// file (testdata/v4.csv, the format example of version 4, before STATE
// rows) opens and has no problem but its FAILED row's; written again by a
// writer, it stays version 4 byte for byte. A STATE row added to it makes
// it malformed.
func TestAVersion4RecordingStillReadsAndVerifies(t *testing.T) {
	s, err := csvstore.Open("testdata/v4.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Meta().Format; got != store.FormatV4 {
		t.Errorf("format %q, want %q", got, store.FormatV4)
	}
	failed := func(ps []store.Problem) bool {
		return len(ps) == 1 && errors.Is(&ps[0], store.ErrFailed) && ps[0].Processor == "ledger" && ps[0].Index == 11
	}
	if ps := s.Problems(); !failed(ps) {
		t.Errorf("Problems: %v", ps)
	}
	p := filepath.Join(t.TempDir(), "copy.csv")
	storetest.Reopen(t, storetest.CSV, p, s)
	want, _ := os.ReadFile("testdata/v4.csv")
	if b, _ := os.ReadFile(p); !bytes.Equal(b, want) {
		t.Errorf("the copy of a version 4 recording is not byte for byte the original:\n%s", b)
	}
	withState := append(bytes.Clone(want), `,4,STATE,orders,0,2024-03-01T08:00:04Z,0,,0,0,,"{""group"":""main"",""from"":""UP"",""to"":""LATCHED"",""reason"":"""",""observed"":""2024-03-01T08:00:04Z""}",`+"\n"...)
	r, err := csvstore.NewReader(bytes.NewReader(withState), int64(len(withState)), "v4.csv")
	if err != nil {
		t.Fatal(err)
	}
	ps := r.Problems()
	if len(ps) != 2 || !failed(ps[:1]) || !errors.Is(&ps[1], store.ErrMalformed) || ps[1].Row != store.KindState {
		t.Errorf("Problems of a version 4 recording with a STATE row = %v, want its FAILED row's and the STATE row malformed", ps)
	}
}

// TestAVersion5RecordingStillReadsAndVerifies: a blackbox-recording/5
// file (testdata/v5.csv, the format example of version 5, before CONTROL
// rows) opens and has no problem but its FAILED row's; written again by a
// writer, it stays version 5 byte for byte. A CONTROL row added to it makes
// it malformed.
func TestAVersion5RecordingStillReadsAndVerifies(t *testing.T) {
	s, err := csvstore.Open("testdata/v5.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Meta().Format; got != store.FormatV5 {
		t.Errorf("format %q, want %q", got, store.FormatV5)
	}
	failed := func(ps []store.Problem) bool {
		return len(ps) == 1 && errors.Is(&ps[0], store.ErrFailed) && ps[0].Processor == "ledger"
	}
	if ps := s.Problems(); !failed(ps) {
		t.Errorf("Problems: %v", ps)
	}
	p := filepath.Join(t.TempDir(), "copy.csv")
	storetest.Reopen(t, storetest.CSV, p, s)
	want, _ := os.ReadFile("testdata/v5.csv")
	if b, _ := os.ReadFile(p); !bytes.Equal(b, want) {
		t.Errorf("the copy of a version 5 recording is not byte for byte the original:\n%s", b)
	}
	withControl := append(bytes.Clone(want), `,5,CONTROL,orders,0,2024-03-01T08:00:04Z,0,,0,0,,"{""group"":""main"",""action"":""kill"",""who"":""alice"",""reason"":""r"",""before"":0,""after"":0}",`+"\n"...)
	r, err := csvstore.NewReader(bytes.NewReader(withControl), int64(len(withControl)), "v5.csv")
	if err != nil {
		t.Fatal(err)
	}
	ps := r.Problems()
	if len(ps) != 2 || !failed(ps[:1]) || !errors.Is(&ps[1], store.ErrMalformed) || ps[1].Row != store.KindControl {
		t.Errorf("Problems of a version 5 recording with a CONTROL row = %v, want its FAILED row's and the CONTROL row malformed", ps)
	}
}

// failedOnly reports whether ps is the one problem of the version 1 and 2
// format examples: their FAILED row (ledger index 10), a recorded failure
// past which the stream is not reproducible.
func failedOnly(ps []store.Problem) bool {
	return len(ps) == 1 && errors.Is(&ps[0], store.ErrFailed) && ps[0].Processor == "ledger" && ps[0].Index == 10
}

// TestTheProblemsOfAStoreThatCannotBeReadAreUnreadable: a closed store, a
// writer's or a reader's, cannot be read: Problems says so
// (unreadable, naming the file), never "no problem".
func TestTheProblemsOfAStoreThatCannotBeReadAreUnreadable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.csv")
	w, err := csvstore.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(storetest.Recording()...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := csvstore.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	for name, s := range map[string]*store.Recording{"writer": w, "reader": r} {
		for what, ps := range map[string][]store.Problem{"Problems": s.Problems()} {
			if len(ps) != 1 || !errors.Is(&ps[0], store.ErrUnreadable) || ps[0].File != p || !strings.Contains(ps[0].Detail, p) {
				t.Errorf("%s of a closed %s: %v, want one unreadable problem naming %s", what, name, ps, p)
			}
		}
	}
}

// TestTheLargestRowReadsBack: a row whose CSV line is store.MaxRowSize
// bytes long (the largest a writer accepts) is written and read back
// whole.
func TestTheLargestRowReadsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 64 MiB line")
	}
	p := filepath.Join(t.TempDir(), "r.csv")
	big := storetest.LargestRow(0)
	n := len(big.Payload)
	storetest.Write(t, storetest.CSV, p, []store.Entry{
		store.EncodeMeta(store.Meta{Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart},
		big,
		{Processor: "p", Index: 3, Kind: store.KindEnd, N: 1},
	})
	big = store.Entry{}
	ls, err := lines(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(ls[3]); got != store.MaxRowSize {
		t.Errorf("the largest row's line is %d bytes, want %d", got, store.MaxRowSize)
	}
	ls = nil
	s, err := csvstore.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ps := s.Problems(); len(ps) != 0 {
		t.Errorf("Problems: %v", ps)
	}
	for e, err := range s.Stream("p") {
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if e.Index == 2 && (len(e.Payload) != n || bytes.Count(e.Payload, []byte{'a'}) != n) {
			t.Errorf("the largest row read back with %d bytes of payload, want %d", len(e.Payload), n)
		}
	}
}
