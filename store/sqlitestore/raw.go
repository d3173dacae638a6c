package sqlitestore

import (
	"fmt"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/blackbox-audit/blackbox/store"
)

// A reader's Scan reads the rows table through SQLite's C API as
// modernc.org/sqlite/lib exports it, on a connection of its own opened
// SQLITE_OPEN_NOMUTEX, rather than through database/sql: the driver opens
// every connection serialized (SQLITE_OPEN_FULLMUTEX, fixed in its
// conn.go), so that each of a row's 14 column reads takes and leaves the
// connection's mutex, and database/sql boxes each value in an interface
// and converts it again. On a 600,000-row recording the replay through the
// binary took about half the time (docs/PERFORMANCE.md). Only reading is
// done here: every write, and every query but Scan's, goes through
// database/sql.

// rawConn is a read-only connection through SQLite's C API, not
// serialized: not safe for concurrent use.
type rawConn struct {
	tls *libc.TLS
	db  uintptr
}

// rawError is an error SQLite returned to a rawConn: its result code and
// message.
type rawError struct {
	code int32
	msg  string
}

func (e *rawError) Error() string { return fmt.Sprintf("%s (%d)", e.msg, e.code) }

// openRaw opens the database at the URI name read-only (its mode=ro
// included), waiting up to 10 s for a lock, as openDB's readers do.
func openRaw(name string) (*rawConn, error) {
	c := &rawConn{tls: libc.NewTLS()}
	z, err := libc.CString(name)
	if err != nil {
		c.tls.Close()
		return nil, err
	}
	defer libc.Xfree(c.tls, z)
	p := c.tls.Alloc(8)
	defer c.tls.Free(8)
	rc := sqlite3.Xsqlite3_open_v2(c.tls, z, p, sqlite3.SQLITE_OPEN_READONLY|sqlite3.SQLITE_OPEN_NOMUTEX|sqlite3.SQLITE_OPEN_URI, 0)
	c.db = libc.AtomicLoadPUintptr(p)
	if rc == sqlite3.SQLITE_OK {
		rc = sqlite3.Xsqlite3_busy_timeout(c.tls, c.db, 10000)
	}
	if rc != sqlite3.SQLITE_OK {
		err := c.err(rc)
		c.close()
		return nil, err
	}
	return c, nil
}

// err is the error of result code rc, with the connection's message.
func (c *rawConn) err(rc int32) error {
	msg := libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc))
	if c.db != 0 {
		if m := libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db)); m != msg {
			msg += ": " + m
		}
	}
	return &rawError{code: rc, msg: msg}
}

// close closes the connection, its statements finalized before.
func (c *rawConn) close() {
	if c.db != 0 {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
	}
	c.tls.Close()
}

// exec runs q, a statement of no result rows.
func (c *rawConn) exec(q string) error {
	st, err := c.prepare(q)
	if err != nil {
		return err
	}
	defer st.close()
	_, err = st.next()
	return err
}

// each runs q with its integer arguments and calls fn on each result row,
// stopping at fn's first error.
func (c *rawConn) each(q string, args []int64, fn func(*rawStmt) error) error {
	st, err := c.prepare(q, args...)
	if err != nil {
		return err
	}
	defer st.close()
	for {
		ok, err := st.next()
		if err != nil || !ok {
			return err
		}
		if err := fn(st); err != nil {
			return err
		}
	}
}

// rawStmt is a prepared statement of a rawConn: not safe for concurrent
// use.
type rawStmt struct {
	c  *rawConn
	st uintptr
}

// prepare prepares q and binds its integer arguments.
func (c *rawConn) prepare(q string, args ...int64) (*rawStmt, error) {
	z, err := libc.CString(q)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, z)
	p := c.tls.Alloc(8)
	defer c.tls.Free(8)
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, z, -1, p, 0); rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	s := &rawStmt{c: c, st: libc.AtomicLoadPUintptr(p)}
	for i, a := range args {
		if rc := sqlite3.Xsqlite3_bind_int64(c.tls, s.st, int32(i+1), a); rc != sqlite3.SQLITE_OK {
			s.close()
			return nil, c.err(rc)
		}
	}
	return s, nil
}

// next steps to the next result row: false once there is none.
func (s *rawStmt) next() (bool, error) {
	switch rc := sqlite3.Xsqlite3_step(s.c.tls, s.st); rc {
	case sqlite3.SQLITE_ROW:
		return true, nil
	case sqlite3.SQLITE_DONE:
		return false, nil
	default:
		return false, s.c.err(rc)
	}
}

// close finalizes the statement.
func (s *rawStmt) close() { sqlite3.Xsqlite3_finalize(s.c.tls, s.st) }

// view is column col's text or blob, in SQLite's memory: valid until the
// next step, or a read of the column as another type.
func (s *rawStmt) view(col int32) []byte {
	p := sqlite3.Xsqlite3_column_text(s.c.tls, s.st, col)
	n := int(sqlite3.Xsqlite3_column_bytes(s.c.tls, s.st, col))
	if n == 0 {
		return nil
	}
	return libc.GoBytes(p, n)
}

