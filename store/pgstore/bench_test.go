package pgstore_test

import (
	"testing"

	"github.com/blackbox-audit/blackbox/internal/pgtest"
	"github.com/blackbox-audit/blackbox/internal/storetest"
)

// BenchmarkAppend appends one input per op (DELIVERY + INLINE + OUTPUT,
// one Append, one transaction) to a run in the package's throwaway server
// (fsync off: compare it with sqlitestore's BenchmarkAppend, whose
// synchronous=NORMAL does not fsync a commit either).
func BenchmarkAppend(b *testing.B) {
	storetest.BenchAppend(b, &backend{db: pgtest.Database(b), runs: map[string]string{}})
}

// BenchmarkAppendBatch appends 100 inputs per Append, as a group commit
// under load does.
func BenchmarkAppendBatch(b *testing.B) {
	storetest.BenchAppendBatch(b, &backend{db: pgtest.Database(b), runs: map[string]string{}}, 100)
}
