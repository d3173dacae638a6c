package torture

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
)

// TestTheReaderReadsAKilledSQLiteRecordingWithAHotJournal: a run killed
// in the middle of a transaction leaves its database with a hot rollback
// journal beside it; the oracle's reader reads what was committed (SQLite
// rolls the journal back in a copy), not "attempt to write a readonly
// database", and leaves the run's files as they were.
func TestTheReaderReadsAKilledSQLiteRecordingWithAHotJournal(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	db, err := sql.Open("sqlite", live)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	const insert = `INSERT INTO rows (processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads)
		VALUES (?, ?, ?, '', 0, '', 0, '', 0, 0, '', ?, '')`
	for _, q := range []string{`PRAGMA journal_mode=DELETE`, `PRAGMA cache_size=1`, `CREATE TABLE rows (id INTEGER PRIMARY KEY, processor TEXT NOT NULL,
		idx INTEGER NOT NULL, kind TEXT NOT NULL, source TEXT NOT NULL, seq INTEGER NOT NULL, instant TEXT NOT NULL,
		epoch INTEGER NOT NULL, "key" TEXT NOT NULL, "offset" INTEGER NOT NULL, n INTEGER NOT NULL, payload TEXT NOT NULL,
		detail TEXT NOT NULL, reads TEXT NOT NULL)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(insert, "", 1, "META", `{"apps":{"p":"app"},"streams":["p"]}`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(insert, "p", 1, "START", ""); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 500; i++ { // enough to spill pages to the file before the commit
		if _, err := tx.Exec(insert, "p", i, "TIMER", string(make([]byte, 200))); err != nil {
			t.Fatal(err)
		}
	}
	// The kill: the database and its journal as they are mid-transaction.
	killed := filepath.Join(dir, "run-1.db")
	for _, suffix := range []string{"", "-journal"} {
		if err := copyFile(live+suffix, killed+suffix); err != nil {
			t.Fatalf("the transaction left no %s: %v", live+suffix, err)
		}
	}
	tx.Rollback()
	before, err := os.ReadFile(killed + "-journal")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := readSQLite(killed)
	if err != nil {
		t.Fatalf("readSQLite: %v", err)
	}
	if got, want := len(rec.rows), 2; got != want || len(rec.bad) != 0 {
		t.Errorf("read %d rows (bad %v), want the %d committed", got, rec.bad, want)
	}
	if after, err := os.ReadFile(killed + "-journal"); err != nil || string(after) != string(before) {
		t.Errorf("the run's journal changed or went (%v)", err)
	}
}

// TestLinesRotatedAwayWhileStoppedAreAtRiskOnlyWithoutAPointer: a rename
// while stopped keeps the lines in the rotated file, which a restart reads
// when its pointer names a file (it looks for that file among the rotated
// ones); with no pointer (the runs before committed nothing), the next run
// is a first run again and reads the path alone: the lines are at risk.
func TestLinesRotatedAwayWhileStoppedAreAtRiskOnlyWithoutAPointer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pointer []byte // nil: no pointer file
		want    bool
	}{
		{"no pointer", nil, true},
		{"a pointer naming no file", make([]byte, 1024), true},
		{"a pointer naming a file", append(make([]byte, 16), 1, 2, 3, 4, 5, 6, 7, 8), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := generate(1, Limits{}, Only{Kind: "runs", Source: "file"})
			fi := &fileInput{dir: dir, path: filepath.Join(dir, "in.txt"), gen: newLineGen(&s)}
			if tc.pointer != nil {
				if err := os.WriteFile(fi.path+".ptr", tc.pointer, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := fi.apply(inputOp{Kind: opRename, N: 3}); err != nil {
				t.Fatal(err)
			}
			if got := len(fi.gen.atRisk) == 3; got != tc.want {
				t.Errorf("at risk: %v (%d lines), want %v", got, len(fi.gen.atRisk), tc.want)
			}
		})
	}
}
