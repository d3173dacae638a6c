// Package sqlitestore is the SQLite backend of store (store.Backend,
// registered as "sqlite", the default of store.Create; store.Open picks it
// for a file that begins with SQLite's magic). It stores recordings as SQLite databases
// (modernc.org/sqlite, pure Go, driver "sqlite"), written in WAL mode,
// with one table of rows holding the same logical columns as the CSV store
// plus an id, the row's place in storage order (Schema, docs/FORMAT.md).
// Close folds the write-ahead log into the database and leaves WAL mode: a
// finished recording is one file, and reading it creates nothing beside it.
// A writer killed inside a rollback-journal transaction (that switch out of
// WAL mode) leaves a hot journal (PATH-journal), which a read-only
// connection may not roll back (SQLITE_READONLY_ROLLBACK): Open then copies
// the database with its -journal and -wal files into a temporary directory,
// lets SQLite roll the journal back there and reads the copy, the committed
// rows, until Close removes it. A reader never changes the run's files.
//
// Create starts a new recording (never over a database that holds rows);
// each Append is one transaction of multi-row INSERTs (up to 64 rows a
// statement, each statement prepared once). Open reads
// a recording, possibly one still being written (WAL readers see committed
// transactions only: an SQLite recording has no torn rows) with its META
// row only, and from then on reads only the rows committed when it was
// opened. Its Scan is one streaming cursor in rowid order, which
// store.Recording checks as it goes (a reader's checking pass ends with
// SQLite's own page check); Stream is a cursor over the (processor, idx)
// index (store.StreamSeeker); Journal is an indexed lookup. A reader's
// Scan, the pass of a replay, verify or convert, reads through SQLite's C
// API (modernc.org/sqlite/lib) on a read-only connection of its own that
// is not serialized, rather than through database/sql, whose driver takes
// a mutex for each column it reads: the same rows, decoded the same way,
// in about two thirds of the time. Everything else goes through
// database/sql.
//
// SQLite keeps any value in any column, so a row edited by hand can hold
// text where a number belongs: it is reported as a malformed Problem naming
// its rowid and column.
package sqlitestore
