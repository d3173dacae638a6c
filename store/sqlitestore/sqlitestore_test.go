package sqlitestore_test

import (
	"bytes"
	"database/sql"
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
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// backend corrupts recordings with SQL.
type backend struct{}

func (backend) Create(path string) (storetest.Store, error) { return sqlitestore.Create(path) }
func (backend) Open(path string) (storetest.Store, error)   { return sqlitestore.Open(path) }

func (backend) Truncate(path string, n int64) error {
	return fmt.Errorf("an SQLite recording has no torn rows: %w", errors.ErrUnsupported)
}

func exec(path, q string, args ...any) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := db.Exec(q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%d rows changed, want 1", n)
	}
	return nil
}

const nth = `(SELECT id FROM rows ORDER BY id LIMIT 1 OFFSET ?)`

func (backend) DeleteRow(path string, row int64) error {
	return exec(path, `DELETE FROM rows WHERE id = `+nth, row-1)
}

func (backend) SetField(path string, row int64, column, value string) error {
	switch column {
	case "index":
		column = "idx"
	case "key", "offset":
		column = `"` + column + `"`
	}
	// The value is bound as text: the column's affinity makes a number of
	// it when it is one, and keeps it as text otherwise (malformed).
	return exec(path, `UPDATE rows SET `+column+` = ? WHERE id = `+nth, value, row-1)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, backend{})
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"empty":    nil,
		"text":     []byte("processor,index\n"),
		"short":    []byte("SQLite"),
		"truncate": []byte("SQLite format 3\x00 and then nothing that SQLite can read"),
	}
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := sqlitestore.Open(p)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, store.ErrFormat) || !strings.Contains(err.Error(), p) {
				t.Errorf("Open: %v, want ErrFormat naming %s", err, p)
			}
		})
	}
	t.Run("other database", func(t *testing.T) {
		p := filepath.Join(dir, "other.db")
		db, err := sql.Open("sqlite", p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE t (x)`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if _, err := sqlitestore.Open(p); !errors.Is(err, store.ErrFormat) {
			t.Errorf("Open: %v, want ErrFormat", err)
		}
		if _, err := sqlitestore.Create(p); !errors.Is(err, store.ErrHoldsRecording) {
			t.Errorf("Create: %v, want ErrHoldsRecording", err)
		}
	})
	t.Run("other version", func(t *testing.T) {
		p := filepath.Join(dir, "v9.db")
		s, err := sqlitestore.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		m := store.EncodeMeta(store.Meta{})
		m.Detail = strings.Replace(m.Detail, store.Format, "blackbox-recording/9", 1)
		if err := s.Append(m); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := sqlitestore.Open(p); !errors.Is(err, store.ErrFormat) {
			t.Errorf("Open: %v, want ErrFormat", err)
		}
	})
	t.Run("missing file is not created", func(t *testing.T) {
		p := filepath.Join(dir, "none.db")
		if _, err := sqlitestore.Open(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open: %v, want ErrNotExist", err)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open created %s", p)
		}
	})
}

func TestCreateReusesEmptyRecording(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.db")
	s, err := sqlitestore.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlitestore.Create(p)
	if err != nil {
		t.Fatalf("Create over a recording without rows: %v", err)
	}
	if err := s.Append(storetest.Recording()...); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := sqlitestore.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ps := r.Problems(); len(ps) != 0 {
		t.Errorf("problems: %v", ps)
	}
}

func journalMode(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// record creates a recording at path holding the fixture's rows, open.
func record(t *testing.T, path string) *store.Recording {
	t.Helper()
	s, err := sqlitestore.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(storetest.Recording()...); err != nil {
		t.Fatal(err)
	}
	return s
}

// countRows reads every row of s.
func countRows(t *testing.T, s storetest.Store) int {
	t.Helper()
	n := 0
	for _, err := range s.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// sidecars lists the -wal and -shm files beside path.
func sidecars(path string) []string {
	var have []string
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); err == nil {
			have = append(have, filepath.Base(path+suffix))
		}
	}
	return have
}

// TestWALWhileWritingOneFileWhenClosed: a recording is written in WAL mode;
// Close leaves one self-contained file, and reading it afterwards creates
// nothing beside it and changes none of its bytes.
func TestWALWhileWritingOneFileWhenClosed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.db")
	s := record(t, p)
	if got := journalMode(t, p); got != "wal" {
		t.Errorf("journal_mode while writing = %q, want wal", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := journalMode(t, p); got != "delete" {
		t.Errorf("journal_mode after Close = %q, want delete", got)
	}
	if got := sidecars(p); len(got) != 0 {
		t.Errorf("after Close: %v beside the recording, want none", got)
	}
	before, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sqlitestore.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	n := countRows(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if want := len(storetest.Recording()); n != want {
		t.Errorf("read %d rows, want %d", n, want)
	}
	if got := sidecars(p); len(got) != 0 {
		t.Errorf("after a read: %v beside the recording, want none", got)
	}
	after, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("reading the closed recording changed its bytes")
	}
}

// TestCloseWithAReaderOpenKeepsWAL: while a reader has the recording open,
// Close does not wait for it; the recording stays in WAL mode, complete.
func TestCloseWithAReaderOpenKeepsWAL(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.db")
	s := record(t, p)
	r, err := sqlitestore.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := journalMode(t, p); got != "wal" {
		t.Errorf("journal_mode after Close with a reader open = %q, want wal", got)
	}
	again, err := sqlitestore.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if n, want := countRows(t, again), len(storetest.Recording()); n != want {
		t.Errorf("read %d rows after Close, want %d", n, want)
	}
}

// TestFormatSchema checks that docs/FORMAT.md gives the schema Create runs.
func TestFormatSchema(t *testing.T) {
	doc, err := os.ReadFile("../../docs/FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```sql\n"+sqlitestore.Schema+"\n```") {
		t.Errorf("docs/FORMAT.md does not show sqlitestore.Schema")
	}
}

// TestAValueOfAnotherTypeInATextColumnIsMalformed: SQLite keeps any value in
// any column; a BLOB (or an integer) where the format says text makes the
// row malformed, naming the column, as CSV text that does not parse does.
func TestAValueOfAnotherTypeInATextColumnIsMalformed(t *testing.T) {
	tests := []struct{ column, value string }{
		{"payload", "CAST(payload AS BLOB)"},
		{"processor", "CAST(processor AS BLOB)"},
		{"source", "CAST(source AS BLOB)"},
		{"key", `CAST("key" AS BLOB)`},
		{"detail", "CAST(detail AS BLOB)"},
		{"kind", "CAST(kind AS BLOB)"},
		{"instant", "CAST(instant AS BLOB)"},
		{"reads", "CAST(reads AS BLOB)"},
	}
	for _, tt := range tests {
		t.Run(tt.column+"="+tt.value, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "r.db")
			storetest.Write(t, backend{}, p, storetest.Recording())
			col := tt.column
			if col == "key" {
				col = `"key"`
			}
			// Row 8: ledger's OUTPUT index 4.
			if err := exec(p, `UPDATE rows SET `+col+` = `+tt.value+` WHERE id = `+nth, 7); err != nil {
				t.Fatal(err)
			}
			s, err := sqlitestore.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var found bool
			for _, pr := range s.Problems() {
				if pr.Kind == store.ProblemMalformed && pr.Line == 8 && strings.Contains(pr.Detail, "column "+tt.column+":") {
					found = true
				}
			}
			if !found {
				t.Errorf("Problems: %v, want row 8 malformed naming column %s", s.Problems(), tt.column)
			}
		})
	}
}

// TestADatabaseWhoseSchemaIsNotTheRecordingsIsNotARecording: a table more,
// rows as a view, a column more or less, another index, a trigger: Open
// refuses the file (ErrFormat) and Create does not write into it
// (ErrHoldsRecording).
func TestADatabaseWhoseSchemaIsNotTheRecordingsIsNotARecording(t *testing.T) {
	tests := []struct{ name, sql string }{
		{"an extra table", sqlitestore.Schema + `CREATE TABLE extra (x);`},
		{"rows as a view", `CREATE TABLE t (id INTEGER PRIMARY KEY, processor TEXT, idx INTEGER, kind TEXT, source TEXT,
seq INTEGER, instant TEXT, epoch INTEGER, "key" TEXT, "offset" INTEGER, n INTEGER, payload TEXT, detail TEXT, reads TEXT);
CREATE VIEW rows AS SELECT * FROM t;`},
		{"a column more", strings.Replace(sqlitestore.Schema, "reads     TEXT    NOT NULL", "reads TEXT NOT NULL, extra TEXT", 1)},
		{"a column less", strings.Replace(sqlitestore.Schema, ",\n\treads     TEXT    NOT NULL", "", 1)},
		{"a column of another type", strings.Replace(sqlitestore.Schema, "payload   TEXT", "payload   BLOB", 1)},
		{"no index", strings.Split(sqlitestore.Schema, "CREATE INDEX")[0]},
		{"an extra index", sqlitestore.Schema + "\nCREATE INDEX more ON rows (kind);"},
		{"a trigger", sqlitestore.Schema + "\nCREATE TRIGGER tr AFTER INSERT ON rows BEGIN SELECT 1; END;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "r.db")
			db, err := sql.Open("sqlite", p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(tt.sql); err != nil {
				t.Fatal(err)
			}
			db.Close()
			if s, err := sqlitestore.Open(p); !errors.Is(err, store.ErrFormat) || !strings.Contains(err.Error(), p) {
				if err == nil {
					s.Close()
				}
				t.Errorf("Open: %v, want ErrFormat naming %s", err, p)
			}
			if s, err := sqlitestore.Create(p); !errors.Is(err, store.ErrHoldsRecording) {
				if err == nil {
					s.Close()
				}
				t.Errorf("Create: %v, want ErrHoldsRecording", err)
			}
		})
	}
}

// TestTheProblemsOfAStoreThatCannotBeReadAreUnreadable: a closed store, a
// writer's or a reader's, cannot be read: Problems says so
// (unreadable, naming the file), never "no problem".
func TestTheProblemsOfAStoreThatCannotBeReadAreUnreadable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.db")
	w := record(t, p)
	w.Close()
	r, err := sqlitestore.Open(p)
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

// TestAVersion1RecordingConvertsRowForRow: the version 1 CSV fixture
// copied into SQLite stays version 1 (payloads verbatim) and reads back row
// for row, with no problem but its FAILED row's (a recorded failure).
func TestAVersion1RecordingConvertsRowForRow(t *testing.T) {
	src, err := storetest.CSV.Open("../csvstore/testdata/v1.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want, _ := storetest.ReadAll(src)
	s := storetest.Reopen(t, backend{}, filepath.Join(t.TempDir(), "r.db"), src)
	if got := s.Meta().Format; got != store.FormatV1 {
		t.Errorf("format %q, want %q", got, store.FormatV1)
	}
	if ps := s.Problems(); len(ps) != 1 || !errors.Is(&ps[0], store.ErrFailed) || ps[0].Index != 10 {
		t.Errorf("Problems: %v, want the FAILED row's (index 10)", ps)
	}
	got, errs := storetest.ReadAll(s)
	if d := cmp.Diff(want, got); d != "" || len(errs) > 0 {
		t.Errorf("rows (-csv +sqlite):\n%s%v", d, errs)
	}
}

// TestAReplayPassReadsTheRecordingOnce: Open reads only the META row; the
// first pass of Streams checks every row as it yields them, and once it
// has run to its end Problems and Processors answer from it, without
// reading the recording again: a row broken after the pass is not seen,
// while a Store opened before that pass and asked first reads it.
func TestAReplayPassReadsTheRecordingOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.db")
	storetest.Write(t, backend{}, p, storetest.Recording())
	streamed, err := sqlitestore.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer streamed.Close()
	rows := 0
	for _, err := range streamed.Streams() {
		var pr *store.Problem
		if err != nil && !errors.As(err, &pr) {
			t.Fatal(err)
		}
		rows++
	}
	if rows == 0 {
		t.Fatal("Streams yielded no row")
	}
	asked, err := sqlitestore.Open(p) // opened before the row breaks, asked after
	if err != nil {
		t.Fatal(err)
	}
	defer asked.Close()
	// Row 8 (ledger's OUTPUT index 4) breaks: a kind no recording has.
	if err := exec(p, `UPDATE rows SET kind = 'BROKEN' WHERE id = `+nth, 7); err != nil {
		t.Fatal(err)
	}
	if got := streamed.Problems(); len(got) != 0 {
		t.Errorf("Problems after a whole Streams pass: %v, want none (the pass checked the recording; nothing read again)", got)
	}
	if got := asked.Problems(); len(got) == 0 {
		t.Errorf("Problems of a Store whose recording was first read after the row broke: none, want row 8 malformed")
	}
}

// TestADatabaseCutMidPageIsWholeWhenItsLogHoldsThePage: a write of the
// database file cut mid-page while SQLite copied its write-ahead log into
// it (a checkpoint on a full disk) leaves the file a fraction of a page
// long; SQLite reads that page from the log, whose committed frame holds
// it whole, so the recording is complete. The same file with no log, or
// with a log whose commit frame is torn, is unreadable (cut short).
func TestADatabaseCutMidPageIsWholeWhenItsLogHoldsThePage(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	w, err := sqlitestore.Create(live)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The first Append makes the file (and folds the log into it); the
	// second's rows are in the log.
	rows := storetest.Recording()
	if err := w.Append(rows[:1]...); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(rows[1:]...); err != nil {
		t.Fatal(err)
	}
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logged, err := os.ReadFile(live + "-wal")
	if err != nil || len(logged) == 0 {
		t.Fatalf("the open recording should have its rows in its log: %v", err)
	}
	// The database file as a checkpoint writes it whole.
	full := filepath.Join(dir, "full.db")
	copyFile(live, full)
	copyFile(live+"-wal", full+"-wal")
	db, err := sql.Open("sqlite", full)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	if len(whole)%page != 0 || len(whole) < 2*page {
		t.Fatalf("checkpointed database of %d bytes, want whole pages, two at least", len(whole))
	}
	cut := whole[:len(whole)-page/2]
	tests := []struct {
		name       string
		log        []byte // nil: none
		unreadable bool
	}{
		{"the log holds the cut page", logged, false},
		{"no log", nil, true},
		{"the log's commit frame torn", logged[:len(logged)-100], true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, fmt.Sprintf("cut-%d.db", i))
			if err := os.WriteFile(p, cut, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.log != nil {
				if err := os.WriteFile(p+"-wal", tc.log, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r, err := sqlitestore.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ps := r.Problems()
			unreadable := slices.ContainsFunc(ps, func(p store.Problem) bool { return errors.Is(&p, store.ErrUnreadable) })
			if unreadable != tc.unreadable {
				t.Errorf("unreadable %v, want %v: %v", unreadable, tc.unreadable, ps)
			}
			if !tc.unreadable && (len(ps) != 0 || countRows(t, r) != len(storetest.Recording())) {
				t.Errorf("problems %v and %d rows, want none and the %d rows recorded", ps, countRows(t, r), len(storetest.Recording()))
			}
		})
	}
}

// killInATransaction leaves at killed the database at live (a recording
// in rollback-journal mode, closed) as a process killed inside a
// transaction leaves it: the pages of many uncommitted rows spilled into
// the file and a hot journal beside it. It returns the bytes of both.
func killInATransaction(t *testing.T, live, killed string) (db, journal []byte) {
	t.Helper()
	w, err := sql.Open("sqlite", live)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.SetMaxOpenConns(1)
	for _, q := range []string{`PRAGMA journal_mode=DELETE`, `PRAGMA cache_size=1`} {
		if _, err := w.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := w.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range 500 { // enough to spill pages into the file before the commit
		if _, err := tx.Exec(`INSERT INTO rows (processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads)
VALUES ('ledger', ?, 'TIMER', '', 1, '2024-03-01T08:00:03Z', 0, '', 0, 0, ?, '', '')`, 100+i, strings.Repeat("x", 200)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	db, journal = read(live), read(live+"-journal")
	if len(journal) == 0 {
		t.Fatal("the transaction left no journal")
	}
	if err := os.WriteFile(killed, db, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(killed+"-journal", journal, 0o644); err != nil {
		t.Fatal(err)
	}
	return db, journal
}

// TestAKilledRecordingWithAHotJournalReadsAsCommitted: a writer killed in
// a rollback-journal transaction (the switch out of WAL mode at Close)
// leaves a hot journal, which a read-only connection may not roll back
// (SQLITE_READONLY_ROLLBACK). Open reads the recording from a copy rolled
// back in a temporary directory: exactly the committed rows, the Problems
// the recording has without the transaction, the run's files unchanged and
// nothing left in the temporary directory after Close. So does Create's
// check of what the file holds.
func TestAKilledRecordingWithAHotJournalReadsAsCommitted(t *testing.T) {
	all := storetest.Recording()
	tests := []struct {
		name     string
		rows     []store.Entry
		problems bool // whether the committed recording has problems
	}{
		{"complete", all, false},
		{"killed before its ENDs", all[:len(all)-2], true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			live := filepath.Join(dir, fmt.Sprintf("live-%d.db", i))
			w, err := sqlitestore.Create(live)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Append(tc.rows...); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want := read(t, live)
			if len(want.Rows) != len(tc.rows) || (len(want.Problems) != 0) != tc.problems {
				t.Fatalf("the committed recording reads %d rows and problems %v, want %d rows, problems %v",
					len(want.Rows), want.Problems, len(tc.rows), tc.problems)
			}
			killed := filepath.Join(dir, fmt.Sprintf("run-%d.db", i))
			db, journal := killInATransaction(t, live, killed)

			r, err := store.Open(killed)
			if err != nil {
				t.Fatalf("store.Open: %v", err)
			}
			got := readRecording(t, r)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the killed recording read (-committed +got):\n%s", diff)
			}
			for suffix, b := range map[string][]byte{"": db, "-journal": journal} {
				if after, err := os.ReadFile(killed + suffix); err != nil || !bytes.Equal(after, b) {
					t.Errorf("%s changed or went (%v)", killed+suffix, err)
				}
			}
			if got := sidecars(killed); len(got) != 0 {
				t.Errorf("%v beside the recording after a read, want none", got)
			}
			if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
				t.Errorf("left in the temporary directory after Close: %v (%v)", left, err)
			}
			_, err = sqlitestore.Create(killed)
			if !errors.Is(err, store.ErrHoldsRecording) {
				t.Errorf("Create over the killed recording: %v, want ErrHoldsRecording", err)
			}
		})
	}
}

// reading is what a reader reads of a recording: its rows and Problems
// (their File aside).
type reading struct {
	Rows     []store.Entry
	Problems []store.Problem
}

func readRecording(t *testing.T, r *store.Recording) reading {
	t.Helper()
	var got reading
	for e, err := range r.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		got.Rows = append(got.Rows, e)
	}
	for _, p := range r.Problems() {
		p.File = ""
		got.Problems = append(got.Problems, p)
	}
	return got
}

func read(t *testing.T, path string) reading {
	t.Helper()
	r, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return readRecording(t, r)
}

// TestAppendsOfAnySizeReadBackInOrder: Appends of as many rows as the
// multi-row INSERTs hold (ChunkRows), one more, one fewer, several
// statements' worth and a few rows read back as they were appended, in
// order, with no problem.
func TestAppendsOfAnySizeReadBackInOrder(t *testing.T) {
	c := sqlitestore.ChunkRows
	for _, sizes := range [][]int{
		{1, 1, 1},
		{c - 1, c, c + 1},
		{2*c + 3, 1, 3*c - 1},
		{5*c + 7},
	} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			total := 0
			for _, n := range sizes {
				total += n
			}
			want := []store.Entry{store.EncodeMeta(store.Meta{Created: storetest.T0, Streams: []string{"p"}}),
				{Processor: "p", Index: 1, Kind: store.KindStart, Instant: storetest.T0}}
			for i := int64(1); len(want) < total; i++ {
				want = append(want, storetest.Input("p", i)...)
			}
			want = want[:total]
			path := filepath.Join(t.TempDir(), "r.db")
			s, err := sqlitestore.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			rest := want
			for _, n := range sizes {
				if err := s.Append(rest[:n]...); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			got := read(t, path)
			if diff := cmp.Diff(want, got.Rows); diff != "" {
				t.Errorf("rows (-appended +read):\n%s", diff)
			}
		})
	}
}
