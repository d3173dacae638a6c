package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/internal/pgtest"
	"github.com/blackbox-audit/blackbox/store/pgstore"
)

// runURL is the URL of run in the database at db.
func runURL(t *testing.T, db, run string) string {
	t.Helper()
	u, err := pgstore.WithRun(db, run)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestAPostgresRunWorksAsAFileDoes: run records into a PostgreSQL run
// (--run-id, printed); verify, inspect, replay and diff read it as they
// read a file; convert CSV -> postgres -> CSV gives back the same bytes;
// runs lists it, clean; a second run with the same id is refused (exit 2).
func TestAPostgresRunWorksAsAFileDoes(t *testing.T) {
	db := pgtest.Database(t)
	ctx := t.Context()
	dir := t.TempDir()
	in, csv := filepath.Join(dir, "in.txt"), filepath.Join(dir, "r.csv")
	writeLines(t, in, "alice,5", "bob,7", "tick", "alice,-2")
	if code, out := execute(t, ctx, "run", "--app", "ledger", "--read", "once-earliest", "--input", in, "--store", csv); code != cli.ExitOK {
		t.Fatalf("run to CSV: exit %d:\n%s", code, out)
	}
	pg := runURL(t, db, "one")
	code, out := execute(t, ctx, "run", "--app", "ledger", "--read", "once-earliest", "--input", in, "--pointer", in+".ptr2",
		"--store", db, "--run-id", "one")
	if code != cli.ExitOK || !strings.Contains(out, "run id one") {
		t.Fatalf("run to postgres: exit %d, want 0 and the run id:\n%s", code, out)
	}
	for _, args := range [][]string{{"verify", pg}, {"inspect", pg}, {"replay", pg}, {"diff", csv, pg}, {"diff", pg, csv}} {
		if code, out := execute(t, ctx, args...); code != cli.ExitOK {
			t.Errorf("%s: exit %d, want 0:\n%s", args[0], code, out)
		}
	}
	code, out = execute(t, ctx, "run", "--app", "ledger", "--read", "once-earliest", "--input", in, "--pointer", in+".ptr3",
		"--store", pg)
	if code != cli.ExitFailure || !strings.Contains(out, "already holds a recording") {
		t.Errorf("a second run of one id: exit %d, want 2 naming the recording it holds:\n%s", code, out)
	}

	back := filepath.Join(dir, "back.csv")
	code, out = execute(t, ctx, "convert", csv, db)
	m := regexp.MustCompile(`to (postgres://\S+) \(postgres\)`).FindStringSubmatch(out)
	if code != cli.ExitOK || m == nil {
		t.Fatalf("convert to postgres: exit %d, want 0 naming the new run:\n%s", code, out)
	}
	if code, out := execute(t, ctx, "convert", m[1], back); code != cli.ExitOK {
		t.Fatalf("convert back: exit %d:\n%s", code, out)
	}
	a, _ := os.ReadFile(csv)
	b, _ := os.ReadFile(back)
	if !bytes.Equal(a, b) {
		t.Errorf("CSV -> postgres -> CSV changed the recording:\n%s\n---\n%s", a, b)
	}

	code, out = execute(t, ctx, "runs", "--json", db)
	if code != cli.ExitOK {
		t.Fatalf("runs: exit %d:\n%s", code, out)
	}
	var rep struct {
		Runs []struct {
			Run      string   `json:"run"`
			Feeds    []string `json:"feeds"`
			Inputs   int64    `json:"inputs"`
			Problems int      `json:"problems"`
			Clean    bool     `json:"clean"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("runs --json: %v\n%s", err, out)
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("runs: %d runs, want 2:\n%s", len(rep.Runs), out)
	}
	for _, r := range rep.Runs {
		if !r.Clean || r.Problems != 0 || r.Inputs != 5 || len(r.Feeds) != 1 {
			t.Errorf("run %+v: want clean, 5 input rows (4 lines and a timer), 1 feed", r)
		}
	}
}

// TestAPostgresRunEditedWithSQLIsNotProven: rows deleted, duplicated or
// edited with SQL make verify answer not complete and replay not proven
// (exit 3 or a divergence), never exit 0.
func TestAPostgresRunEditedWithSQLIsNotProven(t *testing.T) {
	db := pgtest.Database(t)
	ctx := t.Context()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, "alice,5", "bob,7", "alice,-2")
	for i, tc := range []struct{ name, sql string }{
		{"a DELIVERY deleted", `DELETE FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND id = (SELECT min(id) FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND kind = 'DELIVERY')`},
		{"an INLINE row duplicated", `INSERT INTO blackbox_rows SELECT run, (SELECT max(id) + 1 FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1)), processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads
FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND id = (SELECT min(id) FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND kind = 'INLINE')`},
		{"an OUTPUT edited", `UPDATE blackbox_rows SET payload = '{"edited":true}' WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND id = (SELECT min(id) FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND kind = 'OUTPUT')`},
		{"an END's count edited", `UPDATE blackbox_rows SET n = n + 1 WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND kind = 'END'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := "r" + string(rune('a'+i))
			u := runURL(t, db, run)
			if code, out := execute(t, ctx, "run", "--app", "ledger", "--read", "once-earliest", "--input", in,
				"--pointer", filepath.Join(dir, run+".ptr"), "--store", u); code != cli.ExitOK {
				t.Fatalf("run: exit %d:\n%s", code, out)
			}
			c, err := pgx.Connect(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			tag, err := c.Exec(context.Background(), tc.sql, run)
			c.Close(ctx)
			if err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("%s: %v rows, %v", tc.sql, tag.RowsAffected(), err)
			}
			code, out := execute(t, ctx, "verify", u)
			codeR, outR := execute(t, ctx, "replay", u)
			if code == cli.ExitOK && codeR == cli.ExitOK {
				t.Errorf("verify and replay both proven:\n%s\n%s", out, outR)
			}
			if codeR == cli.ExitOK {
				t.Errorf("replay exit 0:\n%s", outR)
			}
		})
	}
}

