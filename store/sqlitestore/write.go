package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"strings"

	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// first writes the first rows (their payload texts in payloads) into a
// new database of their own, store.StartPath, in one transaction that
// creates the schema too, folds its write-ahead log into it, and renames it
// over the recording's file (store.PlaceStart), which it then opens, writes
// and holds locked (s.wmu held). It returns the id of the last row.
func (s *database) first(rows []store.Entry, payloads []string) (int64, error) {
	ctx := context.Background()
	tmp := store.StartPath(s.target)
	if err := removeDB(tmp); err != nil {
		return 0, err
	}
	lock, err := store.Lock(tmp, 0o644)
	if err != nil {
		return 0, err
	}
	last, err := build(ctx, tmp, rows, payloads)
	if err == nil {
		err = removeDB(s.target, "-wal", "-shm", "-journal") // the file replaced's: never this database's
	}
	if err == nil {
		err = store.PlaceStart(tmp, s.target)
	}
	if err != nil {
		lock.Unlock()
		removeDB(tmp)
		return 0, err
	}
	old := s.lock
	s.lock = lock
	old.Unlock()
	db, err := openDB(s.target, false)
	if err == nil {
		s.db = db
		s.wconn, err = db.Conn(ctx)
	}
	if err == nil {
		s.insert = &inserter{conn: s.wconn}
	}
	if err != nil {
		// The rows are in place; the recording cannot grow.
		return last, fmt.Errorf("opening it after its first rows: %w", err)
	}
	return last, nil
}

// build creates the database at path (empty) with the schema and rows, in
// one transaction, and closes it with its write-ahead log folded into it:
// one self-contained file in WAL mode.
func build(ctx context.Context, path string, rows []store.Entry, payloads []string) (last int64, err error) {
	db, err := openDB(path, false)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if last, err = insertRows(ctx, conn, nil, true, rows, payloads); err != nil {
		return 0, err
	}
	var busy, logFrames, done int
	if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil {
		return 0, err
	}
	if busy != 0 {
		return 0, fmt.Errorf("folding the write-ahead log of %s: busy", path)
	}
	return last, nil
}

// insertRows inserts rows (their payload texts in payloads) with in (nil:
// one for the call) in one transaction on conn (BEGIN IMMEDIATE ...
// COMMIT), after the schema when schema is set. On an error it rolls back.
// It returns the id of the last row.
func insertRows(ctx context.Context, conn *sql.Conn, in *inserter, schema bool, rows []store.Entry, payloads []string) (int64, error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, err
	}
	fail := func(err error) (int64, error) {
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		return 0, err
	}
	if schema {
		if _, err := conn.ExecContext(ctx, Schema); err != nil {
			return fail(err)
		}
	}
	if in == nil {
		in = &inserter{conn: conn}
		defer in.close()
	}
	last, err := in.insert(ctx, rows, payloads)
	if err != nil {
		return fail(err)
	}
	if killpoint.Armed(killpoint.StoreWrite) { // tests only: dormant unless armed
		killpoint.ReachAt(killpoint.StoreWrite, store.LastSeq(rows))
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fail(err)
	}
	return last, nil
}

// chunkRows is the most rows one INSERT statement of an inserter holds.
// One statement for many rows pays SQLite's and the driver's cost of a
// statement (step, reset, clearing the bindings, database/sql's) once for
// them; a statement much longer than that buys nothing more and takes
// longer to prepare.
const (
	chunkRows = 1 << chunkLog
	chunkLog  = 6
)

// inserter inserts rows on one connection with multi-row INSERT statements
// (insertSQLFor), each prepared on its first use and kept until close: one
// for each power of two up to chunkRows rows, so that any number of rows
// is inserted by as many chunkRows-row statements as it holds and at most
// one statement of each smaller power of two. Not safe for concurrent use.
type inserter struct {
	conn  *sql.Conn
	stmts [chunkLog + 1]*sql.Stmt // stmts[k] inserts 1<<k rows
	args  []any
}

// insertSQLFor is an INSERT of n rows: insertHead and n insertValues.
func insertSQLFor(n int) string {
	var b strings.Builder
	b.WriteString(insertHead)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(insertValues)
	}
	return b.String()
}

// insert inserts rows, their payload texts in payloads, in the
// connection's transaction, in storage order, and returns the id of the
// last one.
func (in *inserter) insert(ctx context.Context, rows []store.Entry, payloads []string) (last int64, err error) {
	defer clear(in.args) // no row's strings kept past the call
	for len(rows) > 0 {
		k := bits.Len(uint(min(len(rows), chunkRows))) - 1
		n := 1 << k
		st := in.stmts[k]
		if st == nil {
			if st, err = in.conn.PrepareContext(ctx, insertSQLFor(n)); err != nil {
				return 0, err
			}
			in.stmts[k] = st
		}
		args := in.args[:0]
		for i := range n {
			e := &rows[i]
			args = append(args, e.Processor, e.Index, string(e.Kind), e.Source, e.Seq,
				store.FormatInstant(e.Instant), e.Epoch, e.Key, e.Offset, e.N, payloads[i], e.Detail,
				store.FormatReads(e.Reads))
		}
		in.args = args
		res, err := st.ExecContext(ctx, args...)
		if err == nil && n == len(rows) {
			last, err = res.LastInsertId()
		}
		if err != nil {
			return 0, err
		}
		rows, payloads = rows[n:], payloads[n:]
	}
	return last, nil
}

