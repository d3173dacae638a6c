package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
	"github.com/blackbox-audit/blackbox/store/storetest"
)

// BenchmarkAppend appends one input per op (DELIVERY + INLINE + OUTPUT,
// one Append, one transaction) to a database on disk. Compare its rows/s
// with BenchmarkFloorInsert.
func BenchmarkAppend(b *testing.B) {
	s, err := sqlitestore.Create(filepath.Join(b.TempDir(), "r.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(store.EncodeMeta(store.Meta{Created: storetest.T0}),
		store.Entry{Processor: "p", Index: 1, Kind: store.KindStart}); err != nil {
		b.Fatal(err)
	}
	rows := storetest.Input("p", 1)
	var n int64
	for b.Loop() {
		n++
		rows[0].Index, rows[1].Index, rows[2].Index = 3*n-1, 3*n, 3*n+1
		rows[0].Seq, rows[1].Seq = n, n
		if err := s.Append(rows...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkFloorInsert is the floor of BenchmarkAppend: the same schema
// and pragmas (WAL, synchronous=NORMAL), a bare prepared INSERT of the
// same three rows' column values, one transaction per input.
func BenchmarkFloorInsert(b *testing.B) {
	p := filepath.Join(b.TempDir(), "floor.db")
	db, err := sql.Open("sqlite", "file:"+p+"?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, sqlitestore.Schema); err != nil {
		b.Fatal(err)
	}
	ins, err := conn.PrepareContext(ctx, `INSERT INTO rows (processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	rows := storetest.Input("p", 1)
	var n int64
	for b.Loop() {
		n++
		rows[0].Index, rows[1].Index, rows[2].Index = 3*n-1, 3*n, 3*n+1
		rows[0].Seq, rows[1].Seq = n, n
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			b.Fatal(err)
		}
		for i := range rows {
			e := &rows[i]
			if _, err := ins.ExecContext(ctx, e.Processor, e.Index, string(e.Kind), e.Source, e.Seq,
				store.FormatInstant(e.Instant), e.Epoch, e.Key, e.Offset, e.N, string(e.Payload), e.Detail,
				store.FormatReads(e.Reads)); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

const streamRows = 1_000_000

// BenchmarkStream opens a recording of a million rows and streams one
// processor's rows. heap-MB is the largest growth of the live heap over
// the opening and the iteration.
func BenchmarkStream(b *testing.B) {
	p := filepath.Join(b.TempDir(), "big.db")
	w, err := sqlitestore.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Append(store.EncodeMeta(store.Meta{Created: storetest.T0}),
		store.Entry{Processor: "p", Index: 1, Kind: store.KindStart}); err != nil {
		b.Fatal(err)
	}
	inputs := int64((streamRows - 3) / 3)
	batch := make([]store.Entry, 0, 30000)
	for i := int64(1); i <= inputs; i++ {
		batch = append(batch, storetest.Input("p", i)...)
		if len(batch) == cap(batch) || i == inputs {
			if err := w.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.Append(store.Entry{Processor: "p", Index: 3*inputs + 2, Kind: store.KindEnd, N: inputs}); err != nil {
		b.Fatal(err)
	}
	w.Close()
	fi, _ := os.Stat(p)

	var peak uint64
	var ms runtime.MemStats
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var rows int64
	var openTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := sqlitestore.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		openTime += time.Since(t0)
		sample()
		if ps := s.Problems(); len(ps) != 0 {
			b.Fatal(ps)
		}
		for _, err := range s.Stream("p") {
			if err != nil {
				b.Fatal(err)
			}
			if rows++; rows%100_000 == 0 {
				sample()
			}
		}
		s.Close()
	}
	b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-MB")
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
	b.ReportMetric(openTime.Seconds()/float64(b.N), "open-s/op")
}
