package sqlitestore

import (
	"math"

	"github.com/blackbox-audit/blackbox/store"
)

// ChunkRows is chunkRows, for tests of Appends around it.
const ChunkRows = chunkRows

// DecodedBoth returns the rows of the database at path as database/sql
// and the scanner decode them (a writer's Scan) and as a rawConn decodes
// them (a reader's), both yielded through scanner.yield.
func DecodedBoth(path string) (viaSQL, viaRaw []store.Row, err error) {
	keep := func(rows *[]store.Row) func(*store.Row, error) bool {
		return func(r *store.Row, _ error) bool { *rows = append(*rows, *r); return true }
	}
	db, err := openDB(path, true)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	rs, err := db.Query(rowsSQL, int64(math.MaxInt64))
	if err != nil {
		return nil, nil, err
	}
	defer rs.Close()
	sc := scanner{format: store.Format}
	for rs.Next() {
		row, err := sc.row(rs, path)
		if err != nil {
			return nil, nil, err
		}
		sc.yield(&row, keep(&viaSQL))
	}
	if err := rs.Err(); err != nil {
		return nil, nil, err
	}
	name, err := dsn(path, "mode=ro")
	if err != nil {
		return nil, nil, err
	}
	c, err := openRaw(name)
	if err != nil {
		return nil, nil, err
	}
	defer c.close()
	rc := scanner{format: store.Format}
	err = c.each(rowsSQL, []int64{math.MaxInt64}, func(st *rawStmt) error {
		row := rowOf(st.row(&rc, path))
		rc.yield(&row, keep(&viaRaw))
		return nil
	})
	return viaSQL, viaRaw, err
}
