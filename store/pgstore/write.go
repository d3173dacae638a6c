package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// Append writes rows in one transaction, all or none of them: every row
// is checked first (store.ValidateIn, store.CheckRowSize, and checkText:
// the processor and source names are text columns, which hold no NUL and
// only UTF-8) and encoded into a binary COPY (copyRow); then one query
// message (appendSQL) counts the rows into the run's blackbox_runs row
// where the generation is the one this writer took (the lease: no row
// matches once another writer took the run over or it was pruned, and the
// Append fails with ErrLeaseLost) and copies them, ids following the last.
// A transaction that fails leaves the writer unable to append (its error,
// every time after): whether a failed commit committed is unknown, and a
// recording does not guess.
func (s *database) Append(rows ...store.Entry) error {
	if s.readOnly {
		return s.fileErr("append", store.ErrReadOnly)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	switch {
	case s.closed:
		return s.fileErr("append", store.ErrClosed)
	case s.lost != nil:
		return s.fileErr("append", s.lost)
	case len(rows) == 0:
		return nil
	}
	meta := s.meta
	if s.lastID == 0 && rows[0].Kind == store.KindMeta {
		meta, _ = store.DecodeMeta(rows[0])
	}
	data := append(s.data[:0], copyHeader...)
	for i := range rows {
		e := &rows[i]
		err := store.ValidateIn(meta.Format, *e)
		if err == nil {
			err = store.CheckRowSize(e, meta.Format)
		}
		if err == nil {
			err = checkText("processor", e.Processor)
		}
		if err == nil {
			err = checkText("source", e.Source)
		}
		var payload string
		if err == nil {
			payload, err = store.PayloadText(meta.Format, e.Payload)
		}
		if err != nil {
			return s.fileErr("append", err)
		}
		data = copyRow(data, s.key, s.lastID+int64(i)+1, e, payload)
	}
	data = binary.BigEndian.AppendUint16(data, copyTrailer)
	msgs, err := appendMessages(s.buf[:0], appendSQL(s.key, s.gen, len(rows), !s.unprepared), data)
	if err == nil {
		err = s.insert(context.Background(), rows, msgs)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == noStatementCode && !s.unprepared {
		s.unprepared = true
		msgs, err = appendMessages(msgs[:0], appendSQL(s.key, s.gen, len(rows), false), data)
		if err == nil {
			err = s.insert(context.Background(), rows, msgs)
		}
	}
	if cap(data) <= maxKeptBuf {
		s.data = data
	}
	if cap(msgs) <= maxKeptBuf {
		s.buf = msgs
	}
	if err != nil {
		s.lost = err
		return s.fileErr("append", err)
	}
	if s.lastID == 0 {
		s.meta = meta
	}
	s.lastID += int64(len(rows))
	return nil
}

// maxKeptBuf bounds each buffer (COPY data, messages) a writer keeps for
// its next Append.
const maxKeptBuf = 4 << 20

// appendSQL is the query message of an Append of n rows by the writer of
// run key at generation gen: one simple query of two statements, which
// PostgreSQL runs as one transaction of its own (the implicit transaction
// of a query message), in one round trip. The first is the lease check
// (leaseCheck): it counts n rows into the run's lease row where the
// generation is the writer's and divides 1 by the number of rows it
// updated: 0 once the lease is lost, which PostgreSQL refuses (SQLSTATE
// 22012, division_by_zero: leaseLostCode), aborting the transaction before
// the COPY runs. Otherwise the lease row stays locked until the commit (a
// writer taking the run over waits for it), and the COPY inserts the rows
// from the binary COPY data that follows the message (copyRow). Any error
// aborts the transaction: nothing of the batch is committed, the count
// included. No schema object is needed: a database of schema version 1
// takes it as it is.
//
// With prepared, the lease check executes the statement prepared on the
// writer's connection (prepareLease), else it is the statement itself.
func appendSQL(key, gen int64, n int, prepared bool) string {
	args := strconv.Itoa(n) + ", " + strconv.FormatInt(key, 10) + ", " + strconv.FormatInt(gen, 10)
	check := "EXECUTE " + leaseStmt + "(" + args + ")"
	if !prepared {
		check = strings.NewReplacer("$1", strconv.Itoa(n), "$2", strconv.FormatInt(key, 10), "$3", strconv.FormatInt(gen, 10)).Replace(leaseCheck)
	}
	return check + "; " +
		`COPY blackbox_rows (run, id, processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads) FROM STDIN (FORMAT binary)`
}

// leaseCheck is the lease check of appendSQL: $1 rows counted into the
// lease row of run $2 at generation $3.
const leaseCheck = "WITH lease AS (UPDATE blackbox_runs SET nrows = nrows + $1 WHERE run = $2 AND generation = $3 RETURNING 1) SELECT 1 / count(*) FROM lease"

// leaseStmt names the lease check prepared on a writer's connection
// (prepareLease). Its text is the same for every writer (the run and the
// generation are parameters), so that a statement of that name prepared on
// a server connection that a pooler shares between clients is the lease
// check all the same.
const leaseStmt = "blackbox_lease"

// prepareLease prepares the lease check (leaseCheck) as leaseStmt.
// Prepared, it is parsed and planned once (a generic plan): as a statement
// of each Append's message, its parse and plan (a data-modifying WITH)
// took a tenth of the server's time for a batch of 128 rows.
const prepareLease = "PREPARE " + leaseStmt + " (bigint, bigint, bigint) AS " + leaseCheck

// noStatementCode is the SQLSTATE of an EXECUTE of a statement the
// session has not prepared (invalid_sql_statement_name): the Append's
// connection is not the one that prepared it (a pooler in transaction
// mode), or the statement was deallocated. The transaction aborts before
// its COPY runs, so the Append is sent again with the lease check itself.
const noStatementCode = "26000"

// leaseLostCode is the SQLSTATE of appendSQL's first statement when it
// updated no lease row (division_by_zero: it divides by that number). Its
// COPY raises no such error.
const leaseLostCode = "22012"

// The binary COPY format: a header (signature, flags, no extension), a
// tuple per row (its field count, then each field's length and bytes, in
// the types' binary forms: a bigint 8 bytes big-endian, text and bytea
// their bytes), and a trailer (a field count of -1).
const (
	copyHeader  = "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"
	copyTrailer = 0xffff
	copyFields  = 15
)

// copyRow appends the COPY tuple of row e with run key and id, its payload
// text payload, in the columns of appendSQL.
func copyRow(b []byte, key, id int64, e *store.Entry, payload string) []byte {
	b = binary.BigEndian.AppendUint16(b, copyFields)
	b = copyInt(b, key)
	b = copyInt(b, id)
	b = copyText(b, e.Processor)
	b = copyInt(b, e.Index)
	b = copyText(b, string(e.Kind))
	b = copyText(b, e.Source)
	b = copyInt(b, e.Seq)
	b = copyText(b, store.FormatInstant(e.Instant))
	b = copyInt(b, e.Epoch)
	b = copyText(b, e.Key)
	b = copyInt(b, e.Offset)
	b = copyInt(b, e.N)
	b = copyText(b, payload)
	b = copyText(b, e.Detail)
	return copyText(b, store.FormatReads(e.Reads))
}

func copyInt(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

func copyText(b []byte, v string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// copyChunk is the size past which an Append's COPY data goes on in a new
// CopyData message (as pgconn's CopyFrom sends 64 KiB ones): a message
// stays far below the server's limit (1 GB) whatever the batch.
const copyChunk = 64 << 10

// appendMessages appends to b the frontend messages of an Append
// (pgproto3's encoding): the Query message of sql, the COPY data in
// CopyData messages of at most copyChunk bytes, a CopyDone.
func appendMessages(b []byte, sql string, data []byte) ([]byte, error) {
	b, err := (&pgproto3.Query{String: sql}).Encode(b)
	for err == nil && len(data) > 0 {
		n := min(len(data), copyChunk)
		b, err = (&pgproto3.CopyData{Data: data[:n]}).Encode(b)
		data = data[n:]
	}
	if err == nil {
		b, err = (&pgproto3.CopyDone{}).Encode(b)
	}
	return b, err
}

// insert sends an Append's messages (msgs: the query message of appendSQL
// for rows, their COPY data and a CopyDone) in one write and reads the
// server's answers until it is ready for the next query: the batch's
// transaction committed or not. The server answers the lease check, the
// start of the COPY and its end (a few hundred bytes at most, an error
// included) while it reads the rest, so the one write cannot wait on a
// server waiting to be read. A failed lease check or COPY aborts the
// transaction; the server ignores the COPY data and CopyDone that follow
// an error. Where the message was cut short (the writer killed, the
// connection lost), the server aborts the transaction, the COPY
// unfinished.
func (s *database) insert(ctx context.Context, rows []store.Entry, msgs []byte) error {
	if killpoint.Armed(killpoint.StoreWrite) { // tests only: dormant unless armed
		killpoint.ReachAt(killpoint.StoreWrite, store.LastSeq(rows))
	}
	pc := s.wconn.PgConn()
	if _, err := pc.Conn().Write(msgs); err != nil {
		s.closeBroken(pc)
		return err
	}
	var (
		pgErr  error
		copied int64 = -1
	)
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			s.closeBroken(pc)
			return err
		}
		switch msg := msg.(type) {
		case *pgproto3.ErrorResponse:
			if pgErr == nil {
				pgErr = pgconn.ErrorResponseToPgError(msg)
			}
		case *pgproto3.CommandComplete:
			if tag := pgconn.NewCommandTag(string(msg.CommandTag)); strings.HasPrefix(tag.String(), "COPY ") {
				copied = tag.RowsAffected()
			}
		case *pgproto3.ReadyForQuery:
			var pe *pgconn.PgError
			switch {
			case errors.As(pgErr, &pe) && pe.Code == leaseLostCode:
				return fmt.Errorf("%w: run %q is not at generation %d any more", ErrLeaseLost, s.loc.Run, s.gen)
			case pgErr != nil:
				return pgErr
			case copied != int64(len(rows)):
				return fmt.Errorf("inserted %d rows of %d", copied, len(rows))
			}
			return nil
		}
	}
}

// closeBroken closes the writer's connection after a failed write or read
// of an Append (the server aborts the batch's transaction when the
// connection ends), unless pgconn closed it already.
func (s *database) closeBroken(pc *pgconn.PgConn) {
	if pc.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pc.Close(ctx)
}

// Sync is a no-op: a committed Append is durable as the server makes
// commits durable (synchronous_commit, on by default: the commit waits for
// the server's WAL flush).
func (s *database) Sync() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed && !s.readOnly {
		return s.fileErr("sync", store.ErrClosed)
	}
	return nil
}

// Close closes the connections; a writer's first marks its run ended
// (when it still holds the lease) and releases the run's lock (before it
// closes: `blackbox runs` and Prune right after see the run free). Reads after
// Close return store.ErrClosed.
func (s *database) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.wconn != nil && !s.wconn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if s.lost == nil && s.gen > 0 {
			_, err := s.wconn.Exec(ctx, `UPDATE blackbox_runs SET ended = now() WHERE run = $1 AND generation = $2`, s.key, s.gen)
			errs = append(errs, err)
		}
		if s.gen > 0 {
			var unlocked bool
			errs = append(errs, s.wconn.QueryRow(ctx, runUnlockSQL, s.loc.Run).Scan(&unlocked))
		}
		errs = append(errs, s.wconn.Close(ctx))
	}
	if s.pool != nil {
		releasePool(s.loc.Conn, s.pool)
	}
	if err := errors.Join(errs...); err != nil {
		return s.fileErr("close", err)
	}
	return nil
}
