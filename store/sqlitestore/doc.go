// Package sqlitestore stores recordings as SQLite databases
// (modernc.org/sqlite, pure Go, driver "sqlite"), written in WAL mode,
// with one table of rows holding the same logical columns as the CSV store
// plus an id, the row's place in storage order (Schema, docs/FORMAT.md).
// Close folds the write-ahead log into the database and leaves WAL mode: a
// finished recording is one file, and reading it creates nothing beside it.
//
// Create starts a new recording (never over a database that holds rows);
// each Append is one transaction of one prepared INSERT per row. Open reads
// a recording, possibly one still being written (WAL readers see committed
// transactions only: an SQLite recording has no torn rows), checks it in
// rowid order with the store's Checker, and from then on reads only the
// rows committed when it was opened. Rows and Stream are streaming cursors;
// Journal is an indexed lookup.
//
// SQLite keeps any value in any column, so a row edited by hand can hold
// text where a number belongs: it is reported as a malformed Problem naming
// its rowid and column.
package sqlitestore
