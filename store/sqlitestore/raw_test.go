package sqlitestore_test

import (
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// edited is a copy of the recording at base, in dir, with the value v put
// in column col of the row of id row (through database/sql, as any
// program could write it): "" when the table's constraints refuse it (a
// NULL).
func edited(t testing.TB, base, dir string, row int64, col string, v any) string {
	t.Helper()
	p, db := copied(t, base, dir)
	defer db.Close()
	if _, err := db.Exec(`UPDATE rows SET `+col+` = ? WHERE id = ?`, v, row); err != nil {
		if v == nil {
			return ""
		}
		t.Fatal(err)
	}
	return p
}

// baseRecording is the conformance suite's recording, written whole into
// dir (one file, no log beside it).
func baseRecording(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "base.db")
	s, err := sqlitestore.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(storetest.Recording()...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// quoted is column col of cols as an UPDATE names it.
func quoted(col int) string {
	switch c := []string{"id", "processor", "idx", "kind", "source", "seq", "instant", "epoch", "key", "offset", "n", "payload", "detail", "reads"}[col]; c {
	case "key", "offset":
		return `"` + c + `"`
	default:
		return c
	}
}

// TestAReaderDecodesEveryRowAsDatabaseSQLDoes: the reader's rows (rawConn,
// rawStmt.row) are the ones database/sql and the scanner decode (a
// writer's Scan), row for row, Problems included: for the conformance
// recording; for its rows copied until every edit has a row of its own,
// each edited with a value of each type SQLite keeps (text, blob,
// integer, real), well-formed or not, in each column; and for its META
// row's payload edited (the format the other rows are read in).
func TestAReaderDecodesEveryRowAsDatabaseSQLDoes(t *testing.T) {
	dir := t.TempDir()
	base := baseRecording(t, dir)
	viaSQL, viaRaw := decodedBoth(t, base)
	if len(viaSQL) != len(storetest.Recording()) {
		t.Fatalf("read %d rows, want %d", len(viaSQL), len(storetest.Recording()))
	}
	if d := cmp.Diff(viaSQL, viaRaw); d != "" {
		t.Fatalf("the conformance recording decoded (-database/sql +raw):\n%s", d)
	}
	values := []any{"", "x", "OUTPUT", "META", "2030-01-01T00:00:00Z", "2030-01-01T00:00:00.5Z;2030-01-01T00:00:01Z",
		"a\nb", "~aGk=", "\xff", `{"format":"blackbox-recording/1"}`, []byte("x"), int64(-1), int64(7), 1.5}
	type edit struct {
		col string
		v   any
	}
	var edits []edit
	for col := 1; col < 14; col++ {
		for _, v := range values {
			edits = append(edits, edit{quoted(col), v})
		}
	}
	p, db := copied(t, base, dir)
	defer db.Close()
	const c = `processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads`
	for n := len(storetest.Recording()); n <= len(edits); n += n - 1 {
		if _, err := db.Exec(`INSERT INTO rows (` + c + `) SELECT ` + c + ` FROM rows WHERE id > 1 ORDER BY id`); err != nil {
			t.Fatal(err)
		}
	}
	for i, ed := range edits { // row 1, the META row, stays
		if _, err := db.Exec(`UPDATE rows SET `+ed.col+` = ? WHERE id = ?`, ed.v, i+2); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	viaSQL, viaRaw = decodedBoth(t, p)
	if d := cmp.Diff(viaSQL, viaRaw); d != "" {
		t.Fatalf("rows 2-%d, each with one column edited, decoded (-database/sql +raw):\n%s", len(edits)+1, d)
	}
	problems := 0
	for _, r := range viaRaw {
		if r.Problem != nil {
			problems++
		}
	}
	if problems < len(edits)/2 {
		t.Errorf("%d of %d edited rows malformed: the edits did not reach the checks", problems, len(edits))
	}
	for _, v := range values {
		p := edited(t, base, dir, 1, "payload", v)
		viaSQL, viaRaw := decodedBoth(t, p)
		if d := cmp.Diff(viaSQL, viaRaw); d != "" {
			t.Fatalf("the META row's payload = %#v decoded (-database/sql +raw):\n%s", v, d)
		}
	}
}

// FuzzRawRow: any value of any type in any column of any row decodes as
// database/sql and the scanner decode it.
func FuzzRawRow(f *testing.F) {
	f.Add(int64(2), 11, byte(0), "hello")
	f.Add(int64(1), 11, byte(0), `{"format":"6"}`)
	f.Add(int64(3), 6, byte(0), "2030-01-01T00:00:00.000000001Z")
	f.Add(int64(5), 13, byte(1), "2030-01-01T00:00:00Z")
	f.Add(int64(4), 3, byte(2), "12")
	dir := f.TempDir()
	base := baseRecording(f, dir)
	f.Fuzz(func(t *testing.T, row int64, col int, typ byte, s string) {
		if row < 1 || row > int64(len(storetest.Recording())) || col < 1 || col > 13 {
			t.Skip()
		}
		var v any = s
		switch typ % 5 {
		case 1:
			v = []byte(s)
		case 2:
			v = int64(len(s)) - 3
		case 3:
			v = float64(len(s)) / 2
		case 4:
			v = nil
		}
		p := edited(t, base, t.TempDir(), row, quoted(col), v)
		if p == "" {
			t.Skip("a NULL the table refuses")
		}
		viaSQL, viaRaw := decodedBoth(t, p)
		if d := cmp.Diff(viaSQL, viaRaw); d != "" {
			t.Fatalf("row %d column %s = %#v decoded (-database/sql +raw):\n%s", row, quoted(col), v, d)
		}
	})
}

// decodedBoth is sqlitestore.DecodedBoth, fatal on an error.
func decodedBoth(t testing.TB, path string) (viaSQL, viaRaw []store.Row) {
	t.Helper()
	viaSQL, viaRaw, err := sqlitestore.DecodedBoth(path)
	if err != nil {
		t.Fatal(err)
	}
	return viaSQL, viaRaw
}

// copied is a copy of the recording at base, dir/edited.db (replaced),
// and the copy open through database/sql.
func copied(t testing.TB, base, dir string) (string, *sql.DB) {
	t.Helper()
	p := filepath.Join(dir, "edited.db")
	copyFile(t, base, p)
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	return p, db
}

// copyFile copies the file from to to, replacing it.
func copyFile(t testing.TB, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
