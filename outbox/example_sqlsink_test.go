package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // database/sql's driver "sqlite"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
)

// sqlSink is a core.Transactional sink: each batch's outputs become rows
// of the table outputs, written in one transaction with the batch's
// number in the table watermark. After a crash the outbox asks
// Delivered and delivers the interrupted batch again only if the
// transaction did not commit: every output exactly once.
type sqlSink struct{ db *sql.DB }

func newSQLSink(db *sql.DB) (*sqlSink, error) {
	_, err := db.Exec(`
		CREATE TABLE IF NOT EXISTS outputs (stream TEXT NOT NULL, key TEXT NOT NULL, sink TEXT NOT NULL,
			output TEXT NOT NULL, PRIMARY KEY (stream, key));
		CREATE TABLE IF NOT EXISTS watermark (id INTEGER PRIMARY KEY CHECK (id = 1), batch INTEGER NOT NULL);
		INSERT OR IGNORE INTO watermark (id, batch) VALUES (1, 0);`)
	return &sqlSink{db: db}, err
}

// Deliver writes the batch's outputs and its number in one transaction.
func (s *sqlSink) Deliver(batch int64, effects []core.Effect) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit: does nothing
	for _, e := range effects {
		key, err := json.Marshal(e.Key) // with the stream, names the output for good
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO outputs (stream, key, sink, output) VALUES (?, ?, ?, ?)`,
			e.Stream, string(key), e.Sink, string(e.Payload)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`UPDATE watermark SET batch = ? WHERE id = 1`, batch); err != nil {
		return err
	}
	return tx.Commit()
}

// Delivered is the number of the last batch committed (0: none).
func (s *sqlSink) Delivered() (batch int64, err error) {
	err = s.db.QueryRow(`SELECT batch FROM watermark WHERE id = 1`).Scan(&batch)
	return batch, err
}

// A sink of your own that is exactly once: a SQL table written in the
// same transaction as its watermark (core.Transactional). Two runs: the
// second one's outbox finds nothing left to deliver, then delivers its own
// run's outputs.
func Example_sqlSink() {
	dir, err := os.MkdirTemp("", "outbox-sql")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "outputs.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	sink, err := newSQLSink(db)
	if err != nil {
		panic(err)
	}
	log := memsource.NewLog("a", "b")
	log.Close() // bounded: a run ends once it processed what the log holds
	for i, more := range [][]any{nil, {"c"}} {
		log.Append(more...) // the second run reads from the log's committed offset
		box, err := outbox.Open(outbox.Config{Marks: filepath.Join(dir, "outputs.outbox"), Sink: sink,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			panic(err)
		}
		recordRun(filepath.Join(dir, fmt.Sprintf("run%d.csv", i+1)), log, box, time.Duration(i)*time.Hour)
		st := box.Status()
		fmt.Printf("run %d: %s, %d delivered\n", i+1, st.Guarantee, st.Delivered)
	}

	rows, err := db.Query(`SELECT key, output FROM outputs ORDER BY rowid`)
	if err != nil {
		panic(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, output string
		if err := rows.Scan(&key, &output); err != nil {
			panic(err)
		}
		fmt.Println(key, output)
	}
	if err := rows.Err(); err != nil {
		panic(err)
	}
	// Output:
	// run 1: exactly-once, 2 delivered
	// run 2: exactly-once, 1 delivered
	// {"feed":"in","epoch":1,"position":{"key":"","offset":1},"index":1} "A"
	// {"feed":"in","epoch":1,"position":{"key":"","offset":2},"index":1} "B"
	// {"feed":"in","epoch":1,"position":{"key":"","offset":3},"index":1} "C"
}

// recordRun records a run of an upper-casing processor over the log to
// the recording at path, delivering through box, and closes box.
func recordRun(path string, log *memsource.Log, box *outbox.Outbox, later time.Duration) {
	ctx := context.Background()
	w, err := store.Create(path, "")
	if err != nil {
		panic(err)
	}
	upper := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		c.Emit("out", strings.ToUpper(ev.(string)))
		return nil
	})
	clock := core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(later), time.Second)
	run, err := recorder.Start(ctx, recorder.RunConfig{
		Store:         w,
		Feed:          engine.FeedConfig{Name: "in", Source: log.Source(), QueueSize: 8},
		Processors:    []recorder.Processor{{Name: "upper", App: core.App{Name: "upper"}, Processor: upper}},
		Clock:         clock,
		RecorderClock: clock,
		Outbox:        box,
		Path:          path,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	if err := run.Wait(ctx, recorder.WaitConfig{Stop: box.Failed()}); err != nil {
		panic(err)
	}
	if stopErr, recErr := run.Stop(ctx); stopErr != nil || recErr != nil {
		panic(fmt.Sprint(stopErr, recErr))
	}
	if err := errors.Join(w.Close(), box.Close()); err != nil {
		panic(err)
	}
}
