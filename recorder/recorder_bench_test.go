package recorder_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/pgtest"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
	"github.com/blackbox-audit/blackbox/store/pgstore"
	"github.com/blackbox-audit/blackbox/store/sqlitestore"
)

// discard is a writer that keeps nothing: the recorder's own cost.
type discard struct{}

func (discard) Append(...store.Entry) error { return nil }
func (discard) Close() error                { return nil }
func (discard) Sync() error                 { return nil }

// benchStore opens a fresh writer for one benchmark run; the benchmark
// closes it after the recorder. A store on disk has a floor: the time a
// bare writer of the format takes to write the same rows in the same
// batches (recordFloors).
type benchStore struct {
	name    string
	journal bool // journal the feed (INDEXED rows) instead of INLINE rows
	open    func(b *testing.B) store.Writer
	floor   func(b *testing.B, batches []int) time.Duration
}

var benchStores = []benchStore{
	{name: "discard", open: func(*testing.B) store.Writer { return discard{} }},
	{name: "discard-journal", journal: true, open: func(*testing.B) store.Writer { return discard{} }},
	{name: "csv", open: func(b *testing.B) store.Writer {
		w, err := csvstore.Create(filepath.Join(b.TempDir(), "r.csv"))
		if err != nil {
			b.Fatal(err)
		}
		return w
	}, floor: csvFloor},
	{name: "sqlite", open: func(b *testing.B) store.Writer {
		w, err := sqlitestore.Create(filepath.Join(b.TempDir(), "r.db"))
		if err != nil {
			b.Fatal(err)
		}
		return w
	}, floor: sqliteFloor},
	// A run in the package's throwaway PostgreSQL server: against the
	// SQLite recording of the same input (bench/report), no floor. Like
	// with like: the session's synchronous_commit=on makes each commit
	// wait for its WAL to be written to the operating system (the server
	// runs with fsync off, so not synced), as an SQLite commit with
	// synchronous=NORMAL writes its WAL frames and does not sync them
	// (pgtest's synchronous_commit=off would return before the write).
	{name: "postgres", open: func(b *testing.B) store.Writer {
		u, err := pgstore.WithRun(pgtest.Database(b)+"&synchronous_commit=on", "bench")
		if err != nil {
			b.Fatal(err)
		}
		w, err := pgstore.Create(u)
		if err != nil {
			b.Fatal(err)
		}
		return w
	}},
}

// BenchmarkThroughput pushes b.N in-memory items through a small processor
// (one clock reading, one output per item), end to end: from the first
// publish to the last item handled (items/s). Run 1M items with
//
//	go test -run '^$' -bench Throughput -benchtime 1000000x ./recorder/
//
// Recording into a store on disk (record/csv, record/sqlite) it also
// reports rows/s, the input and output rows written over the time from the
// first publish to the engine's Stop, and its floor, floor-rows/s, measured
// in the same run just after: the same rows (recordFloorRows) written in
// the same batches as the recorder's Appends (one write, or one
// transaction, per batch) by encoding/csv into a file, or by a bare
// multi-row INSERT per batch into the recording schema
// (internal/storetest.FloorConn).
func BenchmarkThroughput(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchThroughput(b, nil) })
	for _, s := range benchStores {
		b.Run("record/"+s.name, func(b *testing.B) { benchThroughput(b, &s) })
	}
}

func benchThroughput(b *testing.B, s *benchStore) {
	n := int64(b.N)
	var handled atomic.Int64
	fin := make(chan struct{})
	proc := doubler(func() {
		if handled.Add(1) == n {
			close(fin)
		}
	})
	feed := engine.FeedConfig{Name: "in", Policy: engine.BlockWithDeadline(time.Minute), QueueSize: 4096}
	cfg := engine.Config{
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: "p", Processor: proc}}}},
		Logger: slog.New(slog.DiscardHandler),
	}
	var rec *recorder.Recorder
	var w store.Writer
	var batches *batchLog
	if s != nil {
		w = s.open(b)
		if s.floor != nil {
			batches = &batchLog{Writer: w}
			w = batches
		}
		var err error
		if rec, err = recorder.New(w, recorder.Options{Apps: map[string]string{"p": "doubler"}}); err != nil {
			b.Fatal(err)
		}
		cfg.Observer = rec.Observer()
		if s.journal {
			feed.Journal = rec.Journal()
		}
	}
	cfg.Feeds = []engine.FeedConfig{feed}
	e, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	f := e.Feed("in")
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if err := f.Publish(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	<-fin
	elapsed := time.Since(start)
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	recorded := time.Since(start)
	b.StopTimer()
	if rec != nil {
		if err := rec.Close(); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
	if batches != nil {
		rows := 0
		for _, n := range batches.sizes {
			rows += n
		}
		if rows != 2*b.N {
			b.Fatalf("%d input and output rows written, want %d", rows, 2*b.N)
		}
		b.ReportMetric(float64(rows)/recorded.Seconds(), "rows/s")
		b.ReportMetric(float64(rows)/s.floor(b, batches.sizes).Seconds(), "floor-rows/s")
		b.ReportMetric(float64(b.N)/float64(len(batches.sizes)), "inputs/append")
	}
}

// doubler is the benchmarks' processor: one clock reading, and twice its
// int item to sink "out".
func doubler(handled func()) core.Processor {
	return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Now()
		c.Emit("out", ev.(int)*2)
		handled()
		return nil
	})
}

