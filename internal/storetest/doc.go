// Package storetest is the conformance suite every recording backend
// passes (internal: test code of this module, not an API):
// Run(t, backend) checks round trips of every kind and field, the journal
// cursor, the integrity Problems of damaged recordings (through the
// backend's Corrupter: the hook a Backend implements to be damaged; the
// cases it cannot express are skipped), read-only and closed stores, Create's refusal of an
// existing recording, the refusal of names with line breaks, Copy, and
// readers running while a writer appends.
//
// Recording is the fixture the suite writes: a complete recording that uses
// every kind but FAILED and every field (its instants: T0 ...); the suite
// also checks the same with a FAILED row, whose one problem is that row's
// (a recorded failure ends what its stream proves); Input builds the rows
// of one input for benchmarks. BenchAppend and BenchStream are the stores'
// benchmarks, run by each backend's package against its own files, beside
// their floors (FloorCSV returns a *CSVFloor, FloorDB a *FloorConn). CSV
// and SQLite are the file
// stores as Backends; Reopen copies a recording into a new file of one and
// opens it, for tests that read the same rows from every store.
// CheckFailedFirstAppend checks what a first Append that failed leaves, for
// the suite's case of it and a backend's own.
package storetest
