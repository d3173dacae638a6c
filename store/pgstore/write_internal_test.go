package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/blackbox-audit/blackbox/internal/pgtest"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
)

// TestAWriterThatDiesWhileSendingABatchCommitsNothing: a writer whose
// connection ends in the middle of an Append's message (its lease check
// done, half of the COPY data sent: what a SIGKILL leaves) commits
// nothing of the batch, its count into the lease row included.
func TestAWriterThatDiesWhileSendingABatchCommitsNothing(t *testing.T) {
	ctx := context.Background()
	db, s := startedWriter(t)
	var rows []store.Entry
	for i := range 100 {
		rows = append(rows, storetest.Input("p", int64(i+1))...)
	}
	data := []byte(copyHeader)
	for i := range rows {
		payload, err := store.PayloadText(s.meta.Format, rows[i].Payload)
		if err != nil {
			t.Fatal(err)
		}
		data = copyRow(data, s.key, s.lastID+int64(i)+1, &rows[i], payload)
	}
	msg, err := (&pgproto3.Query{String: appendSQL(s.key, s.gen, len(rows), true)}).Encode(nil)
	if err == nil {
		msg, err = (&pgproto3.CopyData{Data: data[:len(data)/2]}).Encode(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	conn := s.wconn.PgConn().Conn()
	if _, err := conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	// The server answers the lease check and starts the COPY (its
	// CopyInResponse): the batch's transaction is open, its count made.
	for {
		var h [5]byte
		if _, err := io.ReadFull(conn, h[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(h[1:])-4)
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Fatal(err)
		}
		if h[0] == 'E' {
			t.Fatalf("the server refused the Append: %q", body)
		}
		if h[0] == 'G' {
			break
		}
	}
	conn.Close() // the writer dies in the middle of the COPY
	c, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// The dead writer's session holds the run's lock until it has ended:
	// taking the lock waits for it.
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('blackbox run ' || $1, 0))`, "r"); err != nil {
		t.Fatal(err)
	}
	var n, nrows int64
	if err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM blackbox_rows WHERE run = $1), (SELECT nrows FROM blackbox_runs WHERE run = $1)`, s.key).Scan(&n, &nrows); err != nil {
		t.Fatal(err)
	}
	if n != 2 || nrows != 2 {
		t.Errorf("the run holds %d rows and counts %d, want the 2 appended before", n, nrows)
	}
}

