package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"

	"github.com/blackbox-audit/blackbox/store"
)

// limit returns the largest id readers read, and the database they read
// it from: nil for a Store from Create before its first Append (no row).
func (s *database) limit() (int64, *sql.DB, error) {
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

// format is the format of the recording's rows.
func (s *database) format() string {
	if !s.readOnly {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return s.meta.Format
	}
	return s.roMeta.Format
}

// Scan yields every row in rowid order, streaming, in one read
// transaction: a row whose columns do not hold a row with its malformed
// *store.Problem (store.Backend). A reader's pass of mode store.ScanWhole
// then checks the database file itself (damage) and yields what it finds,
// an unreadable Problem: a database cut short, or with a damaged page, may
// still answer the rows query with fewer rows and no error. A reader reads
// through a connection of its own (rawConn), a writer through its
// database/sql pool.
func (s *database) Scan(mode store.ScanMode) iter.Seq2[*store.Row, error] {
	return s.reading(func(db *sql.DB, maxID int64, yield func(*store.Row, error) bool) {
		fail := func(err error) { yield(nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err}) }
		if s.readOnly {
			if err := s.scanRaw(maxID, mode, yield); err != nil {
				fail(err)
			}
			return
		}
		ctx := context.Background()
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			fail(err)
			return
		}
		defer tx.Rollback()
		rs, err := tx.QueryContext(ctx, rowsSQL, maxID)
		if err != nil {
			fail(err)
			return
		}
		defer rs.Close()
		sc := scanner{format: s.format()}
		var row store.Row
		for rs.Next() {
			if row, err = sc.row(rs, s.path); err != nil {
				fail(err)
				return
			}
			if !sc.yield(&row, yield) {
				return
			}
		}
		if err := rs.Err(); err != nil {
			fail(err)
		}
	})
}

// scanRaw is a reader's Scan, through a rawConn on the file SQLite reads,
// in one read transaction: the rows, then (store.ScanWhole) the file's
// damage. It returns a read error, or nil when done or when yield
// stopped it.
func (s *database) scanRaw(maxID int64, mode store.ScanMode, yield func(*store.Row, error) bool) error {
	name, err := dsn(s.file, "mode=ro")
	if err != nil {
		return err
	}
	c, err := openRaw(name)
	if err != nil {
		return err
	}
	defer c.close()
	if err := c.exec("BEGIN"); err != nil {
		return err
	}
	defer c.exec("ROLLBACK") // a read transaction: nothing to keep
	st, err := c.prepare(rowsSQL, maxID)
	if err != nil {
		return err
	}
	defer st.close() // before the ROLLBACK
	sc := scanner{format: s.format()}
	for {
		ok, err := st.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		row := rowOf(st.row(&sc, s.path))
		if !sc.yield(&row, yield) {
			return nil
		}
	}
	if mode&store.ScanWhole == 0 {
		return nil
	}
	why, err := s.damage(c)
	if err != nil {
		return err
	}
	if why != nil {
		p := store.Unreadable(s.path, why)[0]
		yield(&store.Row{Problem: &p}, nil)
	}
	return nil
}

// yield yields row, the recording's format taken from it when it is the
// first row and a META row: whether to go on.
func (sc *scanner) yield(row *store.Row, yield func(*store.Row, error) bool) bool {
	if !sc.first {
		sc.first = true
		if row.Problem == nil && row.Entry.Kind == store.KindMeta {
			if m, err := store.DecodeMeta(row.Entry); err == nil {
				sc.format = m.Format
			}
		}
	}
	return yield(row, nil)
}

// reading is the sequence of rows read yields, given the database and the
// largest id readers read (limit): the opening Scan and query share. It
// yields limit's error, and nothing for a Store from Create before its
// first Append (no row yet).
func (s *database) reading(read func(db *sql.DB, maxID int64, yield func(*store.Row, error) bool)) iter.Seq2[*store.Row, error] {
	return func(yield func(*store.Row, error) bool) {
		maxID, db, err := s.limit()
		if err != nil {
			yield(nil, err)
			return
		}
		if db == nil {
			return // no row yet
		}
		read(db, maxID, yield)
	}
}

