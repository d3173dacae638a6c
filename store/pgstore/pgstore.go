package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/blackbox-audit/blackbox/store"
)

// Sentinel errors, tested with errors.Is.
var (
	// ErrSchemaNewer: the database's schema is newer than this build's
	// (*VersionError names both versions).
	ErrSchemaNewer = errors.New("pgstore: database schema is newer than this build")
	// ErrLeaseLost: an Append of a writer whose run another writer took
	// over, or that was pruned: its transaction is rolled back, and every
	// later Append fails the same way.
	ErrLeaseLost = errors.New("pgstore: run lease lost: the run is no longer this writer's")
	// ErrRunID: a URL with no run id (run=) or an invalid one.
	ErrRunID = errors.New("pgstore: invalid run id")
	// ErrWriting: Prune of a run still being written (its writer holds its
	// lock).
	ErrWriting = errors.New("pgstore: run is being written")
)

// Schemes are the URL schemes of this backend's recordings.
var Schemes = []string{"postgres", "postgresql"}

// Locator is what a recording's URL says: the database to connect to and
// the run. Its zero value is not valid; ParseURL makes one.
type Locator struct {
	// Conn is the URL without this package's parameters: pgx's
	// connection string.
	Conn string
	// Run is the run id (parameter run); Member and Group (parameters
	// member and group) describe a new run's writer for `blackbox runs`.
	Run, Member, Group string
}

