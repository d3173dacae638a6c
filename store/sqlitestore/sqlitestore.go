package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
)

// Schema is the schema of a recording: the statements the first Append
// runs (in the transaction of its rows), as docs/FORMAT.md gives them. id is
// the row's place in storage order and the Line of its Problems; the other
// columns are the CSV columns (idx is "index", a keyword).
const Schema = `CREATE TABLE IF NOT EXISTS rows (
	id        INTEGER PRIMARY KEY,
	processor TEXT    NOT NULL,
	idx       INTEGER NOT NULL,
	kind      TEXT    NOT NULL,
	source    TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	instant   TEXT    NOT NULL,
	epoch     INTEGER NOT NULL,
	"key"     TEXT    NOT NULL,
	"offset"  INTEGER NOT NULL,
	n         INTEGER NOT NULL,
	payload   TEXT    NOT NULL,
	detail    TEXT    NOT NULL,
	reads     TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS rows_stream ON rows (processor, idx);
CREATE INDEX IF NOT EXISTS rows_journal ON rows (source, seq) WHERE kind = 'JOURNAL';`

const (
	cols      = `id, processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads`
	insertSQL = `INSERT INTO rows (processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	rowsSQL    = `SELECT ` + cols + ` FROM rows WHERE id <= ? ORDER BY id`
	streamSQL  = `SELECT ` + cols + ` FROM rows WHERE processor = ? AND id <= ? ORDER BY id`
	streamsSQL = `SELECT ` + cols + ` FROM rows WHERE processor <> '' AND id <= ? ORDER BY processor, idx, id`
	// In a recording without problems every stream's rows are in index
	// order in rowid order: one scan of the table in rowid order then
	// yields what streamsSQL yields, without a lookup per row.
	streamsCleanSQL = `SELECT ` + cols + ` FROM rows WHERE id <= ? AND processor <> '' ORDER BY id`
	journalSQL      = `SELECT ` + cols + ` FROM rows WHERE kind = 'JOURNAL' AND source = ? AND seq = ? AND processor = '' AND id <= ? ORDER BY id LIMIT 1`
)

// columns names the CSV columns, in the order of cols after id.
var columns = [...]string{"processor", "index", "kind", "source", "seq", "instant", "epoch", "key", "offset", "n", "payload", "detail", "reads"}

var sqliteMagic = []byte("SQLite format 3\x00")

// Store is an SQLite recording: one database file in WAL mode, one table
// of rows.
//
// A Store from Create appends (Append, Sync) and reads what it has
// committed so far; a Store from Open reads the rows committed when it was
// opened (rows with an id up to the largest one then) and refuses Append
// with store.ErrReadOnly.
//
// Store is safe for concurrent use: any number of goroutines may read while
// one goroutine appends; Append calls are serialised. Each iterator is used
// by one goroutine.
type Store struct {
	path     string
	lock     *store.FileLock // Create: the exclusive lock of the file, held until Close
	db       *sql.DB         // Create: nil until the first Append (wmu guards it then)
	target   string          // Create: the file path names (store.Target), which the first Append replaces
	readOnly bool

	wmu    sync.Mutex
	wconn  *sql.Conn
	insert *sql.Stmt
	lastID int64
	meta   store.Meta
	nrows  int64
	closed bool

	// A reader (Open): the rows it reads (id <= roMax) and their META
	// row, read at Open; the checked view is made by the first pass that
	// runs to its end (Streams, Scan) or on demand (Problems, Processors).
	roMax  int64
	roMeta store.Meta

	vmu  sync.Mutex
	view *view
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.Syncer        = (*Store)(nil)
	_ store.Verifier      = (*Store)(nil)
	_ store.StreamsReader = (*Store)(nil)
)

type view struct {
	maxID    int64
	meta     store.Meta
	procs    []string
	problems []store.Problem
}

func dsn(path string, params ...string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: strings.Join(params, "&")}
	return u.String(), nil
}

// openDB opens the database; a writer's in WAL mode with
// synchronous=NORMAL: a commit survives a crash of the process, and Sync
// makes it survive a power loss.
func openDB(path string, readOnly bool) (*sql.DB, error) {
	params := []string{"_busy_timeout=10000"}
	if readOnly {
		params = append(params, "mode=ro")
	} else {
		params = append(params, "_journal_mode=WAL", "_synchronous=NORMAL")
	}
	name, err := dsn(path, params...)
	if err != nil {
		return nil, err
	}
	return sql.Open("sqlite", name)
}

// magic reads the start of the file: nil for an SQLite database, else why
// it is not one.
func magic(path string) (size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() == 0 {
		return 0, nil
	}
	head := make([]byte, len(sqliteMagic))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteMagic) {
		return fi.Size(), errNotSQLite
	}
	return fi.Size(), nil
}

var errNotSQLite = errors.New("not an SQLite database")

// Create creates a new recording at path (a missing file, an empty file or
// an SQLite recording without rows), which the first Append writes whole,
// schema and rows, or not at all (see Append): until then the file is left
// as it was. It takes the file's exclusive lock (store.Lock) first and
// holds it until Close: a file another writer holds is refused at once with
// an error wrapping store.ErrLocked. It refuses, with an error wrapping
// store.ErrHoldsRecording naming the path and without writing to it, a
// file that holds anything else: a recording with rows, another SQLite
// database, other bytes.
func Create(path string) (*Store, error) {
	lock, err := store.Lock(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: create: %w", err)
	}
	if err := refuseExisting(path); err != nil {
		lock.Unlock()
		return nil, err
	}
	return &Store{path: path, lock: lock, target: store.Target(path)}, nil
}

// first writes the first rows (their payload texts in payloads) into a
// new database of their own, store.StartPath, in one transaction that
// creates the schema too, folds its write-ahead log into it, and renames it
// over the recording's file (store.PlaceStart), which it then opens, writes
// and holds locked (s.wmu held). It returns the id of the last row.
func (s *Store) first(rows []store.Entry, payloads []string) (int64, error) {
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
		s.insert, err = s.wconn.PrepareContext(ctx, insertSQL)
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

// insertRows inserts rows (their payload texts in payloads) with insert
// (nil: one prepared for the call) in one transaction on conn (BEGIN
// IMMEDIATE ... COMMIT), after the schema when schema is set. On an error
// it rolls back. It returns the id of the last row.
func insertRows(ctx context.Context, conn *sql.Conn, insert *sql.Stmt, schema bool, rows []store.Entry, payloads []string) (int64, error) {
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
	if insert == nil {
		st, err := conn.PrepareContext(ctx, insertSQL)
		if err != nil {
			return fail(err)
		}
		defer st.Close()
		insert = st
	}
	var last int64
	for i := range rows {
		e := &rows[i]
		res, err := insert.ExecContext(ctx, e.Processor, e.Index, string(e.Kind), e.Source, e.Seq,
			store.FormatInstant(e.Instant), e.Epoch, e.Key, e.Offset, e.N, payloads[i], e.Detail,
			store.FormatReads(e.Reads))
		if err == nil && i == len(rows)-1 {
			last, err = res.LastInsertId()
		}
		if err != nil {
			return fail(err)
		}
	}
	if killpoint.Armed(killpoint.StoreWrite) { // tests only: dormant unless armed
		killpoint.ReachAt(killpoint.StoreWrite, store.LastSeq(rows))
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fail(err)
	}
	return last, nil
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

// refuseExisting returns an error if path holds anything Create must not
// write into.
func refuseExisting(path string) error {
	size, err := magic(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case errors.Is(err, errNotSQLite):
		return &store.FileError{Op: "sqlitestore: create", Path: path, Err: fmt.Errorf("%w: %d bytes that are not an SQLite database", store.ErrHoldsRecording, size)}
	case err != nil:
		return &store.FileError{Op: "sqlitestore: create", Path: path, Err: err}
	case size == 0:
		return nil
	}
	db, err := openDB(path, true)
	if err != nil {
		return &store.FileError{Op: "sqlitestore: create", Path: path, Err: err}
	}
	defer db.Close()
	objects, err := schemaOf(db)
	if err != nil {
		return &store.FileError{Op: "sqlitestore: create", Path: path, Err: err}
	}
	if len(objects) == 0 {
		return nil
	}
	if why := sameSchema(objects); why != "" {
		return &store.FileError{Op: "sqlitestore: create", Path: path, Err: fmt.Errorf("%w: an SQLite database that is not a recording (%s)", store.ErrHoldsRecording, why)}
	}
	var n int64
	if err := db.QueryRow(`SELECT count(*) FROM rows`).Scan(&n); err != nil {
		return &store.FileError{Op: "sqlitestore: create", Path: path, Err: err}
	}
	if n > 0 {
		return &store.FileError{Op: "sqlitestore: create", Path: path, Err: fmt.Errorf("%w (%d rows)", store.ErrHoldsRecording, n)}
	}
	return nil
}

// Open opens the recording at path for reading, without creating or
// changing it. It reads only the META row: the recording is checked once,
// in rowid order, with the store's Checker, by the first pass that reads
// it (a replay's Streams, explain's Scan) or else when Problems or
// Processors are first asked. A missing file is an error wrapping fs.ErrNotExist; a
// file that is not an SQLite recording (another file, another database, a
// META row of another format) an error wrapping store.ErrFormat naming the
// file.
func Open(path string) (*Store, error) {
	size, err := magic(path)
	switch {
	case errors.Is(err, errNotSQLite):
		return nil, &store.FileError{Op: "sqlitestore: open", Path: path, Err: fmt.Errorf("%w: not an SQLite database", store.ErrFormat)}
	case err != nil:
		return nil, fmt.Errorf("sqlitestore: open: %w", err)
	case size == 0:
		return nil, &store.FileError{Op: "sqlitestore: open", Path: path, Err: fmt.Errorf("%w: empty file", store.ErrFormat)}
	}
	db, err := openDB(path, true)
	if err != nil {
		return nil, &store.FileError{Op: "sqlitestore: open", Path: path, Err: err}
	}
	if err := checkSchema(db, path); err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{path: path, db: db, readOnly: true}
	if err := s.openMeta(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// openMeta reads, for a reader, the largest row id (the rows it will read)
// and the META row (the first row, when it is one). The recording is
// checked by the first pass over it: a replay's, or Problems'.
func (s *Store) openMeta() error {
	ctx := context.Background()
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM rows`).Scan(&s.roMax); err != nil {
		return &store.FileError{Op: "sqlitestore: open", Path: s.path, Err: err}
	}
	rs, err := s.db.QueryContext(ctx, rowsSQL+` LIMIT 1`, s.roMax)
	if err != nil {
		return &store.FileError{Op: "sqlitestore: open", Path: s.path, Err: err}
	}
	defer rs.Close()
	sc := scanner{format: store.Format}
	if rs.Next() {
		id, e, p, err := sc.scan(rs, s.path)
		if err != nil {
			return &store.FileError{Op: "sqlitestore: open", Path: s.path, Err: err}
		}
		if p == nil && e.Kind == store.KindMeta {
			m, err := store.DecodeMeta(e)
			if err != nil {
				return &store.FileError{Op: "sqlitestore: open", Path: s.path, Err: fmt.Errorf("row %d: %w", id, err)}
			}
			s.roMeta = m
		}
	}
	if err := rs.Err(); err != nil {
		return &store.FileError{Op: "sqlitestore: open", Path: s.path, Err: err}
	}
	return nil
}

