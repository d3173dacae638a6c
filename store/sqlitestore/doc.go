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
// transactions only: an SQLite recording has no torn rows) with its META
// row only, and from then on reads only the rows committed when it was
// opened. It checks them in rowid order with the store's Checker in its
// first pass over them (Streams or Scan, which a replay and explain make),
// or when Problems or Processors are first asked: a replay reads the
// recording once. Rows, Stream (in rowid order) and Streams are streaming
// cursors; Journal is an indexed lookup.
//
// SQLite keeps any value in any column, so a row edited by hand can hold
// text where a number belongs: it is reported as a malformed Problem naming
// its rowid and column.
package sqlitestore
