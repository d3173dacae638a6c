package cli_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// The corruption sweep: every row of a recording of each built-in app
// deleted in turn, duplicated in turn, each numeric field of every row edited
// in turn, and (CSV) the file cut at every byte. For every edited recording,
// `verify` and `replay` must agree on "complete", and neither may exit 0
// unless the edited recording still replays identical: such an edit must be
// one the format cannot see (benignEdit says which, and why).

// sweepCase is one recording the sweep corrupts.
type sweepCase struct {
	app, format string
	journal     bool
	lines       []string
}

var sweepCases = []sweepCase{
	{app: "ledger", format: "csv", lines: ledgerSweepLines},
	{app: "ledger", format: "sqlite", journal: true, lines: ledgerSweepLines},
	{app: "alerts", format: "csv", journal: true, lines: alertsSweepLines},
	{app: "alerts", format: "sqlite", lines: alertsSweepLines},
}

var (
	ledgerSweepLines = []string{"alice,100", "bob,-2000", "transfer,alice,bob,40", "alice,1500", "oops", "carol,5"}
	alertsSweepLines = []string{"s1,10", "s2,5000", "s3,-7000", "bad", "s1,1000"}
)

// numericColumns are the CSV columns (and SQLite columns) holding integers.
var numericColumns = []struct {
	csv int
	sql string
}{{1, "idx"}, {4, "seq"}, {6, "epoch"}, {8, `"offset"`}, {9, "n"}}

// verdict is what verify and replay said of one recording.
type verdict struct {
	verify, replay int  // exit codes
	complete       bool // replay's report says complete
	identical      bool
}

func sweepVerdict(t *testing.T, path string) verdict {
	t.Helper()
	ctx := context.Background()
	var v verdict
	v.verify, _ = execute(t, ctx, "verify", path)
	code, out := execute(t, ctx, "replay", "--json", path)
	v.replay = code
	var rep struct {
		Identical bool `json:"identical"`
		Complete  bool `json:"complete"`
	}
	if code != 2 {
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: replay --json exit %d: output is not a report: %v\n%s", path, code, err, out)
		}
	}
	v.complete, v.identical = rep.Complete, rep.Identical
	return v
}

// check applies the sweep's rules to one edited recording. benign says why
// an edit may leave a recording that verifies and replays identical ("" if
// it may not).
func (v verdict) check(t *testing.T, what, benign string, tally map[string]int) {
	t.Helper()
	tally["edits"]++
	if v.verify == 0 && v.replay == 0 {
		tally["proven: "+benign]++
	}
	switch {
	case v.verify == 2 || v.replay == 2:
		// Not a recording at all, or not one that can be replayed (a cut
		// header, a broken database, no META row): neither may call it
		// complete.
		if v.verify == 0 || v.replay == 0 || v.complete {
			t.Errorf("%s: verify exit %d, replay exit %d (complete=%v): a file one of them refuses cannot be proven by the other",
				what, v.verify, v.replay, v.complete)
		}
	case (v.verify == 0) != v.complete:
		t.Errorf("%s: verify exit %d but replay says complete=%v: they disagree", what, v.verify, v.complete)
	case v.verify == 0 || v.replay == 0:
		if benign == "" {
			t.Errorf("%s: verify exit %d, replay exit %d (identical=%v): an edit the format should catch was called proven",
				what, v.verify, v.replay, v.identical)
		} else if v.replay != 0 && v.identical {
			t.Errorf("%s: verify exit 0 and replay identical but replay exit %d", what, v.replay)
		}
	}
}

func recordSweepCase(t *testing.T, dir string, c sweepCase) string {
	t.Helper()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, c.lines...)
	ext := ".csv"
	if c.format == "sqlite" {
		ext = ".db"
	}
	rec := filepath.Join(dir, "base"+ext)
	args := []string{"run", "--app", c.app, "--input", in, "--store", rec, "--read", "once-earliest"}
	if c.journal {
		args = append(args, "--journal")
	}
	if code, out := execute(t, context.Background(), args...); code != 0 {
		t.Fatalf("recording %s: exit %d\n%s", rec, code, out)
	}
	if v := sweepVerdict(t, rec); v.verify != 0 || v.replay != 0 {
		t.Fatalf("the unedited recording %s: verify %d, replay %d", rec, v.verify, v.replay)
	}
	return rec
}

func TestCorruptionSweepNeverCallsABrokenRecordingProven(t *testing.T) {
	for _, c := range sweepCases {
		name := fmt.Sprintf("%s-%s", c.app, c.format)
		if c.journal {
			name += "-journal"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			base := recordSweepCase(t, dir, c)
			tally := map[string]int{}
			if c.format == "csv" {
				sweepCSV(t, dir, base, tally)
			} else {
				sweepSQLite(t, dir, base, tally)
			}
			for _, k := range slices.Sorted(maps.Keys(tally)) {
				t.Logf("%6d %s", tally[k], k)
			}
		})
	}
}

// csvRow is one line of a CSV recording, split into its fields.
type csvRow struct {
	line   []byte
	fields []string
}

func splitCSV(t *testing.T, data []byte) []csvRow {
	t.Helper()
	var rows []csvRow
	for l := range bytes.Lines(data) {
		r := csv.NewReader(bytes.NewReader(l))
		fs, err := r.Read()
		if err != nil {
			t.Fatalf("the unedited recording: %v", err)
		}
		rows = append(rows, csvRow{line: l, fields: fs})
	}
	return rows
}

func joinCSV(t *testing.T, fields []string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(fields); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	return b.Bytes()
}

