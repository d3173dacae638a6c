package storetest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/store"
)

// Renumber makes rows, as Input returns them, the n-th input of its
// stream: benchmarks append one slice over and over without building it
// again.
func Renumber(rows []store.Entry, n int64) {
	rows[0].Index, rows[1].Index, rows[2].Index = 3*n-1, 3*n, 3*n+1
	rows[0].Seq, rows[1].Seq = n, n
}

// head is the start of the benchmarks' recordings: META and processor p's
// START.
func head() []store.Entry {
	return []store.Entry{store.EncodeMeta(store.Meta{Created: T0, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart}}
}

// BenchAppend appends one input per op (DELIVERY + INLINE + OUTPUT, one
// Append) to a new recording of be's on disk and reports rows/s.
func BenchAppend(b *testing.B, be Backend) {
	s, err := be.Create(filepath.Join(b.TempDir(), "recording"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(head()...); err != nil {
		b.Fatal(err)
	}
	rows := Input("p", 1)
	var n int64
	for b.Loop() {
		n++
		Renumber(rows, n)
		if err := s.Append(rows...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

// BenchAppendBatch appends batch inputs per op (DELIVERY + INLINE +
// OUTPUT each, one Append: a group commit's batch) to a new recording of
// be's and reports rows/s.
func BenchAppendBatch(b *testing.B, be Backend, batch int) {
	s, err := be.Create(filepath.Join(b.TempDir(), "recording"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(head()...); err != nil {
		b.Fatal(err)
	}
	rows := make([]store.Entry, 3*batch)
	var n int64
	for b.Loop() {
		for i := range batch {
			n++
			copy(rows[3*i:], Input("p", n))
		}
		if err := s.Append(rows...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(3*n)/b.Elapsed().Seconds(), "rows/s")
}

// streamRows is the size of BenchStream's recording.
const streamRows = 1_000_000

// BenchStream writes a recording of StreamRows rows with be (batch inputs
// to an Append), then, per op, opens it and streams its processor's rows.
// It reports rows/s, the file's size, the time to open (the integrity scan
// included) and heap-MB: the largest growth of the live heap over the
// opening and the iteration, which stays flat whatever the length of the
// recording.
func BenchStream(b *testing.B, be Backend, batch int) {
	p := filepath.Join(b.TempDir(), "big")
	w, err := be.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Append(head()...); err != nil {
		b.Fatal(err)
	}
	inputs := int64((streamRows - 3) / 3)
	rows := make([]store.Entry, 0, 3*batch)
	for i := int64(1); i <= inputs; i++ {
		rows = append(rows, Input("p", i)...)
		if len(rows) == cap(rows) || i == inputs {
			if err := w.Append(rows...); err != nil {
				b.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if err := w.Append(store.Entry{Processor: "p", Index: 3*inputs + 2, Kind: store.KindEnd, N: inputs}); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}

	var peak uint64
	var ms runtime.MemStats
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var n int64
	var openTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := be.Open(p)
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
			if n++; n%100_000 == 0 {
				sample()
			}
		}
		s.Close()
	}
	b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-MB")
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
	b.ReportMetric(openTime.Seconds()/float64(b.N), "open-s/op")
}

// csvFields sets fields (13 of them) to e's columns as the floors of the
// CSV recording benchmarks write them with encoding/csv: formatted the
// way the CSV store formats them, the payload's bytes as they are.
func csvFields(e *store.Entry, fields []string) {
	fields[0] = e.Processor
	fields[1] = strconv.FormatInt(e.Index, 10)
	fields[2] = string(e.Kind)
	fields[3] = e.Source
	fields[4] = strconv.FormatInt(e.Seq, 10)
	fields[5] = store.FormatInstant(e.Instant)
	fields[6] = strconv.FormatInt(e.Epoch, 10)
	fields[7] = e.Key
	fields[8] = strconv.FormatInt(e.Offset, 10)
	fields[9] = strconv.FormatInt(e.N, 10)
	fields[10] = string(e.Payload)
	fields[11] = e.Detail
	fields[12] = store.FormatReads(e.Reads)
}

// FloorInsert is the bare INSERT of the SQLite floors for n rows: every
// column of the recording schema's rows table but id, n rows of parameters
// in insertArgs' order.
func FloorInsert(n int) string {
	return `INSERT INTO rows (processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads) VALUES ` +
		strings.TrimSuffix(strings.Repeat(`(?,?,?,?,?,?,?,?,?,?,?,?,?),`, n), ",")
}

// FloorChunk is the most rows one statement of the SQLite floors inserts:
// as many as SQLite's limit on parameters (32,766 in modernc's build)
// allows, 13 a row.
const FloorChunk = 32766 / 13

// insertArgs appends e's column values for FloorInsert to args.
func insertArgs(args []any, e *store.Entry) []any {
	return append(args, e.Processor, e.Index, string(e.Kind), e.Source, e.Seq, store.FormatInstant(e.Instant), e.Epoch, e.Key,
		e.Offset, e.N, string(e.Payload), e.Detail, store.FormatReads(e.Reads))
}

// WriteLong writes at path, with be, a recording of n inputs (Input: a
// DELIVERY, an INLINE input and its OUTPUT each) of one processor stream
// p of app ledger, a COMMIT row of feed orders after every 1,000th, ended
// cleanly: the long recording of the size bars of explain and report. It
// appends in batches, so that its memory stays small whatever n.
func WriteLong(tb testing.TB, be Backend, path string, n int64) {
	tb.Helper()
	s, err := be.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	rows := []store.Entry{store.EncodeMeta(store.Meta{Created: T0, Apps: map[string]string{"p": "ledger"}, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart, Instant: T0}}
	const batch = 2000
	for i := int64(1); i <= n; i++ {
		rows = append(rows, Input("p", i)...)
		if i%1000 == 0 {
			rows = append(rows, store.Entry{Index: i/1000 + 1, Kind: store.KindCommit, Source: "orders", Seq: i, Epoch: 1, Offset: 64 * i})
		}
		if len(rows) >= 3*batch || i == n {
			if i == n {
				rows = append(rows, store.Entry{Processor: "p", Index: 3*n + 2, Kind: store.KindEnd, N: n, Instant: T0})
			}
			if err := s.Append(rows...); err != nil {
				tb.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
}

// FloorDB opens a new SQLite database at path with the recording store's
// pragmas (WAL, synchronous=NORMAL, temp_store=MEMORY) and creates schema
// in it (the store's Schema): the connection of the SQLite floors, closed
// at the end of the test. The caller has the "sqlite" driver registered
// (it imports the SQLite store).
func FloorDB(tb testing.TB, path, schema string) *FloorConn {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_journal_mode=WAL&_synchronous=NORMAL&_pragma=temp_store(MEMORY)&_busy_timeout=10000")
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		tb.Fatal(err)
	}
	fc := &FloorConn{tb: tb, conn: conn, stmts: map[int]*sql.Stmt{}}
	tb.Cleanup(func() {
		for _, st := range fc.stmts {
			st.Close()
		}
		conn.Close()
		db.Close()
	})
	if _, err := conn.ExecContext(ctx, schema); err != nil {
		tb.Fatal(err)
	}
	return fc
}

// FloorConn is the connection of an SQLite floor and its INSERT
// statements, one for each number of rows it has inserted with one
// statement, prepared on first use. Not safe for concurrent use.
type FloorConn struct {
	tb    testing.TB
	conn  *sql.Conn
	stmts map[int]*sql.Stmt
	args  []any
}

// Insert inserts rows in one transaction, with one multi-row INSERT
// (FloorInsert) for every FloorChunk rows: one for a batch of up to
// FloorChunk rows.
func (fc *FloorConn) Insert(rows []store.Entry) {
	ctx := context.Background()
	if _, err := fc.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		fc.tb.Fatal(err)
	}
	for len(rows) > 0 {
		n := min(len(rows), FloorChunk)
		st := fc.stmts[n]
		if st == nil {
			var err error
			if st, err = fc.conn.PrepareContext(ctx, FloorInsert(n)); err != nil {
				fc.tb.Fatal(err)
			}
			fc.stmts[n] = st
		}
		fc.args = fc.args[:0]
		for i := range rows[:n] {
			fc.args = insertArgs(fc.args, &rows[i])
		}
		if _, err := st.ExecContext(ctx, fc.args...); err != nil {
			fc.tb.Fatal(err)
		}
		rows = rows[n:]
	}
	if _, err := fc.conn.ExecContext(ctx, "COMMIT"); err != nil {
		fc.tb.Fatal(err)
	}
}

// FloorCSV creates a CSV file at path with header as its first line: the
// file of the CSV floors, which write rows with encoding/csv (CSVFields),
// one write per batch, no fsync (the recorder's policy). Closed at the end
// of the test. Not safe for concurrent use.
func FloorCSV(tb testing.TB, path, header string) *CSVFloor {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	fl := &CSVFloor{tb: tb, f: f, fields: make([]string, 13)}
	fl.w = csv.NewWriter(&fl.buf)
	if _, err := f.WriteString(header + "\n"); err != nil {
		tb.Fatal(err)
	}
	return fl
}

// CSVFloor is a CSV floor's file and encoder.
type CSVFloor struct {
	tb     testing.TB
	f      *os.File
	buf    bytes.Buffer
	w      *csv.Writer
	fields []string
}

// Write writes rows with encoding/csv and one write call.
func (fl *CSVFloor) Write(rows []store.Entry) {
	fl.buf.Reset()
	for i := range rows {
		csvFields(&rows[i], fl.fields)
		if err := fl.w.Write(fl.fields); err != nil {
			fl.tb.Fatal(err)
		}
	}
	fl.w.Flush()
	if _, err := fl.f.Write(fl.buf.Bytes()); err != nil {
		fl.tb.Fatal(err)
	}
}
