package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/blackbox-audit/blackbox/store"
)

// limit returns the largest id readers read: 0 for a writer before its
// first Append (no row).
func (s *database) limit() (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, s.fileErr("read", store.ErrClosed)
	}
	if s.readOnly {
		return s.roMax, nil
	}
	return s.lastID, nil
}

// format is the format of the recording's rows.
func (s *database) format() string {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.readOnly {
		return s.roMeta.Format
	}
	return s.meta.Format
}

// Scan yields the run's rows in id order, streaming from one query: a row
// whose columns do not hold a row with its malformed *store.Problem
// (store.Backend). The database checks its pages itself; there is no file
// check to add at the end of a ScanWhole pass.
func (s *database) Scan(store.ScanMode) iter.Seq2[*store.Row, error] {
	return s.limited(func(maxID int64) iter.Seq2[*store.Row, error] {
		return s.query(context.Background(), rowsSQL, s.key, maxID)
	})
}

// Stream yields the rows of one processor in id order (store.StreamSeeker):
// the run's rows through the primary key (run, id), filtered by processor
// (schema version 2 has no index of streams); the run's own rows
// (processor "") through their partial index, blackbox_rows_run.
func (s *database) Stream(processor string) iter.Seq2[*store.Row, error] {
	return s.limited(func(maxID int64) iter.Seq2[*store.Row, error] {
		return func(yield func(*store.Row, error) bool) {
			var rows iter.Seq2[*store.Row, error]
			if processor == "" {
				rows = s.query(context.Background(), ownSQL, s.key, maxID)
			} else {
				rows = s.query(context.Background(), streamSQL, s.key, processor, maxID)
			}
			for row, err := range rows {
				if row != nil && row.Problem != nil {
					row.Entry.Processor = processor
				}
				if !yield(row, err) {
					return
				}
			}
		}
	})
}

// Journal returns the first JOURNAL row of (feed, seq), found through the
// partial (run, source, seq) index of JOURNAL rows, or an error
// wrapping store.ErrMissingJournal.
func (s *database) Journal(feed string, seq int64) (store.Entry, error) {
	maxID, err := s.limit()
	if err != nil {
		return store.Entry{}, err
	}
	for row, err := range s.query(context.Background(), journalSQL, s.key, feed, seq, maxID) {
		if err != nil {
			return store.Entry{}, err
		}
		if row.Problem != nil {
			break
		}
		return row.Entry, nil
	}
	return store.Entry{}, s.fileErr("journal", fmt.Errorf("%w: feed %q seq %d", store.ErrMissingJournal, feed, seq))
}

// limited is the sequence read yields given the largest id to read: it
// yields limit's error, and nothing before a writer's first row.
func (s *database) limited(read func(maxID int64) iter.Seq2[*store.Row, error]) iter.Seq2[*store.Row, error] {
	return func(yield func(*store.Row, error) bool) {
		maxID, err := s.limit()
		if err != nil {
			yield(nil, err)
			return
		}
		if maxID == 0 {
			return
		}
		for row, err := range read(maxID) {
			if !yield(row, err) {
				return
			}
		}
	}
}

// query yields the rows of a query as Scan yields them, streaming (pgx
// reads the rows as the server sends them).
func (s *database) query(ctx context.Context, q string, args ...any) iter.Seq2[*store.Row, error] {
	return func(yield func(*store.Row, error) bool) {
		fail := func(err error) { yield(nil, s.fileErr("read", err)) }
		rs, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			fail(err)
			return
		}
		defer rs.Close()
		sc := scanner{format: s.format(), path: s.path}
		var row store.Row
		first := true
		for rs.Next() {
			if row, err = sc.row(rs); err != nil {
				fail(err)
				return
			}
			if first && row.Problem == nil && row.Entry.Kind == store.KindMeta {
				if m, err := store.DecodeMeta(row.Entry); err == nil {
					sc.format = m.Format
				}
			}
			first = false
			if !yield(&row, nil) {
				return
			}
		}
		if err := rs.Err(); err != nil {
			fail(err)
		}
	}
}

// scanner decodes result rows. Not safe for concurrent use.
type scanner struct {
	format string // the recording's format, for payloads
	path   string
	raw    rawRow
}

// rawRow is a result row as the columns hold it.
type rawRow struct {
	id, idx, seq, epoch, offset, n            int64
	processor, kind, source, instant, payload string
	reads                                     string
	key, detail                               []byte
}

// row decodes the current row: its Entry, or the malformed Problem of a
// row whose columns do not hold what the format says (text edited with
// SQL). err is a read error.
func (sc *scanner) row(rs pgx.Rows) (store.Row, error) {
	r := &sc.raw
	if err := rs.Scan(&r.id, &r.processor, &r.idx, &r.kind, &r.source, &r.seq, &r.instant, &r.epoch,
		&r.key, &r.offset, &r.n, &r.payload, &r.detail, &r.reads); err != nil {
		return store.Row{}, err
	}
	e := store.Entry{Processor: r.processor, Index: r.idx, Kind: store.Kind(r.kind), Source: r.source, Seq: r.seq,
		Epoch: r.epoch, Key: string(r.key), Offset: r.offset, N: r.n, Detail: string(r.detail)}
	bad := func(col int, format string, args ...any) (store.Row, error) {
		p := &store.Problem{Kind: store.ProblemMalformed, File: sc.path, Processor: e.Processor, Index: e.Index,
			Row: e.Kind, Line: r.id, Detail: fmt.Sprintf("column %s: ", columns[col]) + fmt.Sprintf(format, args...)}
		if !e.Kind.Valid() {
			p.Row = ""
		}
		return store.Row{Line: r.id, Entry: store.Entry{Processor: e.Processor}, Problem: p}, nil
	}
	if !e.Kind.Valid() {
		return bad(2, "unknown kind %q", r.kind)
	}
	var ok bool
	if e.Instant, ok = store.ParseInstant(r.instant); !ok {
		return bad(5, "%q is not an RFC3339Nano UTC instant", r.instant)
	}
	var err error
	if e.Payload, err = store.PayloadBytes(sc.format, r.payload); err != nil {
		return bad(10, "%v", err)
	}
	if e.Reads, ok = store.ParseReads(r.reads); !ok {
		return bad(12, "%q is not a list of RFC3339Nano UTC instants joined by ';'", r.reads)
	}
	if err := store.Validate(e); err != nil {
		var fe *store.FieldError
		col := 0
		if errors.As(err, &fe) {
			for i, c := range columns {
				if c == fe.Field {
					col = i
				}
			}
		}
		return bad(col, "%v", err)
	}
	return store.Row{Line: r.id, Entry: e}, nil
}

// checkText refuses, as a *store.FieldError wrapping store.ErrName, a name
// a PostgreSQL text column cannot hold: a NUL or invalid UTF-8.
func checkText(field, v string) error {
	if !utf8.ValidString(v) {
		return &store.FieldError{Field: field, Value: v, Err: store.ErrName, Reason: "invalid UTF-8 (a PostgreSQL recording holds names as text)"}
	}
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			return &store.FieldError{Field: field, Value: v, Err: store.ErrName, Reason: "holds a NUL (a PostgreSQL recording holds names as text)"}
		}
	}
	return nil
}
