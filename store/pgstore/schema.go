package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one step of the schema: the statements that take a
// database from version Version-1 to Version.
type migration struct {
	Version int
	SQL     string
}

// migrations returns the embedded migrations in version order: the files
// migrations/NNNN_name.sql, numbered from 1 without a hole.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var ms []migration
	for i, name := range names {
		num, _, _ := strings.Cut(path.Base(name), "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("pgstore: migration %s: want number %04d", name, i+1)
		}
		b, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{Version: v, SQL: string(b)})
	}
	return ms, nil
}

// SchemaVersion is the version of the schema this build writes and reads:
// the number of its embedded migrations.
var SchemaVersion = func() int {
	ms, err := migrations()
	if err != nil {
		panic(err) // the embedded files are part of the build: a test catches this
	}
	return len(ms)
}()

// VersionError is the refusal of a database whose schema is newer than
// this build's (written by a newer blackbox): it unwraps to ErrSchemaNewer.
// It is immutable and safe to share.
type VersionError struct {
	Database int // the database's schema version
	Build    int // this build's (SchemaVersion)
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("%v: the database's schema is version %d, this build's is version %d (upgrade blackbox)", ErrSchemaNewer, e.Database, e.Build)
}

// Unwrap returns ErrSchemaNewer.
func (e *VersionError) Unwrap() error { return ErrSchemaNewer }

// schemaLockKey is the key of the transaction-level advisory lock that
// serialises migrations of one database.
const schemaLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('blackbox schema', 0))`

// migrate brings the database to SchemaVersion, in one transaction
// serialised with other writers' (an advisory lock): it creates the
// version table blackbox_schema and applies the missing migrations,
// recording each. A database at a newer version is refused with a
// *VersionError and left as it is.
func migrate(ctx context.Context, c *pgx.Conn) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, schemaLockSQL); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS blackbox_schema (
	version integer     PRIMARY KEY,
	applied timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM blackbox_schema`).Scan(&have); err != nil {
			return err
		}
		if have > len(ms) {
			return &VersionError{Database: have, Build: len(ms)}
		}
		for _, m := range ms[have:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("pgstore: migration %d: %w", m.Version, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO blackbox_schema (version) VALUES ($1)`, m.Version); err != nil {
				return err
			}
		}
		return nil
	})
}

// readVersion returns the schema version of a database, for a reader, which
// never changes it: 0 for a database blackbox never wrote to. A newer
// version than this build's is a *VersionError; an older one (a database
// no writer of this build has opened yet) is read as it is only when it is
// this build's: otherwise errOldSchema.
func readVersion(ctx context.Context, q querier) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('blackbox_schema') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var have int
	if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM blackbox_schema`).Scan(&have); err != nil {
		return 0, err
	}
	switch {
	case have > SchemaVersion:
		return have, &VersionError{Database: have, Build: SchemaVersion}
	case have < SchemaVersion && have > 0:
		return have, fmt.Errorf("%w: the database's schema is version %d, this build reads version %d: a writer of this build (run, convert) migrates it", errOldSchema, have, SchemaVersion)
	}
	return have, nil
}

var errOldSchema = errors.New("pgstore: database schema is older than this build's")

// querier is what readVersion needs of a connection or a pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