// batchLog is a writer noting how many rows each Append of input rows
// (its first row an input) holds. Used by one recorder: not safe for
// concurrent use, as store.Writer.
type batchLog struct {
	store.Writer
	sizes []int
}

func (w *batchLog) Append(rows ...store.Entry) error {
	if len(rows) > 0 && rows[0].Kind.IsInput() {
		w.sizes = append(w.sizes, len(rows))
	}
	return w.Writer.Append(rows...)
}

// recordFloorRows are the rows the recorder writes for the i-th item (from
// 0) the benchmark publishes, at instant at: processor p's INLINE row of
// feed "in" (its one clock reading at) and its OUTPUT row.
func recordFloorRows(i int, at time.Time) [2]store.Entry {
	n := int64(i)
	return [2]store.Entry{
		{Processor: "p", Index: 2 + 2*n, Kind: store.KindInline, Source: "in", Seq: n + 1, Instant: at, N: 1,
			Payload: strconv.AppendInt(nil, n, 10), Reads: []time.Time{at}},
		{Processor: "p", Index: 3 + 2*n, Kind: store.KindOutput, Source: "out", Seq: 1, Payload: strconv.AppendInt(nil, 2*n, 10)},
	}
}

// csvFloor writes the rows of the items in batches of batches[k] rows,
// each batch with encoding/csv into a buffer and one write to a file (no
// fsync: the recorder's policy), and returns the time it took.
func csvFloor(b *testing.B, batches []int) time.Duration {
	fl := storetest.FloorCSV(b, filepath.Join(b.TempDir(), "floor.csv"), csvstore.Header)
	start := time.Now()
	item := 0
	var batch []store.Entry
	for _, n := range batches {
		batch = batch[:0]
		for range n / 2 {
			rows := recordFloorRows(item, time.Now())
			batch = append(batch, rows[:]...)
			item++
		}
		fl.Write(batch)
	}
	return time.Since(start)
}

// sqliteFloor inserts the rows of the items in batches of batches[k] rows,
// one transaction each, with a bare multi-row INSERT of the batch into the
// recording schema (storetest.FloorConn: one statement for each number of
// rows, prepared once; the store's pragmas: WAL, synchronous=NORMAL,
// temp_store=MEMORY), and returns the time it took.
func sqliteFloor(b *testing.B, batches []int) time.Duration {
	fc := storetest.FloorDB(b, filepath.Join(b.TempDir(), "floor.db"), sqlitestore.Schema)
	start := time.Now()
	item := 0
	var batch []store.Entry
	for _, n := range batches {
		batch = batch[:0]
		for range n / 2 {
			rows := recordFloorRows(item, time.Now())
			batch = append(batch, rows[:]...)
			item++
		}
		fc.Insert(batch)
	}
	return time.Since(start)
}

// TestTheRecordingFloorWritesTheRowsTheRecorderWrites: the rows the
// floors of BenchmarkThroughput write are the recorder's own for the same
// items, but for their instants.
func TestTheRecordingFloorWritesTheRowsTheRecorderWrites(t *testing.T) {
	w := &fakeWriter{}
	rec, _ := run(t, w, recorder.Options{}, func(*recorder.Recorder) engine.Config {
		return engine.Config{
			Feeds:  []engine.FeedConfig{listFeed("in", nil, 0, 1, 2)},
			Groups: []engine.GroupConfig{group("g", []string{"in"}, 1, pc("p", doubler(func() {})))},
		}
	})
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	var got, want []store.Entry
	for _, e := range w.stream("p") {
		if e.Kind == store.KindInline || e.Kind == store.KindOutput {
			got = append(got, e)
		}
	}
	for i := range 3 {
		rows := recordFloorRows(i, time.Time{})
		want = append(want, rows[:]...)
	}
	ignoreInstants := cmpopts.IgnoreFields(store.Entry{}, "Instant", "Reads")
	if diff := cmp.Diff(want, got, ignoreInstants, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("rows (-floor +recorder):\n%s", diff)
	}
	for _, e := range got {
		if e.Kind == store.KindInline && len(e.Reads) != 1 {
			t.Errorf("%v: %d clock readings, the floor writes 1", e, len(e.Reads))
		}
	}
}