// close closes the inserter's statements.
func (in *inserter) close() error {
	var errs []error
	for i, st := range in.stmts {
		if st != nil {
			errs = append(errs, st.Close())
			in.stmts[i] = nil
		}
	}
	return errors.Join(errs...)
}

// removeDB removes a database file and the files SQLite keeps beside it
// (with suffixes, only those): a missing file is not an error.
func removeDB(path string, suffixes ...string) error {
	if len(suffixes) == 0 {
		suffixes = []string{"", "-wal", "-shm", "-journal"}
	}
	for _, sfx := range suffixes {
		if err := os.Remove(path + sfx); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Append inserts rows in one transaction with multi-row INSERTs, all or
// none of them: every row is checked first (store.Validate,
// store.CheckRowSize: a row whose CSV line would be longer than
// store.MaxRowSize is refused with a *store.SizeError, so that every SQLite
// recording converts to CSV). Payloads are written in the format of the
// recording's META row (store.PayloadText).
//
// The first Append creates the schema and inserts its rows in one
// transaction, in a database of its own (store.StartPath), which it renames
// over the recording's file (store.PlaceStart) and then holds locked: the
// recording appears whole or not at all (a process killed in its first
// Append leaves the file as Create found it, empty, and at worst that
// temporary database, which no command takes for a recording and the next
// writer replaces). A first Append that fails leaves the file as it was,
// and the next tries again.
func (s *database) Append(rows ...store.Entry) error {
	if s.readOnly {
		return &store.FileError{Op: "sqlitestore: append", Path: s.path, Err: store.ErrReadOnly}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return &store.FileError{Op: "sqlitestore: append", Path: s.path, Err: store.ErrClosed}
	}
	if len(rows) == 0 {
		return nil
	}
	meta := s.meta
	if s.nrows == 0 && rows[0].Kind == store.KindMeta {
		meta, _ = store.DecodeMeta(rows[0])
	}
	payloads := make([]string, len(rows))
	for i := range rows {
		e := &rows[i]
		err := store.ValidateIn(meta.Format, *e)
		if err == nil {
			err = store.CheckRowSize(e, meta.Format)
		}
		if err == nil {
			payloads[i], err = store.PayloadText(meta.Format, e.Payload)
		}
		if err != nil {
			return &store.FileError{Op: "sqlitestore: append", Path: s.path, Err: err}
		}
	}
	if s.nrows == 0 && s.db == nil {
		last, err := s.first(rows, payloads)
		if last > 0 {
			s.meta, s.nrows, s.lastID = meta, int64(len(rows)), last
		}
		if err != nil {
			return &store.FileError{Op: "sqlitestore: append", Path: s.path, Err: err}
		}
		return nil
	}
	if s.insert == nil {
		return &store.FileError{Op: "sqlitestore: append", Path: s.path, Err: errors.New("the recording could not be opened after its first rows")}
	}
	last, err := insertRows(context.Background(), s.wconn, s.insert, false, rows, payloads)
	if err != nil {
		return &store.FileError{Op: "sqlitestore: append", Path: s.path, Err: err}
	}
	if s.nrows == 0 {
		s.meta = meta
	}
	s.nrows += int64(len(rows))
	s.lastID = last
	return nil
}

// Sync makes every committed Append durable against a power loss: it
// fsyncs the write-ahead log, the database file and their directory. (A
// checkpoint would not do: one blocked by a reader leaves recent frames
// unsynced.) It is a no-op on a Store from Open.
func (s *database) Sync() error {
	if s.readOnly {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return &store.FileError{Op: "sqlitestore: sync", Path: s.path, Err: store.ErrClosed}
	}
	for _, name := range []string{s.target + "-wal", s.target, filepath.Dir(s.target)} {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return &store.FileError{Op: "sqlitestore: sync", Path: s.path, Err: err}
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return &store.FileError{Op: "sqlitestore: sync", Path: s.path, Err: err}
		}
	}
	return nil
}

// Close closes the database. Reads after Close return store.ErrClosed.
func (s *database) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.insert != nil {
		errs = append(errs, s.insert.close())
	}
	if s.wconn != nil {
		leaveWAL(s.wconn)
		errs = append(errs, s.wconn.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if s.recovered != "" {
		errs = append(errs, os.RemoveAll(s.recovered))
	}
	errs = append(errs, s.lock.Unlock())
	if err := errors.Join(errs...); err != nil {
		return &store.FileError{Op: "sqlitestore: close", Path: s.path, Err: err}
	}
	return nil
}

// leaveWAL makes a finished recording one self-contained file: it folds
// the write-ahead log into the database and switches it to the rollback
// journal, so that SQLite removes the -wal and -shm files and read-only
// opens create none beside the recording. Every row is committed already,
// so this changes where they are kept, not what is kept. SQLite refuses the
// switch while another connection has the database open (a reader of the
// recording in progress): the recording is then left in WAL mode, which
// readers handle as well, rather than wait for that reader.
func leaveWAL(c *sql.Conn) {
	ctx := context.Background()
	if _, err := c.ExecContext(ctx, `PRAGMA busy_timeout=0`); err != nil {
		return
	}
	var mode string
	_ = c.QueryRowContext(ctx, `PRAGMA journal_mode=DELETE`).Scan(&mode)
}
