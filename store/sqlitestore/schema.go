package sqlitestore

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/blackbox-audit/blackbox/store"
)

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
	db, _, recovered, err := openReader(path)
	if err != nil {
		return &store.FileError{Op: "sqlitestore: create", Path: path, Err: err}
	}
	if recovered != "" {
		defer os.RemoveAll(recovered)
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
