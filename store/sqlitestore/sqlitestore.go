package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"modernc.org/sqlite" // the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

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
	cols = `id, processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads`
	// insertHead and insertValues make an INSERT of rows (insertSQLFor): the
	// head, then one insertValues per row, joined by commas.
	insertHead = `INSERT INTO rows (processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads)
VALUES `
	insertValues = `(?,?,?,?,?,?,?,?,?,?,?,?,?)`
	rowsSQL      = `SELECT ` + cols + ` FROM rows WHERE id <= ? ORDER BY id`
	streamSQL    = `SELECT ` + cols + ` FROM rows WHERE processor = ? AND id <= ? ORDER BY id`
	journalSQL   = `SELECT ` + cols + ` FROM rows WHERE kind = 'JOURNAL' AND source = ? AND seq = ? AND processor = '' AND id <= ? ORDER BY id LIMIT 1`
)

// columns names the CSV columns, in the order of cols after id.
var columns = [...]string{"processor", "index", "kind", "source", "seq", "instant", "epoch", "key", "offset", "n", "payload", "detail", "reads"}

var sqliteMagic = []byte("SQLite format 3\x00")

// database is the store.Backend of an SQLite recording: one database file
// in WAL mode, one table of rows.
//
// A database from Create appends (Append, Sync) and reads what it has
// committed so far; one from Open reads the rows committed when it was
// opened (rows with an id up to the largest one then) and refuses Append
// with store.ErrReadOnly.
//
// A database is safe for concurrent use: any number of goroutines may read
// while one goroutine appends; Append calls are serialised. Each iterator
// is used by one goroutine.
type database struct {
	path     string
	lock     *store.FileLock // Create: the exclusive lock of the file, held until Close
	db       *sql.DB         // Create: nil until the first Append (wmu guards it then)
	target   string          // Create: the file path names (store.Target), which the first Append replaces
	readOnly bool

	// A reader (Open): the database file SQLite reads, path or, when path
	// has a hot rollback journal, its recovered copy in the temporary
	// directory recovered (see openReader), which Close removes.
	file      string
	recovered string

	wmu    sync.Mutex
	wconn  *sql.Conn
	insert *inserter
	lastID int64
	meta   store.Meta
	nrows  int64
	closed bool

	// A reader (Open): the rows it reads (id <= roMax) and their META
	// row, read at Open.
	roMax  int64
	roMeta store.Meta
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
// makes it survive a power loss. A writer keeps its temporary files in
// memory (temp_store=MEMORY): the statement journal of a multi-row INSERT,
// which SQLite would otherwise write to a temporary file, holds the pages
// to restore should that statement fail inside its transaction, and no
// crash recovery ever reads it (the write-ahead log is the recovery), so
// where it is kept does not change what a commit promises.
func openDB(path string, readOnly bool) (*sql.DB, error) {
	params := []string{"_busy_timeout=10000"}
	if readOnly {
		params = append(params, "mode=ro")
	} else {
		params = append(params, "_journal_mode=WAL", "_synchronous=NORMAL", "_pragma=temp_store(MEMORY)")
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

// Create creates a new recording at path (store.Create calls it for a path
// not ending in .csv) (a missing file, an empty file or
// an SQLite recording without rows), which the first Append writes whole,
// schema and rows, or not at all (see Append): until then the file is left
// as it was. It takes the file's exclusive lock (store.Lock) first and
// holds it until Close: a file another writer holds is refused at once with
// an error wrapping store.ErrLocked. It refuses, with an error wrapping
// store.ErrHoldsRecording naming the path and without writing to it, a
// file that holds anything else: a recording with rows, another SQLite
// database, other bytes.
func Create(path string) (*store.Recording, error) {
	d, err := create(path)
	if err != nil {
		return nil, err
	}
	return store.CreateBackend(d, path), nil
}

func create(path string) (*database, error) {
	lock, err := store.Lock(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: create: %w", err)
	}
	if err := refuseExisting(path); err != nil {
		lock.Unlock()
		return nil, err
	}
	return &database{path: path, lock: lock, target: store.Target(path)}, nil
}

// Open opens the recording at path for reading, without creating or
// changing it. It reads only the META row: the recording is checked once,
// in rowid order, by store.Recording's first pass over it. A missing file is an error wrapping fs.ErrNotExist; a
// file that is not an SQLite recording (another file, another database, a
// META row of another format) an error wrapping store.ErrFormat naming the
// file.
func Open(path string) (*store.Recording, error) {
	d, err := open(path)
	if err != nil {
		return nil, err
	}
	return store.OpenBackend(d, path)
}

func open(path string) (*database, error) {
	size, err := magic(path)
	switch {
	case errors.Is(err, errNotSQLite):
		return nil, &store.FileError{Op: "sqlitestore: open", Path: path, Err: fmt.Errorf("%w: not an SQLite database", store.ErrFormat)}
	case err != nil:
		return nil, fmt.Errorf("sqlitestore: open: %w", err)
	case size == 0:
		return nil, &store.FileError{Op: "sqlitestore: open", Path: path, Err: fmt.Errorf("%w: empty file", store.ErrFormat)}
	}
	db, file, recovered, err := openReader(path)
	if err != nil {
		return nil, &store.FileError{Op: "sqlitestore: open", Path: path, Err: err}
	}
	s := &database{path: path, db: db, readOnly: true, file: file, recovered: recovered}
	if err := checkSchema(db, path); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.openMeta(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openReader opens the database at path for reading (mode=ro: a reader
// never writes to a recording). It returns the database, the file SQLite
// reads and the temporary directory that holds it ("" for path itself).
//
// A database with a hot rollback journal beside it (PATH-journal, left by
// a process killed inside a rollback-journal transaction, such as the
// switch out of WAL mode at a writer's Close) holds pages of that
// transaction, which was never committed: SQLite reads it only once the
// journal is rolled back, which a read-only connection may not do (it
// answers SQLITE_READONLY_ROLLBACK). The database is then read from a
// recovered copy (recoverCopy): the run's files stay as they are.
func openReader(path string) (db *sql.DB, file, recovered string, err error) {
	db, err = openDB(path, true)
	if err != nil {
		return nil, "", "", err
	}
	var n int64
	err = db.QueryRow(`SELECT count(*) FROM sqlite_master`).Scan(&n)
	if !hotJournal(err) {
		return db, path, "", nil // another error is checkSchema's to report
	}
	db.Close()
	recovered, file, err = recoverCopy(path)
	if err != nil {
		return nil, "", "", fmt.Errorf("reading past its hot rollback journal %s: %w", path+"-journal", err)
	}
	db, err = openDB(file, true)
	if err != nil {
		os.RemoveAll(recovered)
		return nil, "", "", err
	}
	return db, file, recovered, nil
}

// hotJournal reports whether err is SQLite's refusal to read a database
// whose hot rollback journal a read-only connection cannot roll back.
func hotJournal(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_READONLY_ROLLBACK
}

// recoverCopy copies the database at path, with its -journal and -wal
// files, into a new temporary directory and opens the copy read-write
// once, so that SQLite rolls the journal back there: the copy then holds
// what was committed. It returns the directory and the copy's path.
//
// The journal is copied before the database: were another program to roll
// the journal back meanwhile, the copy would hold the journal whole and the
// database partly or wholly rolled back, which the journal rolls back
// again to the same pages (the other order could pair a database half
// rolled back with no journal).
func recoverCopy(path string) (dir, file string, err error) {
	dir, err = os.MkdirTemp("", "blackbox-recovered-*")
	if err != nil {
		return "", "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	file = filepath.Join(dir, "recording.db")
	for _, suffix := range []string{"-journal", "-wal", ""} {
		err := copyFile(path+suffix, file+suffix)
		if errors.Is(err, fs.ErrNotExist) && suffix != "" {
			continue
		}
		if err != nil {
			return "", "", err
		}
	}
	name, err := dsn(file, "_busy_timeout=10000")
	if err != nil {
		return "", "", err
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return "", "", err
	}
	var n int64
	err = db.QueryRow(`SELECT count(*) FROM sqlite_master`).Scan(&n) // the first read rolls the journal back
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", fmt.Errorf("rolling back a copy: %w", err)
	}
	return dir, file, nil
}

// copyFile copies the file from to a new file to.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// openMeta reads, for a reader, the largest row id (the rows it will read)
// and the META row (the first row, when it is one). The recording is
// checked by the first pass over it: a replay's, or Problems'.
func (s *database) openMeta() error {
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

func init() {
	store.Register(store.Driver{Name: "sqlite", Default: true, Sniff: sniff,
		Open:   func(path string) (store.Backend, error) { return open(path) },
		Create: func(path string) (store.Backend, error) { return create(path) }})
}

// sniff reports whether a file beginning with head is an SQLite database.
func sniff(head []byte) bool { return bytes.HasPrefix(head, sqliteMagic) }