// int is column col as an integer.
func (s *rawStmt) int(col int32) int64 { return sqlite3.Xsqlite3_column_int64(s.c.tls, s.st, col) }

// values sets vals to the current row's columns as database/sql scans them
// into an any: int64, float64, string, []byte or nil.
func (s *rawStmt) values(vals []any) {
	tls := s.c.tls
	for i := range vals {
		col := int32(i)
		switch sqlite3.Xsqlite3_column_type(tls, s.st, col) {
		case sqlite3.SQLITE_INTEGER:
			vals[i] = s.int(col)
		case sqlite3.SQLITE_FLOAT:
			vals[i] = sqlite3.Xsqlite3_column_double(tls, s.st, col)
		case sqlite3.SQLITE_TEXT:
			vals[i] = string(s.view(col))
		case sqlite3.SQLITE_BLOB:
			p := sqlite3.Xsqlite3_column_blob(tls, s.st, col)
			b := make([]byte, sqlite3.Xsqlite3_column_bytes(tls, s.st, col))
			if len(b) > 0 {
				copy(b, libc.GoBytes(p, len(b)))
			}
			vals[i] = b
		default:
			vals[i] = nil
		}
	}
}

// want is the type of each column of cols in a well-formed row.
var want = [len(columns) + 1]int32{sqlite3.SQLITE_INTEGER, // id
	sqlite3.SQLITE_TEXT, sqlite3.SQLITE_INTEGER, sqlite3.SQLITE_TEXT, sqlite3.SQLITE_TEXT, sqlite3.SQLITE_INTEGER, // processor, idx, kind, source, seq
	sqlite3.SQLITE_TEXT, sqlite3.SQLITE_INTEGER, sqlite3.SQLITE_TEXT, sqlite3.SQLITE_INTEGER, sqlite3.SQLITE_INTEGER, // instant, epoch, key, offset, n
	sqlite3.SQLITE_TEXT, sqlite3.SQLITE_TEXT, sqlite3.SQLITE_TEXT} // payload, detail, reads

// row decodes the current row of cols as scanner.decode does, without
// boxing its values: a row whose columns are of the types want says and
// whose values pass every check decode makes. Any other row is decoded by
// decode itself, which says what is wrong with it.
func (s *rawStmt) row(sc *scanner, path string) (id int64, e store.Entry, p *store.Problem) {
	for col, t := range want {
		if sqlite3.Xsqlite3_column_type(s.c.tls, s.st, int32(col)) != t {
			return s.decode(sc, path)
		}
	}
	id = s.int(0)
	e.Processor = sc.processor.of(s.view(1))
	e.Index = s.int(2)
	k, ok := kindOf(s.view(3))
	if !ok {
		return s.decode(sc, path)
	}
	e.Kind = k
	e.Source = sc.source.of(s.view(4))
	e.Seq = s.int(5)
	if e.Instant, ok = store.ParseInstant(sc.scratch(s.view(6))); !ok {
		return s.decode(sc, path)
	}
	e.Epoch = s.int(7)
	e.Key = string(s.view(8))
	e.Offset = s.int(9)
	e.N = s.int(10)
	if v := s.view(11); len(v) > 0 {
		b := append([]byte(nil), v...)
		decoded, plain, err := store.ParsePayload(sc.format, b)
		if err != nil {
			return s.decode(sc, path)
		}
		if e.Payload = b; !plain {
			e.Payload = decoded
		}
	}
	e.Detail = string(s.view(12))
	if e.Reads, ok = store.ParseReads(sc.scratch(s.view(13))); !ok {
		return s.decode(sc, path)
	}
	if store.Validate(e) != nil {
		return s.decode(sc, path)
	}
	return id, e, nil
}

// decode decodes the current row through scanner.decode.
func (s *rawStmt) decode(sc *scanner, path string) (int64, store.Entry, *store.Problem) {
	s.values(sc.vals[:])
	id, e, p, _ := sc.decode(path)
	return id, e, p
}

// kindOf is the Kind whose name b is.
func kindOf(b []byte) (store.Kind, bool) {
	for _, k := range store.Kinds {
		if string(k) == string(b) {
			return k, true
		}
	}
	return "", false
}

// interned is the last string a column held: a column of repeated values
// (a processor, a source) costs a string only when its value changes.
type interned struct{ last string }

func (i *interned) of(b []byte) string {
	if string(b) != i.last {
		i.last = string(b)
	}
	return i.last
}

// scratch returns a string of b's bytes in sc's buffer, valid until the
// next call: for a parse that keeps none of it.
func (sc *scanner) scratch(b []byte) string {
	sc.buf = append(sc.buf[:0], b...)
	return unsafe.String(unsafe.SliceData(sc.buf), len(sc.buf))
}