func checkSchema(db *sql.DB, path string) error {
	objects, err := schemaOf(db)
	if err != nil {
		return &store.FileError{Op: "sqlitestore: open", Path: path, Err: fmt.Errorf("%w: %v", store.ErrFormat, err)}
	}
	if why := sameSchema(objects); why != "" {
		return &store.FileError{Op: "sqlitestore: open", Path: path, Err: fmt.Errorf("%w: %s", store.ErrFormat, why)}
	}
	return nil
}

// schemaObject is a row of sqlite_master.
type schemaObject struct{ kind, name, table, sql string }

// schemaOf returns the schema objects of db (sqlite_master), SQLite's own
// (sqlite_*) aside, sorted by name.
func schemaOf(db interface {
	Query(string, ...any) (*sql.Rows, error)
}) ([]schemaObject, error) {
	rs, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master
WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []schemaObject
	for rs.Next() {
		var o schemaObject
		if err := rs.Scan(&o.kind, &o.name, &o.table, &o.sql); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rs.Err()
}

// recordingSchema is the schema Create makes, as sqlite_master holds it.
var recordingSchema = sync.OnceValues(func() ([]schemaObject, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database
	if _, err := db.Exec(Schema); err != nil {
		return nil, err
	}
	return schemaOf(db)
})

// sameSchema returns "" when objects are exactly the recording's schema
// (the table rows with its columns, its two indexes, nothing else), else
// what differs.
func sameSchema(objects []schemaObject) string {
	want, err := recordingSchema()
	if err != nil {
		return fmt.Sprintf("the recording schema cannot be built: %v", err)
	}
	have := map[string]schemaObject{}
	for _, o := range objects {
		have[o.name] = o
	}
	for _, w := range want {
		o, ok := have[w.name]
		switch {
		case !ok:
			return fmt.Sprintf("no %s %s", w.kind, w.name)
		case o != w:
			return fmt.Sprintf("%s %s is not the recording's: %s", o.kind, o.name, o.sql)
		}
		delete(have, w.name)
	}
	for _, o := range objects {
		if _, extra := have[o.name]; extra {
			return fmt.Sprintf("%s %s is not part of a recording", o.kind, o.name)
		}
	}
	return ""
}

// Path returns the database's path.
func (s *Store) Path() string { return s.path }

// Append inserts rows in one transaction with a prepared INSERT, all or
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
func (s *Store) Append(rows ...store.Entry) error {
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
func (s *Store) Sync() error {
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
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.insert != nil {
		errs = append(errs, s.insert.Close())
	}
	if s.wconn != nil {
		leaveWAL(s.wconn)
		errs = append(errs, s.wconn.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
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

// limit returns the largest id readers read, and the database they read
// it from: nil for a Store from Create before its first Append (no row).
func (s *Store) limit() (int64, *sql.DB, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: store.ErrClosed}
	}
	if s.readOnly {
		return s.roMax, s.db, nil
	}
	return s.lastID, s.db, nil
}

func (s *Store) current() (*view, error) {
	maxID, db, err := s.limit()
	if err != nil {
		return nil, err
	}
	s.vmu.Lock()
	defer s.vmu.Unlock()
	if s.view != nil && (s.readOnly || s.view.maxID == maxID) {
		return s.view, nil
	}
	v, err := s.scan(db, maxID)
	if err != nil {
		return nil, err
	}
	s.view = v
	return v, nil
}

// scan checks the rows of db up to maxID (-1: every row, in one read
// transaction with the largest id).
func (s *Store) scan(db *sql.DB, maxID int64) (*view, error) { return s.check(db, maxID, nil) }

// check is scan that also hands every row, in rowid order, to visit (when
// not nil): its id, the row, or its *store.Problem when it cannot be read.
// When visit returns false the pass stops and check returns a nil view. A
// nil db holds no row (a Store from Create before its first Append).
func (s *Store) check(db *sql.DB, maxID int64, visit func(id int64, e store.Entry, p *store.Problem) bool) (*view, error) {
	if db == nil {
		c := store.Checker{File: s.path}
		return &view{procs: c.Processors(), problems: c.Finish()}, nil
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err}
	}
	defer tx.Rollback()
	if maxID < 0 {
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM rows`).Scan(&maxID); err != nil {
			return nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err}
		}
	}
	rs, err := tx.QueryContext(ctx, rowsSQL, maxID)
	if err != nil {
		return nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err}
	}
	defer rs.Close()
	v := &view{maxID: maxID}
	c := store.Checker{File: s.path}
	sc := scanner{format: store.Format}
	first := true
	for rs.Next() {
		id, e, p, err := sc.scan(rs, s.path)
		if err != nil {
			return nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err}
		}
		if p != nil {
			first = false
			c.Report(*p)
			if visit != nil && !visit(id, store.Entry{}, p) {
				return nil, nil
			}
			continue
		}
		if first && e.Kind == store.KindMeta {
			m, err := store.DecodeMeta(e)
			if err != nil {
				return nil, &store.FileError{Op: "sqlitestore: open", Path: s.path, Err: fmt.Errorf("row %d: %w", id, err)}
			}
			v.meta = m
			sc.format = m.Format
		}
		first = false
		c.Add(e, id)
		if visit != nil && !visit(id, e, nil) {
			return nil, nil
		}
	}
	if err := rs.Err(); err != nil {
		return nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err}
	}
	v.procs = c.Processors()
	v.problems = c.Finish()
	if s.readOnly {
		// A reader checks the file itself too: a database cut short, or
		// with a damaged page, may still answer the rows query with fewer
		// rows and no error.
		if why := s.damage(ctx, tx); why != nil {
			v.problems = append(v.problems, store.Unreadable(s.path, why)...)
		}
	}
	return v, nil
}

// damage reports why the database file is damaged, or nil: its size is not
// a whole number of pages (but for a page it holds in part that SQLite
// reads whole from the write-ahead log: walHolds), or SQLite's own
// structural check (PRAGMA quick_check, a read of every page) finds a
// fault.
func (s *Store) damage(ctx context.Context, tx *sql.Tx) error {
	var pageSize int64
	if err := tx.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return err
	}
	if fi, err := os.Stat(s.path); err != nil {
		return err
	} else if pageSize > 0 && fi.Size()%pageSize != 0 {
		whole, err := s.walHolds(ctx, tx, uint32(fi.Size()/pageSize+1), pageSize)
		if err != nil {
			return err
		}
		if !whole {
			return fmt.Errorf("%w: the database file is %d bytes, not a whole number of %d-byte pages (cut short)",
				errDamaged, fi.Size(), pageSize)
		}
	}
	rs, err := tx.QueryContext(ctx, `PRAGMA quick_check`)
	if err != nil {
		return err
	}
	defer rs.Close()
	var faults []string
	for rs.Next() {
		var line string
		if err := rs.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			faults = append(faults, line)
		}
	}
	if err := rs.Err(); err != nil {
		return err
	}
	if len(faults) > 0 {
		return fmt.Errorf("%w: quick_check: %s", errDamaged, strings.Join(faults, "; "))
	}
	return nil
}

var errDamaged = errors.New("damaged database")

// walHolds reports whether SQLite reads the page pgno, which the database
// file holds only in part, whole from the write-ahead log: the log beside
// the file has a committed frame of the page, and the page the transaction
// tx reads is that frame's. So it is when a write of the file was cut while
// SQLite copied the log into it (a checkpoint that failed, as on a full
// disk): SQLite goes on reading the log, and the next checkpoint writes the
// page again.
func (s *Store) walHolds(ctx context.Context, tx *sql.Tx, pgno uint32, pageSize int64) (bool, error) {
	logged, err := walPage(s.path+"-wal", pgno, pageSize)
	if err != nil || logged == nil {
		return false, err
	}
	var read []byte
	err = tx.QueryRowContext(ctx, `SELECT data FROM sqlite_dbpage WHERE pgno = ?`, pgno).Scan(&read)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Equal(read, logged), nil
}

// scanner decodes result rows. Not safe for concurrent use.
type scanner struct {
	format string // the recording's format, for payloads
	vals   [14]any
	ptrs   [14]any
}

// scan decodes the current row: its id and Entry, or the malformed
// Problem of a row whose columns do not hold what the format says (SQLite
// keeps any value in any column). err is a read error.
func (sc *scanner) scan(rs *sql.Rows, path string) (id int64, e store.Entry, p *store.Problem, err error) {
	if sc.ptrs[0] == nil {
		for i := range sc.vals {
			sc.ptrs[i] = &sc.vals[i]
		}
	}
	if err := rs.Scan(sc.ptrs[:]...); err != nil {
		return 0, store.Entry{}, nil, err
	}
	v := sc.vals[1:]
	id, _ = sc.vals[0].(int64)
	bad := func(col int, format string, args ...any) (int64, store.Entry, *store.Problem, error) {
		p := &store.Problem{Kind: store.ProblemMalformed, File: path, Processor: e.Processor, Index: e.Index,
			Row: e.Kind, Line: id, Detail: fmt.Sprintf("column %s: ", columns[col]) + fmt.Sprintf(format, args...)}
		return id, store.Entry{}, p, nil
	}
	text := func(i int) (string, bool) {
		x, ok := v[i].(string) // a BLOB is a []byte, not text
		return x, ok
	}
	integer := func(i int) (int64, bool) {
		x, ok := v[i].(int64)
		return x, ok
	}
	var ok bool
	var s string
	if e.Processor, ok = text(0); !ok {
		return bad(0, "%s is not text", describe(v[0]))
	}
	if e.Index, ok = integer(1); !ok {
		return bad(1, "%s is not an integer", describe(v[1]))
	}
	if s, ok = text(2); !ok || !store.Kind(s).Valid() {
		return bad(2, "unknown kind %s", describe(v[2]))
	}
	e.Kind = store.Kind(s)
	if e.Source, ok = text(3); !ok {
		return bad(3, "%s is not text", describe(v[3]))
	}
	if e.Seq, ok = integer(4); !ok {
		return bad(4, "%s is not an integer", describe(v[4]))
	}
	if s, ok = text(5); ok {
		e.Instant, ok = store.ParseInstant(s)
	}
	if !ok {
		return bad(5, "%s is not an RFC3339Nano UTC instant", describe(v[5]))
	}
	if e.Epoch, ok = integer(6); !ok {
		return bad(6, "%s is not an integer", describe(v[6]))
	}
	if e.Key, ok = text(7); !ok {
		return bad(7, "%s is not text", describe(v[7]))
	}
	if e.Offset, ok = integer(8); !ok {
		return bad(8, "%s is not an integer", describe(v[8]))
	}
	if e.N, ok = integer(9); !ok {
		return bad(9, "%s is not an integer", describe(v[9]))
	}
	if s, ok = text(10); !ok {
		return bad(10, "%s is not text", describe(v[10]))
	}
	var perr error
	if e.Payload, perr = store.PayloadBytes(sc.format, s); perr != nil {
		return bad(10, "%v", perr)
	}
	if e.Detail, ok = text(11); !ok {
		return bad(11, "%s is not text", describe(v[11]))
	}
	if s, ok = text(12); ok {
		e.Reads, ok = store.ParseReads(s)
	}
	if !ok {
		return bad(12, "%s is not a list of RFC3339Nano UTC instants joined by ';'", describe(v[12]))
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
	return id, e, nil, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		if len(x) > 60 {
			x = x[:57] + "..."
		}
		return fmt.Sprintf("%q", x)
	case []byte:
		return fmt.Sprintf("a blob of %d bytes", len(x))
	default:
		return fmt.Sprintf("%v (%T)", x, x)
	}
}

// Meta returns the decoded META row (the zero Meta if there is none).
func (s *Store) Meta() store.Meta {
	if !s.readOnly {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return s.meta
	}
	return s.roMeta
}

// Processors lists the processors in the order their streams start.
func (s *Store) Processors() []string {
	v, err := s.current()
	if err != nil {
		return nil
	}
	return append([]string(nil), v.procs...)
}

// Problems returns the integrity problems found by Open (for a Store from
// Create: of what has been committed so far). A Store that cannot be read
// (a read error, a closed Store) reports an unreadable problem
// (store.Unreadable), never none.
func (s *Store) Problems() []store.Problem {
	v, err := s.current()
	if err != nil {
		return store.Unreadable(s.path, err)
	}
	return append([]store.Problem(nil), v.problems...)
}

// Verify reads the rows again (those Open saw, or those committed so far)
// and checks them.
func (s *Store) Verify() []store.Problem {
	maxID, db, err := s.limit()
	var v *view
	if err == nil {
		v, err = s.scan(db, maxID)
	}
	if err != nil {
		return store.Unreadable(s.path, err)
	}
	return v.problems
}

// query yields the decoded rows of a query whose last argument is the id
// limit.
func (s *Store) query(q string, args ...any) iter.Seq2[store.Entry, error] {
	return s.queryTo(-1, q, args...)
}

// queryTo is query with the id limit maxID (-1: the store's).
func (s *Store) queryTo(maxID int64, q string, args ...any) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		limit, db, err := s.limit()
		if err != nil {
			yield(store.Entry{}, err)
			return
		}
		if maxID < 0 {
			maxID = limit
		}
		if db == nil {
			return // no row yet
		}
		rs, err := db.QueryContext(context.Background(), q, append(args, maxID)...)
		if err != nil {
			yield(store.Entry{}, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err})
			return
		}
		defer rs.Close()
		sc := scanner{format: s.Meta().Format}
		for rs.Next() {
			_, e, p, err := sc.scan(rs, s.path)
			switch {
			case err != nil:
				yield(store.Entry{}, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err})
				return
			case p != nil:
				if !yield(store.Entry{}, p) {
					return
				}
			default:
				if !yield(e, nil) {
					return
				}
			}
		}
		if err := rs.Err(); err != nil {
			yield(store.Entry{}, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err})
		}
	}
}

// Rows yields every row in rowid order, streaming (one cursor). A row
// whose columns do not hold a row is yielded as a zero Entry with its
// malformed *store.Problem and iteration goes on.
func (s *Store) Rows() iter.Seq2[store.Entry, error] { return s.query(rowsSQL) }

// Stream yields the rows of one processor in storage (rowid) order,
// streaming, as the CSV store yields a stream in line order: a row out of
// index order is the checker's problem (ErrGap), not reordered.
func (s *Store) Stream(processor string) iter.Seq2[store.Entry, error] {
	return s.query(streamSQL, processor)
}

// Streams yields the rows of every processor stream in one pass in rowid
// order, each stream's rows as Stream yields them. A row whose columns do
// not hold a row is yielded with its malformed *store.Problem, whose
// Processor is the stream's; one whose processor column is not text
// belongs to no stream and is left out, as from every Stream. A reader's
// first pass (this one, or Scan's) checks every row as it goes
// (store.StreamsReader): once it has run to its end, Problems and
// Processors never read again.
func (s *Store) Streams() iter.Seq2[store.Entry, error] {
	return s.pass(func(e store.Entry, p *store.Problem) (store.Entry, bool) {
		switch {
		case p != nil && p.Processor != "":
			return store.Entry{Processor: p.Processor}, true
		case p == nil && e.Processor != "":
			return e, true
		}
		return e, false
	}, streamsCleanSQL)
}

// Scan yields every row in rowid order, as Rows (store.StreamsReader),
// checking them on a reader's first pass as Streams does.
func (s *Store) Scan() iter.Seq2[store.Entry, error] {
	return s.pass(func(e store.Entry, _ *store.Problem) (store.Entry, bool) { return e, true }, rowsSQL)
}

// pass yields the rows keep keeps (as it maps them), with their problems:
// through the checker on a reader whose view is not made yet (the view
// is kept when the pass runs to its end), else through query q.
func (s *Store) pass(keep func(store.Entry, *store.Problem) (store.Entry, bool), q string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if !s.readOnly || s.checked() {
			for e, err := range s.query(q) {
				var p *store.Problem
				if errors.As(err, &p) {
					if e, ok := keep(e, p); ok && !yield(e, p) {
						return
					}
					continue
				}
				if err != nil {
					yield(store.Entry{}, err)
					return
				}
				if !yield(e, nil) {
					return
				}
			}
			return
		}
		_, db, err := s.limit()
		if err != nil { // closed
			yield(store.Entry{}, err)
			return
		}
		v, err := s.check(db, s.roMax, func(_ int64, e store.Entry, p *store.Problem) bool {
			e, ok := keep(e, p)
			if !ok {
				return true
			}
			if p != nil {
				return yield(e, p)
			}
			return yield(e, nil)
		})
		if err != nil {
			yield(store.Entry{}, err)
			return
		}
		if v != nil {
			s.vmu.Lock()
			if s.view == nil {
				s.view = v
			}
			s.vmu.Unlock()
		}
	}
}

// checked reports whether a reader's view is made.
func (s *Store) checked() bool {
	s.vmu.Lock()
	defer s.vmu.Unlock()
	return s.view != nil
}

// Journal returns the first JOURNAL row of (feed, seq), found through the
// partial (source, seq) index of JOURNAL rows, or an error wrapping
// store.ErrMissingJournal.
func (s *Store) Journal(feed string, seq int64) (store.Entry, error) {
	for e, err := range s.query(journalSQL, feed, seq) {
		var p *store.Problem
		if errors.As(err, &p) {
			break
		}
		return e, err
	}
	return store.Entry{}, &store.FileError{Op: "sqlitestore: journal", Path: s.path, Err: fmt.Errorf("%w: feed %q seq %d", store.ErrMissingJournal, feed, seq)}
}
