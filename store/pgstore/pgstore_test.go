package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/blackbox-audit/blackbox/internal/pgtest"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/pgstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// backend keys the suite's recordings (paths under a test's temporary
// directory) by run id in one database, and corrupts them with SQL.
type backend struct {
	db string // the database's URL

	mu   sync.Mutex
	runs map[string]string // path -> run id
}

func newBackend(t *testing.T) *backend {
	return &backend{db: pgtest.Database(t), runs: map[string]string{}}
}

// url is the recording URL of path.
func (b *backend) url(path string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	run, ok := b.runs[path]
	if !ok {
		run = "r" + strconv.Itoa(len(b.runs)+1)
		b.runs[path] = run
	}
	u, err := pgstore.WithRun(b.db, run)
	if err != nil {
		panic(err)
	}
	return u
}

func (b *backend) Create(path string) (storetest.Store, error) { return pgstore.Create(b.url(path)) }
func (b *backend) Open(path string) (storetest.Store, error)   { return pgstore.Open(b.url(path)) }

func (b *backend) exec(q string, args ...any) (int64, error) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, b.db)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	tag, err := c.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (b *backend) runOf(path string) string {
	l, err := pgstore.ParseURL(b.url(path))
	if err != nil {
		panic(err)
	}
	return l.Run
}

func (b *backend) Truncate(string, int64) error {
	return fmt.Errorf("a PostgreSQL recording has no torn rows: %w", errors.ErrUnsupported)
}

const nth = `(SELECT id FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) ORDER BY id LIMIT 1 OFFSET $2)`

func (b *backend) DeleteRow(path string, row int64) error {
	n, err := b.exec(`DELETE FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND id = `+nth, b.runOf(path), row-1)
	if err == nil && n != 1 {
		err = fmt.Errorf("%d rows deleted, want 1", n)
	}
	return err
}

// SetField sets a column with SQL. A value the column's type cannot hold
// (text in a bigint, a NUL in text) is a case PostgreSQL refuses, as the
// suite's ErrUnsupported.
func (b *backend) SetField(path string, row int64, column, value string) error {
	col := map[string]string{"index": "idx", "key": `"key"`, "offset": `"offset"`}[column]
	if col == "" {
		col = column
	}
	var v any = value
	switch column {
	case "index", "seq", "epoch", "offset", "n":
		i, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("a bigint column holds no %q: %w", value, errors.ErrUnsupported)
		}
		v = i
	case "key", "detail":
		v = []byte(value)
	default:
		if strings.ContainsRune(value, 0) {
			return fmt.Errorf("a text column holds no NUL: %w", errors.ErrUnsupported)
		}
	}
	n, err := b.exec(`UPDATE blackbox_rows SET `+col+` = $3 WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND id = `+nth, b.runOf(path), row-1, v)
	if err == nil && n != 1 {
		err = fmt.Errorf("%d rows changed, want 1", n)
	}
	return err
}

func TestConformance(t *testing.T) { storetest.Run(t, newBackend(t)) }

// TestDuplicatedRowIsNeverComplete: a row copied with SQL (a new id, the
// same columns) is a problem of every reader, never a complete recording.
func TestDuplicatedRowIsNeverComplete(t *testing.T) {
	b := newBackend(t)
	for _, row := range []int64{2, 3, 7, 9, 13, 28} {
		t.Run(fmt.Sprint(row), func(t *testing.T) {
			p := t.TempDir()
			storetest.Write(t, b, p, storetest.Recording())
			n, err := b.exec(`INSERT INTO blackbox_rows SELECT run, (SELECT max(id) + 1 FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1)),
processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads
FROM blackbox_rows WHERE run = (SELECT run FROM blackbox_runs WHERE run_id = $1) AND id = `+nth, b.runOf(p), row-1)
			if err != nil || n != 1 {
				t.Fatalf("duplicating row %d: %d rows, %v", row, n, err)
			}
			r, err := b.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if ps := r.Problems(); len(ps) == 0 {
				t.Errorf("row %d duplicated: no problem, want at least one", row)
			}
		})
	}
}

// TestNamesAPostgreSQLTextColumnCannotHoldAreRefused: a NUL or invalid
// UTF-8 in a processor or source name is refused before any row is written;
// a key and a detail (bytea) hold any bytes.
func TestNamesAPostgreSQLTextColumnCannotHoldAreRefused(t *testing.T) {
	b := newBackend(t)
	p := t.TempDir()
	w, err := b.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	head := []store.Entry{store.EncodeMeta(store.Meta{Created: storetest.T0, Streams: []string{"p"}}),
		{Processor: "p", Index: 1, Kind: store.KindStart}}
	for _, bad := range []store.Entry{
		{Processor: "p\x00", Index: 1, Kind: store.KindStart},
		{Processor: "p\xff", Index: 1, Kind: store.KindStart},
	} {
		err := w.Append(append(head[:1:1], bad)...)
		var fe *store.FieldError
		if !errors.Is(err, store.ErrName) || !errors.As(err, &fe) || fe.Field != "processor" {
			t.Errorf("Append of processor %q: %v, want a *FieldError of processor wrapping ErrName", bad.Processor, err)
		}
	}
	if err := w.Append(head...); err != nil {
		t.Fatalf("Append after the refusals: %v", err)
	}
	in := storetest.Input("p", 1)
	in[0].Key = "k\x00\xff"
	if err := w.Append(in...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := b.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rows, errs := storetest.ReadAll(r)
	if len(errs) != 0 || len(rows) != 5 {
		t.Fatalf("read %d rows, errors %v; want 5 rows", len(rows), errs)
	}
	if got := rows[2].Key; got != in[0].Key {
		t.Errorf("key read back %q, want %q", got, in[0].Key)
	}
}