func sweepCSV(t *testing.T, dir, base string, tally map[string]int) {
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	rows := splitCSV(t, data)
	path := filepath.Join(dir, "edited.csv")
	try := func(what, benign string, edited []byte) {
		t.Helper()
		if err := os.WriteFile(path, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		sweepVerdict(t, path).check(t, what, benign, tally)
	}
	lines := func(edit func(i int, r csvRow) [][]byte) []byte {
		var b bytes.Buffer
		for i, r := range rows {
			for _, l := range edit(i, r) {
				b.Write(l)
			}
		}
		return b.Bytes()
	}
	for i, r := range rows {
		row := rowName(r.fields)
		try(fmt.Sprintf("line %d (%s) deleted", i+1, row), "", lines(func(j int, x csvRow) [][]byte {
			if j == i {
				return nil
			}
			return [][]byte{x.line}
		}))
		try(fmt.Sprintf("line %d (%s) duplicated", i+1, row), "", lines(func(j int, x csvRow) [][]byte {
			if j == i {
				return [][]byte{x.line, x.line}
			}
			return [][]byte{x.line}
		}))
		if i == 0 {
			continue // the header has no numbers
		}
		for _, col := range numericColumns {
			old, err := strconv.ParseInt(r.fields[col.csv], 10, 64)
			if err != nil {
				t.Fatalf("line %d column %d: %v", i+1, col.csv, err)
			}
			for _, nv := range []int64{old + 1, old - 1} {
				fs := append([]string(nil), r.fields...)
				fs[col.csv] = strconv.FormatInt(nv, 10)
				edited := joinCSV(t, fs)
				try(fmt.Sprintf("line %d (%s) %s %d -> %d", i+1, row, col.sql, old, nv), benignEdit(r.fields, col.csv, old, nv),
					lines(func(j int, x csvRow) [][]byte {
						if j == i {
							return [][]byte{edited}
						}
						return [][]byte{x.line}
					}))
			}
		}
	}
	// Every byte cut: a prefix of the file, as a crash leaves it.
	step := 1
	if testing.Short() {
		step = 7
	}
	for n := 0; n < len(data); n += step {
		try(fmt.Sprintf("cut at byte %d of %d", n, len(data)), cutBenign(data, n), data[:n])
	}
}

// cutBenign: a cut never leaves a complete recording (every stream loses
// its END), so no cut is benign.
func cutBenign([]byte, int) string { return "" }

// rowName names a row for a failure message: processor, index and kind.
func rowName(fs []string) string {
	if len(fs) < 3 {
		return strings.Join(fs, ",")
	}
	return fmt.Sprintf("%s %s %s", fs[0], fs[1], fs[2])
}

// benignEdit says why editing column col of a row from old to nv may leave
// a recording that is complete and replays identical, or "" when the
// recording must then be reported.
func benignEdit(fs []string, col int, old, nv int64) string {
	kind := fs[2]
	switch {
	case kind == "DELIVERY" && (col == 6 || col == 8):
		return "a DELIVERY's epoch and offset are where the input was read; replay re-enters them as recorded, and these apps' outputs do not depend on them"
	case kind == "DELIVERY" && col == 9:
		return "a DELIVERY's attempt count is metadata these apps do not read"
	}
	return ""
}

func sweepSQLite(t *testing.T, dir, base string, tally map[string]int) {
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", base)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id     int64
		kind   string
		values map[string]int64
	}
	var rows []row
	q, err := db.Query(`SELECT id, kind, processor, idx, seq, epoch, "offset", n FROM rows ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var r row
		var proc string
		var idx, seq, epoch, off, n int64
		if err := q.Scan(&r.id, &r.kind, &proc, &idx, &seq, &epoch, &off, &n); err != nil {
			t.Fatal(err)
		}
		r.values = map[string]int64{"idx": idx, "seq": seq, "epoch": epoch, `"offset"`: off, "n": n}
		rows = append(rows, r)
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	path := filepath.Join(dir, "edited.db")
	try := func(what, benign string, stmt string, args ...any) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(stmt, args...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		sweepVerdict(t, path).check(t, what, benign, tally)
	}
	const cols = `processor, idx, kind, source, seq, instant, epoch, "key", "offset", n, payload, detail, reads`
	for _, r := range rows {
		what := fmt.Sprintf("row id %d (%s)", r.id, r.kind)
		try(what+" deleted", "", `DELETE FROM rows WHERE id = ?`, r.id)
		try(what+" duplicated", "", `INSERT INTO rows (`+cols+`) SELECT `+cols+` FROM rows WHERE id = ?`, r.id)
		for i, col := range numericColumns {
			old := r.values[col.sql]
			for _, nv := range []int64{old + 1, old - 1} {
				fs := []string{"", "", r.kind}
				try(fmt.Sprintf("%s %s %d -> %d", what, col.sql, old, nv), benignEdit(fs, numericColumns[i].csv, old, nv),
					`UPDATE rows SET `+col.sql+` = ? WHERE id = ?`, nv, r.id)
			}
		}
	}
	// Byte cuts of the database file: every page boundary and a few bytes
	// around it, and every byte of the first page (the header).
	page := 4096
	cuts := map[int]bool{}
	for n := 0; n < min(len(data), 100); n++ {
		cuts[n] = true
	}
	for p := 0; p <= len(data); p += page {
		for _, d := range []int{-1, 0, 1, page / 2} {
			if n := p + d; n >= 0 && n < len(data) {
				cuts[n] = true
			}
		}
	}
	for n := range cuts {
		if err := os.WriteFile(path, data[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		sweepVerdict(t, path).check(t, fmt.Sprintf("database cut at byte %d of %d", n, len(data)), "", tally)
	}
}
