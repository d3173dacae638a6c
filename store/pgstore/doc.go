// Package pgstore is the PostgreSQL backend of store (store.Backend,
// registered as "postgres" for postgres:// and postgresql:// URLs:
// store.Open and store.Create hand it a URL without touching a file). A
// database holds the recordings of a fleet, one a run, named by its run id
// (the URL's run= parameter; NewRunID makes one), in two tables:
// blackbox_runs (a run's lease and description, and run, its integer key)
// and blackbox_rows (its rows: the run's key, id, the row's place in the
// run, and the CSV columns; no foreign key, whose check would cost a
// lookup a row). The schema is
// versioned and embedded (migrations/*.sql, SchemaVersion): the first
// writer applies what is missing, in one transaction under an advisory
// lock; a database whose schema is newer is refused (*VersionError,
// ErrSchemaNewer). docs/FORMAT.md gives the tables.
//
// Create claims a run for one writer: its connection holds the run's
// session-level advisory lock (a second writer is refused at once,
// store.ErrLocked), and the run's row records the generation the writer
// took. Each Append is one transaction in one round trip (a query message
// of two statements: a lease check, prepared once on the writer's
// connection, that counts the rows into the run's row at the writer's
// generation, failing when there is none, and a binary COPY of the rows), so a killed writer leaves a whole batch or none, and
// a stale writer (its run taken over or pruned) appends nothing
// (ErrLeaseLost). A run with rows is never written again
// (store.ErrHoldsRecording). Open reads the rows committed when it
// opened the run, streaming, through a connection pool.
//
// Runs lists a database's runs (blackbox runs), Prune and Delete remove
// runs with their rows, refusing a run whose writer holds it (ErrWriting,
// *WritingError).
//
// Errors are sentinels (ErrSchemaNewer, ErrLeaseLost, ErrRunID,
// ErrWriting) and the store package's, tested with errors.Is; the errors
// of Create, Open and Append are *store.FileError naming the URL.
package pgstore
