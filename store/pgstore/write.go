package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// Append writes rows in one statement (appendSQL), so in one transaction,
// all or none of them: every row is checked first (store.ValidateIn,
// store.CheckRowSize, and checkText: the processor and source names are
// text columns, which hold no NUL and only UTF-8). The statement counts
// the rows into the run's blackbox_runs row where the generation is the
// one this writer took (the lease: no row matches once another writer took
// the run over or it was pruned, and the Append fails with ErrLeaseLost)
// and inserts them, ids following the last. A transaction that fails leaves the
// writer unable to append (its error, every time after): whether a failed
// COMMIT committed is unknown, and a recording does not guess.
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
	var b batch
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
		b.add(s.lastID+int64(i)+1, e, payload)
	}
	if err := s.insert(context.Background(), rows, &b); err != nil {
		s.lost = err
		return s.fileErr("append", err)
	}
	if s.lastID == 0 {
		s.meta = meta
	}
	s.lastID += int64(len(rows))
	return nil
}

// appendSQL appends rows in one statement, so in one transaction of its
// own and one round trip: it counts the rows into the run's lease row
// where the generation is the writer's and inserts them, one per element of
// the column arrays, only for a lease row it updated (none once the lease
// is lost: the statement then changes nothing).
const appendSQL = `WITH lease AS (
	UPDATE blackbox_runs SET nrows = nrows + cardinality($3::bigint[]) WHERE run = $1 AND generation = $2 RETURNING run
)
INSERT INTO blackbox_rows (run, id, processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads)
SELECT lease.run, r.* FROM lease, unnest($3::bigint[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::bigint[],
	$9::text[], $10::bigint[], $11::bytea[], $12::bigint[], $13::bigint[], $14::text[], $15::bytea[], $16::text[]) AS r`

// batch is the column arrays of appendSQL.
type batch struct {
	id, idx, seq, epoch, offset, n                   []int64
	processor, kind, source, instant, payload, reads []string
	key, detail                                      [][]byte
}

func (b *batch) add(id int64, e *store.Entry, payload string) {
	b.id = append(b.id, id)
	b.processor = append(b.processor, e.Processor)
	b.idx = append(b.idx, e.Index)
	b.kind = append(b.kind, string(e.Kind))
	b.source = append(b.source, e.Source)
	b.seq = append(b.seq, e.Seq)
	b.instant = append(b.instant, store.FormatInstant(e.Instant))
	b.epoch = append(b.epoch, e.Epoch)
	b.key = append(b.key, []byte(e.Key))
	b.offset = append(b.offset, e.Offset)
	b.n = append(b.n, e.N)
	b.payload = append(b.payload, payload)
	b.detail = append(b.detail, []byte(e.Detail))
	b.reads = append(b.reads, store.FormatReads(e.Reads))
}

// insert writes the batch (rows' columns) with appendSQL.
func (s *database) insert(ctx context.Context, rows []store.Entry, b *batch) error {
	if killpoint.Armed(killpoint.StoreWrite) { // tests only: dormant unless armed
		killpoint.ReachAt(killpoint.StoreWrite, store.LastSeq(rows))
	}
	tag, err := s.wconn.Exec(ctx, appendSQL, s.key, s.gen, b.id, b.processor, b.idx, b.kind, b.source, b.seq,
		b.instant, b.epoch, b.key, b.offset, b.n, b.payload, b.detail, b.reads)
	switch {
	case err != nil:
		return err
	case tag.RowsAffected() == 0:
		return fmt.Errorf("%w: run %q is not at generation %d any more", ErrLeaseLost, s.loc.Run, s.gen)
	case tag.RowsAffected() != int64(len(rows)):
		return fmt.Errorf("inserted %d rows of %d", tag.RowsAffected(), len(rows))
	}
	return nil
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
