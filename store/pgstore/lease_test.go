package pgstore_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/blackbox-audit/blackbox/internal/pgtest"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
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

func head() []store.Entry {
	return []store.Entry{store.EncodeMeta(store.Meta{Created: storetest.T0, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart}}
}

func exec(t *testing.T, db, q string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tag, err := c.Exec(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return tag.RowsAffected()
}

func count(t *testing.T, db, run string) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int64
	if err := c.QueryRow(ctx, `SELECT count(*) FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1)`, run).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// create creates run in db, failing the test on an error; its cleanup
// closes it.
func create(t *testing.T, db, run string) *store.Recording {
	t.Helper()
	w, err := pgstore.Create(runURL(t, db, run))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestASecondWriterIsRefusedAtOnce: while a writer holds a run, a second
// Create of it fails at once (no wait for the lock) with ErrLocked naming
// the URL; once the first has closed, a Create of the run, which now holds
// rows, is refused with ErrHoldsRecording.
func TestASecondWriterIsRefusedAtOnce(t *testing.T) {
	db := pgtest.Database(t)
	u := runURL(t, db, "r")
	w := create(t, db, "r")
	if err := w.Append(head()...); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		w2, err := pgstore.Create(u)
		if err == nil {
			w2.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		var fe *store.FileError
		if !errors.Is(err, store.ErrLocked) || !errors.As(err, &fe) || fe.Path != u {
			t.Errorf("second Create: %v, want ErrLocked naming %s", err, u)
		}
	case <-time.After(time.Minute):
		t.Fatal("second Create waited for the lock")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Create(u); !errors.Is(err, store.ErrHoldsRecording) {
		t.Errorf("Create of a closed run with rows: %v, want ErrHoldsRecording", err)
	}
}

// TestAStaleWriterCannotAppend: a writer whose lease generation is no
// longer the run's (another writer took the run over, as through a
// connection pooler that dropped its lock) has its Append refused with
// ErrLeaseLost, writes no row, and stays refused.
func TestAStaleWriterCannotAppend(t *testing.T) {
	db := pgtest.Database(t)
	w := create(t, db, "r")
	if err := w.Append(head()...); err != nil {
		t.Fatal(err)
	}
	if n := exec(t, db, `UPDATE blackbox_runs SET generation = generation + 1 WHERE run_id = 'r'`); n != 1 {
		t.Fatalf("took over %d runs, want 1", n)
	}
	for range 2 {
		if err := w.Append(storetest.Input("p", 1)...); !errors.Is(err, pgstore.ErrLeaseLost) {
			t.Errorf("Append of a stale writer: %v, want ErrLeaseLost", err)
		}
	}
	if n := count(t, db, "r"); n != 2 {
		t.Errorf("the run holds %d rows, want the 2 of the writer's lease", n)
	}
}

// TestAWriterKilledBeforeItsFirstRowsLeavesARunTakenOver: a writer whose
// session ended (killed: its lock released) before it appended anything
// leaves an empty run (the kill waited for: pg_terminate_backend with a
// timeout), which the next writer takes over with a new
// generation; the first can append nothing, the second appends.
func TestAWriterKilledBeforeItsFirstRowsLeavesARunTakenOver(t *testing.T) {
	db := pgtest.Database(t)
	u := runURL(t, db, "r")
	w1 := create(t, db, "r")
	if n := exec(t, db, `SELECT pg_terminate_backend(pid, 60000) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()`); n != 1 {
		t.Fatalf("terminated %d sessions, want the writer's", n)
	}
	if _, err := pgstore.Open(u); !errors.Is(err, store.ErrFormat) {
		t.Errorf("Open of a run without rows: %v, want ErrFormat", err)
	}
	w2, err := pgstore.Create(u)
	if err != nil {
		t.Fatalf("Create over a run without rows whose writer is gone: %v", err)
	}
	defer w2.Close()
	if err := w1.Append(head()...); err == nil {
		t.Error("the killed writer appended")
	}
	if err := w2.Append(head()...); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "r"); n != 2 {
		t.Errorf("the run holds %d rows, want 2", n)
	}
}

// TestANewerSchemaIsRefused: a database whose schema a newer build wrote
// is refused by Create and Open with a *VersionError naming both versions,
// and left as it was.
func TestANewerSchemaIsRefused(t *testing.T) {
	db := pgtest.Database(t)
	w := create(t, db, "r")
	if err := w.Append(head()...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	newer := pgstore.SchemaVersion + 1
	exec(t, db, `INSERT INTO blackbox_schema (version) VALUES ($1)`, newer)
	for name, f := range map[string]func(string) (*store.Recording, error){"Create": pgstore.Create, "Open": pgstore.Open} {
		_, err := f(runURL(t, db, "r2"))
		var ve *pgstore.VersionError
		if !errors.Is(err, pgstore.ErrSchemaNewer) || !errors.As(err, &ve) || ve.Database != newer || ve.Build != pgstore.SchemaVersion {
			t.Errorf("%s: %v, want a *VersionError{%d, %d}", name, err, newer, pgstore.SchemaVersion)
		}
	}
	if n := exec(t, db, `SELECT FROM blackbox_runs`); n != 1 {
		t.Errorf("%d runs, want the 1 written before", n)
	}
}

// TestWritersMigrateAFreshDatabaseTogether: writers of several runs that
// start at once on a database without the schema all succeed: one applies
// the migrations, the others wait for it (the schema lock).
func TestWritersMigrateAFreshDatabaseTogether(t *testing.T) {
	db := pgtest.Database(t)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			w, err := pgstore.Create(runURL(t, db, string(rune('a'+i))))
			if err == nil {
				err = errors.Join(w.Append(head()...), w.Close())
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := exec(t, db, `SELECT FROM blackbox_schema`); n != int64(pgstore.SchemaVersion) {
		t.Errorf("%d schema versions recorded, want %d", n, pgstore.SchemaVersion)
	}
}

// TestOpenOfAMissingRun: a run the database does not hold, in a database
// with runs or without, is fs.ErrNotExist, as a missing file is; a URL
// without a run id is ErrRunID.
func TestOpenOfAMissingRun(t *testing.T) {
	db := pgtest.Database(t)
	if _, err := pgstore.Open(runURL(t, db, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open in a database without runs: %v, want fs.ErrNotExist", err)
	}
	w := create(t, db, "r")
	if err := w.Append(head()...); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Open(runURL(t, db, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing run: %v, want fs.ErrNotExist", err)
	}
	for name, f := range map[string]func(string) (*store.Recording, error){"Create": pgstore.Create, "Open": pgstore.Open} {
		if _, err := f(db); !errors.Is(err, pgstore.ErrRunID) {
			t.Errorf("%s without run=: %v, want ErrRunID", name, err)
		}
	}
}

// TestRunsAndPrune: Runs lists every run with its member, group, feeds,
// inputs, whether it ended and whether it is being written; Prune refuses
// (deleting nothing) while one of its runs is written, then deletes the
// older runs, and their writer, were one stale, could append nothing.
func TestRunsAndPrune(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Database(t)
	done, err := pgstore.Create(runURL(t, db, "done") + "&member=m1&group=g")
	if err != nil {
		t.Fatal(err)
	}
	rows := append(head(), storetest.Input("p", 1)...)
	rows = append(rows, store.Entry{Processor: "p", Index: 5, Kind: store.KindEnd, N: 1})
	if err := done.Append(rows...); err != nil {
		t.Fatal(err)
	}
	if err := done.Close(); err != nil {
		t.Fatal(err)
	}
	live, err := pgstore.Create(runURL(t, db, "live") + "&member=m2&group=g")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.Append(head()...); err != nil {
		t.Fatal(err)
	}
	runs, err := pgstore.Runs(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	type brief struct {
		ID, Member, Group string
		Ended, Writing    bool
		Rows, Inputs      int64
		Feeds             []string
	}
	var got []brief
	for _, r := range runs {
		got = append(got, brief{r.ID, r.Member, r.Group, !r.Ended.IsZero(), r.Writing, r.Rows, r.Inputs, r.Feeds})
	}
	want := []brief{
		{"done", "m1", "g", true, false, 6, 1, []string{"orders"}},
		{"live", "m2", "g", false, true, 2, 0, []string{}},
	}
	if len(got) != len(want) {
		t.Fatalf("Runs = %+v, want %+v", got, want)
	}
	for i := range want {
		if g, w := got[i], want[i]; g.ID != w.ID || g.Member != w.Member || g.Group != w.Group || g.Ended != w.Ended ||
			g.Writing != w.Writing || g.Rows != w.Rows || g.Inputs != w.Inputs || len(g.Feeds) != len(w.Feeds) ||
			len(g.Feeds) > 0 && g.Feeds[0] != w.Feeds[0] {
			t.Errorf("run %d = %+v, want %+v", i, g, w)
		}
	}

	future := time.Now().Add(time.Hour)
	_, err = pgstore.Prune(ctx, db, future)
	var we *pgstore.WritingError
	if !errors.Is(err, pgstore.ErrWriting) || !errors.As(err, &we) || len(we.Runs) != 1 || we.Runs[0] != "live" {
		t.Fatalf("Prune with a run being written: %v, want a *WritingError of live", err)
	}
	if n := count(t, db, "done"); n != 6 {
		t.Fatalf("a refused Prune left %d rows of done, want 6", n)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	pruned, err := pgstore.Prune(ctx, db, future)
	if err != nil || len(pruned) != 2 {
		t.Fatalf("Prune = %v, %v; want both runs", pruned, err)
	}
	if runs, err := pgstore.Runs(ctx, db); err != nil || len(runs) != 0 {
		t.Errorf("Runs after Prune = %v, %v; want none", runs, err)
	}
	if n := exec(t, db, `DELETE FROM blackbox_rows`); n != 0 {
		t.Errorf("%d rows of the pruned runs left", n)
	}
}

// TestABatchThatFailsCommitsNothing: an Append is one transaction whatever
// stops it, the lease lost before its rows are sent (a batch larger than
// the socket's buffers, so the refusal comes while the rows are still
// being sent) or a row the server refuses in the middle of the batch: the
// run keeps the rows and the count (nrows) it had, the writer stays
// refused with the same error, and it closes cleanly, releasing the run.
func TestABatchThatFailsCommitsNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inputs int
		spoil  string // SQL run before the Append: it makes the Append fail
		extra  int64  // rows spoil inserts
		want   func(error) bool
	}{
		{"lease lost", 5000, `UPDATE blackbox_runs SET generation = generation + 1 WHERE run_id = 'r'`, 0,
			func(err error) bool { return errors.Is(err, pgstore.ErrLeaseLost) }},
		{"a row refused", 10, `INSERT INTO blackbox_rows SELECT run, 7, processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads
FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = 'r') AND id = 2`, 1,
			func(err error) bool {
				var pe *pgconn.PgError
				return errors.As(err, &pe) && pe.Code == "23505" && !errors.Is(err, pgstore.ErrLeaseLost)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := pgtest.Database(t)
			w := create(t, db, "r")
			if err := w.Append(head()...); err != nil {
				t.Fatal(err)
			}
			exec(t, db, tc.spoil)
			var rows []store.Entry
			for i := range tc.inputs {
				rows = append(rows, storetest.Input("p", int64(i+1))...)
			}
			for range 2 {
				if err := w.Append(rows...); !tc.want(err) {
					t.Errorf("Append: %v, want the %s", err, tc.name)
				}
			}
			if got, want := count(t, db, "r"), 2+tc.extra; got != want {
				t.Errorf("the run holds %d rows, want %d", got, want)
			}
			c, err := pgx.Connect(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			var nrows int64
			if err := c.QueryRow(ctx, `SELECT nrows FROM blackbox_runs WHERE run_id = 'r'`).Scan(&nrows); err != nil {
				t.Fatal(err)
			}
			if nrows != 2 {
				t.Errorf("nrows = %d, want the 2 rows appended before", nrows)
			}
			if err := w.Close(); err != nil {
				t.Errorf("Close after the failed Append: %v", err)
			}
			runs, err := pgstore.Runs(ctx, db)
			if err != nil || len(runs) != 1 || runs[0].Writing {
				t.Errorf("Runs after Close = %+v, %v; want the run, not being written", runs, err)
			}
		})
	}
}

// TestAVersion1DatabaseIsMigrated: a database of schema version 1 (with
// the stream index, without the index of the run's own rows), holding a
// run, is refused by a reader until a writer of this build migrates it
// (dropping the one, creating the other); then its run reads as it was
// written, stream by stream.
func TestAVersion1DatabaseIsMigrated(t *testing.T) {
	db := pgtest.Database(t)
	w := create(t, db, "old")
	rows := append(head(), storetest.Input("p", 1)...)
	rows = append(rows, store.Entry{Processor: "p", Index: 5, Kind: store.KindEnd, N: 1})
	if err := w.Append(rows...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	exec(t, db, `CREATE INDEX blackbox_rows_stream ON blackbox_rows (run, processor, id)`)
	exec(t, db, `DROP INDEX blackbox_rows_run`)
	exec(t, db, `DELETE FROM blackbox_schema WHERE version > 1`)
	if _, err := pgstore.Open(runURL(t, db, "old")); err == nil {
		t.Fatal("a reader read a version 1 database")
	}
	w2 := create(t, db, "new")
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := exec(t, db, `SELECT FROM pg_indexes WHERE indexname = 'blackbox_rows_stream'`); n != 0 {
		t.Errorf("the stream index is still there after the migration")
	}
	if n := exec(t, db, `SELECT FROM pg_indexes WHERE indexname = 'blackbox_rows_run'`); n != 1 {
		t.Errorf("no index of the run's own rows after the migration")
	}
	r, err := pgstore.Open(runURL(t, db, "old"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, p := range []string{"", "p"} {
		var got, want []store.Entry
		for _, e := range rows {
			if e.Processor == p {
				want = append(want, e)
			}
		}
		for e, err := range r.Stream(p) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
		if len(got) != len(want) {
			t.Fatalf("stream %q: %d rows, want %d", p, len(got), len(want))
		}
		for i := range want {
			if got[i].Index != want[i].Index || got[i].Kind != want[i].Kind {
				t.Errorf("stream %q row %d: %v, want %v", p, i, got[i], want[i])
			}
		}
	}
}