// damage reports why the database file is damaged, or nil: its size is not
// a whole number of pages (but for a page it holds in part that SQLite
// reads whole from the write-ahead log: walHolds), or SQLite's own
// structural check (PRAGMA quick_check, a read of every page) finds a
// fault. It reads in c's transaction; err is a read error.
func (s *database) damage(c *rawConn) (why, err error) {
	var pageSize int64
	if err := c.each(`PRAGMA page_size`, nil, func(st *rawStmt) error { pageSize = st.int(0); return nil }); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(s.file); err != nil {
		return nil, err
	} else if pageSize > 0 && fi.Size()%pageSize != 0 {
		whole, err := s.walHolds(c, uint32(fi.Size()/pageSize+1), pageSize)
		if err != nil {
			return nil, err
		}
		if !whole {
			return fmt.Errorf("%w: the database file is %d bytes, not a whole number of %d-byte pages (cut short)",
				errDamaged, fi.Size(), pageSize), nil
		}
	}
	var faults []string
	err = c.each(`PRAGMA quick_check`, nil, func(st *rawStmt) error {
		if line := string(st.view(0)); line != "ok" {
			faults = append(faults, line)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(faults) > 0 {
		return fmt.Errorf("%w: quick_check: %s", errDamaged, strings.Join(faults, "; ")), nil
	}
	return nil, nil
}

var errDamaged = errors.New("damaged database")

// walHolds reports whether SQLite reads the page pgno, which the database
// file holds only in part, whole from the write-ahead log: the log beside
// the file has a committed frame of the page, and the page c's
// transaction reads is that frame's. So it is when a write of the file was
// cut while SQLite copied the log into it (a checkpoint that failed, as on
// a full disk): SQLite goes on reading the log, and the next checkpoint
// writes the page again.
func (s *database) walHolds(c *rawConn, pgno uint32, pageSize int64) (bool, error) {
	logged, err := walPage(s.file+"-wal", pgno, pageSize)
	if err != nil || logged == nil {
		return false, err
	}
	same := false
	err = c.each(`SELECT data FROM sqlite_dbpage WHERE pgno = ?`, []int64{int64(pgno)}, func(st *rawStmt) error {
		same = bytes.Equal(st.view(0), logged)
		return nil
	})
	return same, err
}

// scanner decodes result rows. Not safe for concurrent use.
type scanner struct {
	format string // the recording's format, for payloads
	vals   [14]any
	ptrs   [14]any
	// The raw reader's (rawStmt.row): the last processor and source
	// read, and a buffer for the text of a column parsed, not kept.
	processor, source interned
	buf               []byte
	first             bool // a row was yielded (scanner.yield)
}

// row is the current row as a reader yields it: its Entry, or its
// malformed Problem (scan) with the row's processor. err is a read error.
func (sc *scanner) row(rs *sql.Rows, path string) (store.Row, error) {
	id, e, p, err := sc.scan(rs, path)
	if err != nil {
		return store.Row{}, err
	}
	return rowOf(id, e, p), nil
}

// rowOf is the row of id, its Entry e or its malformed Problem p (with
// the row's processor).
func rowOf(id int64, e store.Entry, p *store.Problem) store.Row {
	if p != nil {
		return store.Row{Line: id, Entry: store.Entry{Processor: p.Processor}, Problem: p}
	}
	return store.Row{Line: id, Entry: e}
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
	return sc.decode(path)
}

// decode decodes the row in sc.vals, as scan.
func (sc *scanner) decode(path string) (id int64, e store.Entry, p *store.Problem, err error) {
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

// query yields the rows of a query whose last argument is the id limit,
// as Scan yields them.
func (s *database) query(q string, args ...any) iter.Seq2[*store.Row, error] {
	return s.reading(func(db *sql.DB, maxID int64, yield func(*store.Row, error) bool) {
		rs, err := db.QueryContext(context.Background(), q, append(args, maxID)...)
		if err != nil {
			yield(nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err})
			return
		}
		defer rs.Close()
		sc := scanner{format: s.format()}
		var row store.Row
		for rs.Next() {
			if row, err = sc.row(rs, s.path); err != nil {
				yield(nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err})
				return
			}
			if !yield(&row, nil) {
				return
			}
		}
		if err := rs.Err(); err != nil {
			yield(nil, &store.FileError{Op: "sqlitestore: read", Path: s.path, Err: err})
		}
	})
}

// Stream yields the rows of one processor in storage (rowid) order through
// the (processor, idx) index (store.StreamSeeker), as the CSV store yields
// a stream in line order: a row out of index order is the checker's
// problem (ErrGap), not reordered.
func (s *database) Stream(processor string) iter.Seq2[*store.Row, error] {
	return func(yield func(*store.Row, error) bool) {
		for row, err := range s.query(streamSQL, processor) {
			if row != nil && row.Problem != nil {
				row.Entry.Processor = processor
			}
			if !yield(row, err) {
				return
			}
		}
	}
}

// Journal returns the first JOURNAL row of (feed, seq), found through the
// partial (source, seq) index of JOURNAL rows, or an error wrapping
// store.ErrMissingJournal.
func (s *database) Journal(feed string, seq int64) (store.Entry, error) {
	for row, err := range s.query(journalSQL, feed, seq) {
		if err != nil {
			return store.Entry{}, err
		}
		if row.Problem != nil {
			break
		}
		return row.Entry, nil
	}
	return store.Entry{}, &store.FileError{Op: "sqlitestore: journal", Path: s.path, Err: fmt.Errorf("%w: feed %q seq %d", store.ErrMissingJournal, feed, seq)}
}
