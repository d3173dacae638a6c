// Package pgtest starts a throwaway PostgreSQL server for the tests of a
// package (internal: test support of this module, not an API).
//
// The first test of a package that needs a server (Need, Database) starts
// one for the whole package; Main, called from the package's TestMain (or
// Stop, after m.Run), stops it when the tests are done: Debian's PostgreSQL
// (initdb, pg_ctl in /usr/lib/postgresql/*/bin, or $PGTEST_BIN) on a new
// temporary directory, listening only on a unix socket in it
// (listen_addresses empty), with fsync, synchronous_commit and
// full_page_writes off: a test server trades durability for speed. Run as
// root, the server runs as the postgres user (PostgreSQL refuses root).
// Database gives each test a database of its own, created empty and
// dropped when the test ends.
//
// A machine where no server can be started skips the tests that need one
// (Database, Server call t.Skip with the reason), except under CI=true,
// where they fail: CI must not pass by skipping them.
package pgtest
