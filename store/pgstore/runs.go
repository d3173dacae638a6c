package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Run is a run as the database lists it (Runs): its blackbox_runs row and
// what its rows hold.
type Run struct {
	ID     string `json:"run"`
	Member string `json:"member"`
	Group  string `json:"group"`
	// Started is when its writer claimed it; Ended when its writer closed
	// it (zero: never: killed, or still writing).
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Writing: its writer holds the run's lock now.
	Writing bool  `json:"writing"`
	Rows    int64 `json:"rows"`
	// Feeds are the sources of its DELIVERY and INLINE rows, sorted;
	// Inputs counts its input rows (INDEXED, INLINE, TIMER: each
	// processor's).
	Feeds  []string `json:"feeds"`
	Inputs int64    `json:"inputs"`
}

// runLocked is true when a session holds the run's writer lock (the
// advisory lock of runLockSQL), read from pg_locks without taking it.
const runLocked = `EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('blackbox run ' || r.run_id, 0) AND l.objsubid = 1)`

// Runs lists the runs of the database at url (a postgres:// URL; its run
// parameter, if any, is ignored) in the order they started. A database
// blackbox never wrote to holds none.
func Runs(ctx context.Context, url string) ([]Run, error) {
	loc, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	c, err := pgx.Connect(ctx, loc.Conn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: runs: %w", err)
	}
	defer c.Close(ctx)
	v, err := readVersion(ctx, c)
	if err != nil || v == 0 {
		return nil, err
	}
	rs, err := c.Query(ctx, `SELECT r.run_id, r.member, r.grp, r.started, r.ended, `+runLocked+`, r.nrows,
	coalesce((SELECT array_agg(DISTINCT source ORDER BY source) FROM blackbox_rows w WHERE w.run = r.run AND w.kind IN ('DELIVERY', 'INLINE')), '{}'),
	(SELECT count(*) FROM blackbox_rows w WHERE w.run = r.run AND w.kind IN ('INDEXED', 'INLINE', 'TIMER'))
FROM blackbox_runs r ORDER BY r.started, r.run_id`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: runs: %w", err)
	}
	runs, err := pgx.CollectRows(rs, func(row pgx.CollectableRow) (Run, error) {
		var r Run
		var ended *time.Time
		err := row.Scan(&r.ID, &r.Member, &r.Group, &r.Started, &ended, &r.Writing, &r.Rows, &r.Feeds, &r.Inputs)
		if ended != nil {
			r.Ended = ended.UTC()
		}
		r.Started = r.Started.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: runs: %w", err)
	}
	return runs, nil
}

// WritingError is Prune's refusal of runs still being written: it names
// them and unwraps to ErrWriting.
type WritingError struct{ Runs []string }

func (e *WritingError) Error() string {
	return fmt.Sprintf("%v: %q (its writer holds it; prune it once it has stopped)", ErrWriting, e.Runs)
}

// Unwrap returns ErrWriting.
func (e *WritingError) Unwrap() error { return ErrWriting }

// Prune deletes, in one transaction, every run of the database at url that
// started before before, with its rows, and returns their ids. It takes
// each run's writer lock for the transaction first: when a run is being
// written it deletes nothing and returns a *WritingError naming the runs
// being written. A writer that lost its lock another way (a stale writer)
// finds its lease row gone and can append nothing (ErrLeaseLost).
func Prune(ctx context.Context, url string, before time.Time) ([]string, error) {
	loc, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	c, err := pgx.Connect(ctx, loc.Conn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: prune: %w", err)
	}
	defer c.Close(ctx)
	v, err := readVersion(ctx, c)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		return nil, nil
	}
	var pruned []string
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		rs, err := tx.Query(ctx, `SELECT run_id, pg_try_advisory_xact_lock(hashtextextended('blackbox run ' || run_id, 0))
FROM blackbox_runs WHERE started < $1 ORDER BY started, run_id FOR UPDATE`, before)
		if err != nil {
			return err
		}
		var writing []string
		for rs.Next() {
			var id string
			var locked bool
			if err := rs.Scan(&id, &locked); err != nil {
				return err
			}
			if !locked {
				writing = append(writing, id)
			}
			pruned = append(pruned, id)
		}
		if err := rs.Err(); err != nil {
			return err
		}
		if len(writing) > 0 {
			return &WritingError{Runs: writing}
		}
		_, err = tx.Exec(ctx, deleteRunsSQL, pruned)
		return err
	})
	var we *WritingError
	if errors.As(err, &we) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: prune: %w", err)
	}
	return pruned, nil
}

// Delete deletes the run of url (a URL with a run id) with its rows: a
// run the database does not hold is no error. It refuses, with a
// *WritingError and deleting nothing, a run whose writer holds it.
func Delete(ctx context.Context, url string) error {
	loc, err := ParseURL(url)
	if err == nil {
		err = checkRunID(loc.Run)
	}
	if err != nil {
		return err
	}
	c, err := pgx.Connect(ctx, loc.Conn)
	if err != nil {
		return fmt.Errorf("pgstore: delete: %w", err)
	}
	defer c.Close(ctx)
	if v, err := readVersion(ctx, c); err != nil || v == 0 {
		return err
	}
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('blackbox run ' || $1, 0))`, loc.Run).Scan(&locked); err != nil {
			return err
		}
		if !locked {
			return &WritingError{Runs: []string{loc.Run}}
		}
		_, err := tx.Exec(ctx, deleteRunsSQL, []string{loc.Run})
		return err
	})
}

// deleteRunsSQL deletes the runs whose ids are in $1 and their rows (the
// rows hold no foreign key to cascade by: the schema).
const deleteRunsSQL = `WITH gone AS (DELETE FROM blackbox_runs WHERE run_id = ANY($1) RETURNING run)
DELETE FROM blackbox_rows WHERE run IN (SELECT run FROM gone)`