// TestTheLeaseStatementIsPlannedOnce: a writer's Appends execute its
// prepared lease statement (leaseSQL), which the server plans once for
// them all (a generic plan), not a statement parsed and planned again in
// each Append's message.
func TestTheLeaseStatementIsPlannedOnce(t *testing.T) {
	ctx := context.Background()
	_, s := startedWriter(t)
	const appends = 20
	for i := range appends {
		if err := s.Append(storetest.Input("p", int64(i+1))...); err != nil {
			t.Fatal(err)
		}
	}
	var generic, custom int64
	err := s.wconn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1`, leaseStmt).Scan(&generic, &custom)
	if err != nil {
		t.Fatalf("the writer's lease statement: %v", err)
	}
	if got, want := generic+custom, int64(appends+1); got != want {
		t.Errorf("the lease statement ran %d times, want %d (one an Append)", got, want)
	}
	if custom > 5 {
		t.Errorf("the lease statement was planned %d times (%d generic plans), want a generic plan after at most 5", custom, generic)
	}
}

// TestABatchOfManyCopyDataMessagesReadsBackWhole: an Append whose COPY
// data is larger than a CopyData message (copyChunk) sends it in several,
// and the recording reads back every row of the batch, in order.
func TestABatchOfManyCopyDataMessagesReadsBackWhole(t *testing.T) {
	u, err := WithRun(pgtest.Database(t), "r")
	if err != nil {
		t.Fatal(err)
	}
	s, err := create(u)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Entry{store.EncodeMeta(store.Meta{Created: storetest.T0, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart}}
	if err := s.Append(want...); err != nil {
		t.Fatal(err)
	}
	var batch []store.Entry
	for i := range 3000 {
		batch = append(batch, storetest.Input("p", int64(i+1))...)
	}
	if err := s.Append(batch...); err != nil {
		t.Fatal(err)
	}
	if len(s.buf) < 3*copyChunk {
		t.Fatalf("the batch's messages are %d bytes, want several CopyData messages of %d", len(s.buf), copyChunk)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want = append(want, batch...)
	r, err := Open(u)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, errs := storetest.ReadAll(r)
	if len(errs) > 0 {
		t.Fatalf("reading the recording: %v", errs)
	}
	if diff := cmp.Diff(storetest.Normalized(want), got); diff != "" {
		t.Errorf("rows read back (-appended +read):\n%s", diff)
	}
}

// TestAnAppendWithoutTheLeaseStatementChecksTheLeaseItself: a connection
// that does not hold the prepared lease check (a pooler in transaction
// mode hands the Append another server connection; here it is
// deallocated) refuses the EXECUTE before the COPY, and the Append is sent
// again with the lease check itself: the rows are appended once, counted
// once, and a lost lease is still ErrLeaseLost.
func TestAnAppendWithoutTheLeaseStatementChecksTheLeaseItself(t *testing.T) {
	ctx := context.Background()
	db, s := startedWriter(t)
	if _, err := s.wconn.Exec(ctx, "DEALLOCATE "+leaseStmt); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Append(storetest.Input("p", int64(i+1))...); err != nil {
			t.Fatalf("Append %d without the lease statement: %v", i+1, err)
		}
	}
	c, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n, nrows int64
	if err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM blackbox_rows WHERE run = $1), (SELECT nrows FROM blackbox_runs WHERE run = $1)`, s.key).Scan(&n, &nrows); err != nil {
		t.Fatal(err)
	}
	if want := int64(2 + 2*len(storetest.Input("p", 1))); n != want || nrows != want {
		t.Errorf("the run holds %d rows and counts %d, want %d", n, nrows, want)
	}
	if _, err := c.Exec(ctx, `UPDATE blackbox_runs SET generation = generation + 1 WHERE run = $1`, s.key); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(storetest.Input("p", 3)...); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Append after the run was taken over: %v, want ErrLeaseLost", err)
	}
}

// startedWriter is the writer of run "r" of a new database (its URL
// returned) that appended the recording's META row and the START row of
// stream p; it is closed when the test ends.
func startedWriter(t *testing.T) (string, *database) {
	t.Helper()
	db := pgtest.Database(t)
	u, err := WithRun(db, "r")
	if err != nil {
		t.Fatal(err)
	}
	s, err := create(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Append(store.EncodeMeta(store.Meta{Created: storetest.T0, Streams: []string{"p"}}),
		store.Entry{Processor: "p", Index: 1, Kind: store.KindStart}); err != nil {
		t.Fatal(err)
	}
	return db, s
}

// TestTheRunsOwnRowsAreReadThroughTheirIndex: the query of the run's own
// rows (Stream("")) names the partial index's predicate, so that even its
// generic plan (a prepared statement's, whatever the parameters) may read
// them through blackbox_rows_run rather than scan the run; a processor's
// stream is read through the primary key (schema version 2 has no stream
// index). Sequential scans are turned off: the table is tiny.
func TestTheRunsOwnRowsAreReadThroughTheirIndex(t *testing.T) {
	ctx := context.Background()
	db, s := startedWriter(t)
	c, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range []string{`SET enable_seqscan = off`, `SET plan_cache_mode = force_generic_plan`,
		`PREPARE own AS ` + ownSQL, `PREPARE stream AS ` + streamSQL} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, tc := range []struct{ explain, index string }{
		{fmt.Sprintf(`EXPLAIN EXECUTE own(%d, 100)`, s.key), "blackbox_rows_run"},
		{fmt.Sprintf(`EXPLAIN EXECUTE stream(%d, 'p', 100)`, s.key), "blackbox_rows_pkey"},
	} {
		var plan []string
		rows, err := c.Query(ctx, tc.explain)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(plan, "\n"), tc.index) {
			t.Errorf("%s: the plan does not use %s:\n%s", tc.explain, tc.index, strings.Join(plan, "\n"))
		}
	}
}