// TestAStalePostgresWriterStopsTheRun: a run whose lease is taken from it
// while it runs (the run's generation counted up with SQL, as a takeover
// does) appends nothing more: the run ends with exit 3, its recording
// broken, and the run holds the rows written before, unfinished.
func TestAStalePostgresWriterStopsTheRun(t *testing.T) {
	db := pgtest.Database(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.jsonl")
	writeLines(t, in, "alice,1", "bob,2")
	u := runURL(t, db, "stale")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	lines := make(chan struct{}, 16)
	signal := cli.WithOutWriter(func(w io.Writer) io.Writer { return lineSignal{w, lines} })
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		var o bytes.Buffer
		code := newCLI(&o, signal).Execute(ctx, []string{"run", "--app", "ledger", "--input", in, "--store", u, "--follow", "--out", out})
		done <- result{code, o.String()}
	}()
	awaitLines(t, lines, 2) // delivered: recorded and committed
	c, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var before int64
	if err := c.QueryRow(t.Context(), `UPDATE blackbox_runs SET generation = generation + 1 WHERE run_id = 'stale' RETURNING nrows`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	writeLines(t, in, "carol,3")
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the run did not stop")
	}
	if r.code != cli.ExitIncomplete || !strings.Contains(r.out, "run lease lost") {
		t.Errorf("exit %d, want 3 and the lease lost:\n%s", r.code, r.out)
	}
	var after int64
	if err := c.QueryRow(t.Context(), `SELECT count(*) FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = 'stale')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the run holds %d rows, want the %d written before its lease was taken", after, before)
	}
	if code, o := execute(t, t.Context(), "verify", u); code != cli.ExitIncomplete {
		t.Errorf("verify: exit %d, want 3 (unfinished):\n%s", code, o)
	}
}

// TestANewerPostgresSchemaIsRefused: a database a newer blackbox wrote is
// refused by run and by verify before any work: exit 2, naming both
// schema versions.
func TestANewerPostgresSchemaIsRefused(t *testing.T) {
	db := pgtest.Database(t)
	ctx := t.Context()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, "alice,1")
	u := runURL(t, db, "r")
	if code, out := execute(t, ctx, "run", "--app", "ledger", "--read", "once-earliest", "--input", in, "--store", u); code != cli.ExitOK {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	c, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	newer := pgstore.SchemaVersion + 1
	if _, err := c.Exec(ctx, `INSERT INTO blackbox_schema (version) VALUES ($1)`, newer); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("schema is version %d, this build's is version %d", newer, pgstore.SchemaVersion)
	for _, args := range [][]string{
		{"verify", u},
		{"run", "--app", "ledger", "--read", "once-earliest", "--input", in, "--pointer", in + ".2", "--store", runURL(t, db, "r2")},
	} {
		if code, out := execute(t, ctx, args...); code != cli.ExitFailure || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s", args[0], code, want, out)
		}
	}
}