// ParseURL splits a recording's URL (postgres://... or postgresql://...)
// into a Locator. The parameters run, member and group are this
// package's; every other parameter is pgx's (host, sslmode ...).
func ParseURL(path string) (Locator, error) {
	u, err := url.Parse(path)
	if err != nil {
		return Locator{}, fmt.Errorf("pgstore: %w", err)
	}
	if !isScheme(u.Scheme) {
		return Locator{}, fmt.Errorf("pgstore: %q is not a postgres:// or postgresql:// URL", Redact(path))
	}
	q := u.Query()
	l := Locator{Run: q.Get("run"), Member: q.Get("member"), Group: q.Get("group")}
	for _, k := range []string{"run", "member", "group"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	l.Conn = u.String()
	return l, nil
}

func isScheme(s string) bool {
	for _, x := range Schemes {
		if strings.EqualFold(s, x) {
			return true
		}
	}
	return false
}

// WithRun returns path with its run parameter set to run.
func WithRun(path, run string) (string, error) { return WithParam(path, "run", run) }

// WithParam returns path with its parameter key set to value.
func WithParam(path, key, value string) (string, error) {
	u, err := url.Parse(path)
	if err != nil {
		return "", fmt.Errorf("pgstore: %w", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// NewRunID returns a new run id: the UTC time to the second and 6 random
// bytes in hex (20260102T150405Z-0123456789ab), sortable by start.
func NewRunID(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// checkRunID refuses an empty run id, or one with a control character or
// longer than 200 bytes (a run id is printed and typed).
func checkRunID(run string) error {
	if run == "" {
		return fmt.Errorf("%w: no run id (add run=ID to the URL)", ErrRunID)
	}
	if len(run) > 200 {
		return fmt.Errorf("%w: %d bytes, at most 200", ErrRunID, len(run))
	}
	for _, r := range run {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %q holds a control character", ErrRunID, run)
		}
	}
	return nil
}

// Redact returns path with the password of its URL, if any, replaced.
func Redact(path string) string {
	u, err := url.Parse(path)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}

// Row columns, in the order of cols.
var columns = [...]string{"processor", "index", "kind", "source", "seq", "instant", "epoch", "key", "offset", "n", "payload", "detail", "reads"}

// dbColumns are the table's names of columns (idx is "index", a keyword).
var dbColumns = []string{"run", "id", "processor", "idx", "kind", "source", "seq", "instant", "epoch", "key", "offset", "n", "payload", "detail", "reads"}

const (
	cols      = `id, processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads`
	rowsSQL   = `SELECT ` + cols + ` FROM blackbox_rows WHERE run = $1 AND id <= $2 ORDER BY id`
	streamSQL = `SELECT ` + cols + ` FROM blackbox_rows WHERE run = $1 AND processor = $2 AND id <= $3 ORDER BY id`
	// ownSQL is streamSQL for the run's own rows (processor ''): the
	// predicate written out, so that every plan of it may use the
	// partial index blackbox_rows_run.
	ownSQL     = `SELECT ` + cols + ` FROM blackbox_rows WHERE run = $1 AND processor = '' AND id <= $2 ORDER BY id`
	journalSQL = `SELECT ` + cols + ` FROM blackbox_rows WHERE run = $1 AND kind = 'JOURNAL' AND source = $2 AND seq = $3 AND processor = '' AND id <= $4 ORDER BY id LIMIT 1`
	// runLockSQL takes a run's writer lock: a session-level advisory lock
	// on the writer's connection, released when it closes or dies.
	runLockSQL = `SELECT pg_try_advisory_lock(hashtextextended('blackbox run ' || $1, 0))`
	// runUnlockSQL releases it at Close: at once, where the end of the
	// session releases it only once the server has seen the connection
	// close.
	runUnlockSQL = `SELECT pg_advisory_unlock(hashtextextended('blackbox run ' || $1, 0))`
)

// database is the store.Backend of one run in a PostgreSQL database.
//
// A database from Create appends (Append) on its own connection, which
// holds the run's advisory lock, each Append one transaction that first
// checks the run's generation is the one it took (the lease); it reads,
// through a pool, the rows it has committed. One from Open reads the rows
// committed when it was opened (id up to the largest then) and refuses
// Append with store.ErrReadOnly.
//
// A database is safe for concurrent use: any number of goroutines may read
// while one appends; Append calls are serialised. Each iterator is used by
// one goroutine.
type database struct {
	path     string
	loc      Locator
	pool     *pgxpool.Pool // reads: shared (acquirePool)
	readOnly bool

	wmu    sync.Mutex
	wconn  *pgx.Conn // Create: the writer's connection, holding the run's lock
	gen    int64     // Create: the generation of the run this writer took
	key    int64     // the run's integer key (blackbox_runs.run), which its rows hold
	lost   error     // Create: why the writer can no longer append (ErrLeaseLost)
	lastID int64
	meta   store.Meta
	closed bool
	data   []byte // Append's COPY data, kept for the next (maxKeptBuf)
	buf    []byte // Append's frontend messages, kept for the next (maxKeptBuf)
	// Append: the connection has no lease statement (noStatementCode)
	unprepared bool

	// A reader (Open): the rows it reads (id <= roMax) and their META row.
	roMax  int64
	roMeta store.Meta
}

func (s *database) fileErr(op string, err error) error {
	return &store.FileError{Op: "pgstore: " + op, Path: s.path, Err: err}
}

// timeout bounds the connection and the set-up queries of Create and Open.
const timeout = 30 * time.Second

// Create starts a new run at path, a URL with a run id (run=): it migrates
// the database to SchemaVersion (refusing one that is newer, a
// *VersionError), takes the run's writer lock (a second writer of the run
// is refused at once with an error wrapping store.ErrLocked) and claims
// the run: a new row of blackbox_runs, generation 1, or, for a run that
// holds no rows and whose writer is gone (killed before its first Append),
// that row with its generation counted up. A run that holds rows is
// refused with an error wrapping store.ErrHoldsRecording.
func Create(path string) (*store.Recording, error) {
	d, err := create(path)
	if err != nil {
		return nil, err
	}
	return store.CreateBackend(d, path), nil
}

func create(path string) (*database, error) {
	loc, err := ParseURL(path)
	if err == nil {
		err = checkRunID(loc.Run)
	}
	if err != nil {
		return nil, &store.FileError{Op: "pgstore: create", Path: path, Err: err}
	}
	s := &database{path: path, loc: loc}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.claim(ctx); err != nil {
		s.Close()
		return nil, s.fileErr("create", err)
	}
	return s, nil
}

func (s *database) claim(ctx context.Context) error {
	c, err := pgx.Connect(ctx, s.loc.Conn)
	if err != nil {
		return err
	}
	s.wconn = c
	if err := migrate(ctx, c); err != nil {
		return err
	}
	var locked bool
	if err := c.QueryRow(ctx, runLockSQL, s.loc.Run).Scan(&locked); err != nil {
		return err
	}
	if !locked {
		return fmt.Errorf("%w: run %q", store.ErrLocked, s.loc.Run)
	}
	member := s.loc.Member
	if member == "" {
		host, _ := os.Hostname()
		member = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		var nrows int64
		err := tx.QueryRow(ctx, `SELECT nrows FROM blackbox_runs WHERE run_id = $1 FOR UPDATE`, s.loc.Run).Scan(&nrows)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			s.gen = 1
			return tx.QueryRow(ctx, `INSERT INTO blackbox_runs (run_id, generation, member, grp, started) VALUES ($1, 1, $2, $3, now()) RETURNING run`,
				s.loc.Run, member, s.loc.Group).Scan(&s.key)
		case err != nil:
			return err
		case nrows > 0:
			return fmt.Errorf("%w: run %q (%d rows)", store.ErrHoldsRecording, s.loc.Run, nrows)
		}
		return tx.QueryRow(ctx, `UPDATE blackbox_runs SET generation = generation + 1, member = $2, grp = $3, started = now(), ended = NULL
WHERE run_id = $1 RETURNING generation, run`, s.loc.Run, member, s.loc.Group).Scan(&s.gen, &s.key)
	})
	if err != nil {
		return err
	}
	if _, err := c.Exec(ctx, prepareLease); err != nil {
		return err
	}
	s.pool, err = acquirePool(ctx, s.loc.Conn)
	return err
}

// Open opens the run at path (a URL with a run id) for reading, changing
// nothing in the database. A run the database does not hold is an error
// wrapping fs.ErrNotExist; a run without rows (its writer was killed before
// its first Append) one wrapping store.ErrFormat, as an empty file is; a
// database whose schema is newer than this build's a *VersionError.
func Open(path string) (*store.Recording, error) {
	d, err := open(path)
	if err != nil {
		return nil, err
	}
	return store.OpenBackend(d, path)
}

func open(path string) (*database, error) {
	loc, err := ParseURL(path)
	if err == nil {
		err = checkRunID(loc.Run)
	}
	if err != nil {
		return nil, &store.FileError{Op: "pgstore: open", Path: path, Err: err}
	}
	s := &database{path: path, loc: loc, readOnly: true}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.openRun(ctx); err != nil {
		s.Close()
		return nil, s.fileErr("open", err)
	}
	return s, nil
}

func (s *database) openRun(ctx context.Context) error {
	var err error
	if s.pool, err = acquirePool(ctx, s.loc.Conn); err != nil {
		return err
	}
	v, err := readVersion(ctx, s.pool)
	if err != nil {
		return err
	}
	if v == 0 {
		return fmt.Errorf("%w: run %q: the database holds no blackbox runs", fs.ErrNotExist, s.loc.Run)
	}
	var nrows int64
	err = s.pool.QueryRow(ctx, `SELECT run, nrows, (SELECT coalesce(max(id), 0) FROM blackbox_rows w WHERE w.run = r.run)
FROM blackbox_runs r WHERE run_id = $1`, s.loc.Run).Scan(&s.key, &nrows, &s.roMax)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: no run %q", fs.ErrNotExist, s.loc.Run)
	case err != nil:
		return err
	case s.roMax == 0:
		return fmt.Errorf("%w: run %q holds no rows (a run killed before its first write: it recorded, applied and committed nothing)", store.ErrFormat, s.loc.Run)
	}
	for row, err := range s.query(ctx, rowsSQL+` LIMIT 1`, s.key, s.roMax) {
		if err != nil {
			return err
		}
		if row.Problem == nil && row.Entry.Kind == store.KindMeta {
			if s.roMeta, err = store.DecodeMeta(row.Entry); err != nil {
				return fmt.Errorf("row %d: %w", row.Line, err)
			}
		}
	}
	return nil
}

func init() {
	store.Register(store.Driver{Name: "postgres", Schemes: Schemes,
		Sniff:  func([]byte) bool { return false }, // no file is a PostgreSQL recording
		Open:   func(path string) (store.Backend, error) { return open(path) },
		Create: func(path string) (store.Backend, error) { return create(path) }})
}
