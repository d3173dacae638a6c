package recorder_test

import (
	"testing"

	"github.com/blackbox-audit/blackbox/internal/pgtest"
)

// TestMain stops the PostgreSQL server a benchmark of a PostgreSQL
// recording started (pgtest: none unless one ran).
func TestMain(m *testing.M) { pgtest.Main(m) }
