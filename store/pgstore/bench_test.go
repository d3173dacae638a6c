package pgstore_test

import (
	"testing"

	"github.com/blackbox-audit/blackbox/internal/pgtest"
	"github.com/blackbox-audit/blackbox/internal/storetest"
)

// benchDB is a database of the package's throwaway server whose sessions
// commit as sqlitestore's synchronous=NORMAL does, for a like-with-like
// figure: synchronous_commit=on, a commit waits for its WAL to be written
// to the operating system (not synced: the server runs with fsync off),
// where pgtest's synchronous_commit=off returns before the write.
func benchDB(b *testing.B) string { return pgtest.Database(b) + "&synchronous_commit=on" }

// BenchmarkAppend appends one input per op (DELIVERY + INLINE + OUTPUT,
// one Append, one transaction) to a run in the package's throwaway server
// (benchDB: compare it with sqlitestore's BenchmarkAppend).
func BenchmarkAppend(b *testing.B) {
	storetest.BenchAppend(b, &backend{db: benchDB(b), runs: map[string]string{}})
}

// BenchmarkAppendBatch appends 100 inputs per Append, as a group commit
// under load does.
func BenchmarkAppendBatch(b *testing.B) {
	storetest.BenchAppendBatch(b, &backend{db: benchDB(b), runs: map[string]string{}}, 100)
}
