package cli_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestAnSQLiteRecordingWithAHotJournalIsReadByEveryCommand: a writer
// killed inside a rollback-journal transaction (the switch out of WAL mode
// at its Close) leaves a hot journal beside the database. Every command
// reads the recording as committed (here complete), none calls it "not a
// blackbox recording" (exit 2, as verify did: SQLite refuses a read-only
// connection a hot journal), and the run's files stay as they were.
func TestAnSQLiteRecordingWithAHotJournalIsReadByEveryCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	ledgerRecording(t, "whole.csv", created, []int64{1, 2, 3}, nil, 3)
	if code, out := execute(t, context.Background(), "convert", "whole.csv", "live.db"); code != 0 {
		t.Fatalf("convert: exit %d:\n%s", code, out)
	}
	// The kill: the database and its journal as a transaction that
	// spilled pages into the file left them.
	db, err := sql.Open("sqlite", "live.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{`PRAGMA journal_mode=DELETE`, `PRAGMA cache_size=1`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range 500 {
		if _, err := tx.Exec(`INSERT INTO rows (processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads)
VALUES ('ledger', ?, 'TIMER', '', 1, '2030-01-01T00:00:00Z', 0, '', 0, 0, ?, '', '')`, 100+i, strings.Repeat("x", 200)); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string][]byte{}
	for _, suffix := range []string{"", "-journal"} {
		b, err := os.ReadFile("live.db" + suffix)
		if err != nil || len(b) == 0 {
			t.Fatalf("live.db%s: %d bytes (%v)", suffix, len(b), err)
		}
		if err := os.WriteFile("run-1.db"+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files["run-1.db"+suffix] = b
	}
	vs := verdicts(t, "run-1.db")
	for _, v := range vs {
		if strings.Contains(v.out, "not a blackbox recording") {
			t.Errorf("%s: exit %d, says not a recording:\n%s", v.command, v.code, v.out)
		}
	}
	wantAll(t, vs, 0, map[string]string{
		"verify": "complete", "replay": "complete", "diff": "same", "explain": "nothing lost", "report": "complete"})
	for name, b := range files {
		if after, err := os.ReadFile(name); err != nil || !bytes.Equal(after, b) {
			t.Errorf("%s changed or went (%v)", name, err)
		}
	}
}
