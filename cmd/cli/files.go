package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/store"
	_ "github.com/blackbox-audit/blackbox/store/csvstore"    // the csv backend (store.Register)
	"github.com/blackbox-audit/blackbox/store/pgstore"       // the postgres backend (store.Register), runs
	_ "github.com/blackbox-audit/blackbox/store/sqlitestore" // the sqlite backend (store.Register)
)

// The recording formats.
const (
	formatCSV      = "csv"
	formatSQLite   = "sqlite"
	formatPostgres = "postgres"
)

// isURL reports whether path names a recording in a server (a
// postgres:// URL: store.URLBackend), not a file.
func isURL(path string) bool { return store.URLBackend(path) != "" }

// formatOf is the format of a recording to create at path: postgres for a
// postgres:// URL (a --format other than postgres is refused), else flag
// if set (csv or sqlite), else by extension (.csv is CSV, anything else
// SQLite).
func formatOf(path, flag string) (string, error) {
	if isURL(path) {
		if f := strings.ToLower(flag); f != "" && f != formatPostgres {
			return "", usagef("--format %s: %s is a PostgreSQL URL", flag, pgstore.Redact(path))
		}
		return formatPostgres, nil
	}
	switch strings.ToLower(flag) {
	case "":
		if strings.EqualFold(filepath.Ext(path), ".csv") {
			return formatCSV, nil
		}
		return formatSQLite, nil
	case formatCSV:
		return formatCSV, nil
	case formatSQLite, "sqlite3":
		return formatSQLite, nil
	}
	return "", usagef("unknown format %q (want csv or sqlite)", flag)
}

// fileError is an I/O problem with a named file.
type fileError struct {
	path string
	err  error
}

func (e *fileError) Error() string { return e.path + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// checkFile checks that path names a regular file (or, with missingOK, names
// nothing), with an error naming it.
func checkFile(path, what string, missingOK bool) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if missingOK {
			return nil
		}
		return &fileError{path, fmt.Errorf("does not exist (want %s)", what)}
	case err != nil:
		return &fileError{path, unwrapPathError(err)}
	case fi.IsDir():
		return &fileError{path, fmt.Errorf("is a directory, not %s", what)}
	case !fi.Mode().IsRegular():
		return &fileError{path, fmt.Errorf("is not a regular file, not %s", what)}
	}
	return nil
}

// unwrapPathError drops the *fs.PathError wrapper (whose text repeats the
// path) so that a message names the file once.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// openStore opens the recording at path for reading (store.Open: its
// backend is the one its first bytes are of, whatever its extension) and
// returns its backend's name (store.Sniff: csv or sqlite). Errors name the
// file: a missing file, a directory, another format or a temporary file of
// tempPath (store.ErrFormat).
func openStore(path string) (store.Reader, string, error) {
	if isURL(path) {
		s, err := store.Open(path)
		if err != nil {
			return nil, "", storeErr(path, err)
		}
		return s, formatPostgres, nil
	}
	if isTemp(path) {
		return nil, "", &fileError{path, fmt.Errorf("%w: a temporary file of an unfinished blackbox command (safe to remove)", store.ErrFormat)}
	}
	if err := checkFile(path, "a recording", false); err != nil {
		return nil, "", err
	}
	if !holdsBytes(path) {
		return nil, "", &fileError{path, fmt.Errorf("%w: empty file: no recording (a run killed before its first write leaves one; it recorded, applied and committed nothing)", store.ErrFormat)}
	}
	format, err := store.Sniff(path)
	if err != nil {
		return nil, "", &fileError{path, unwrapPathError(err)}
	}
	s, err := store.Open(path)
	if err != nil {
		return nil, "", storeErr(path, err)
	}
	return s, format, nil
}

// openStores opens a comma-separated list of recordings; on failure the
// ones already open are closed.
func openStores(list string) ([]store.Reader, error) {
	return store.OpenAll(strings.Split(list, ","), func(p string) (store.Reader, error) {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, usagef("empty recording name in %q", list)
		}
		r, _, err := openStore(p)
		return r, err
	})
}

// storeErr makes an error name the file path, once: it is left as it is
// when it carries path already (a *store.FileError, a *store.Problem, an
// *fs.PathError or a fileError of path, found with errors.As), else path is
// put before it.
func storeErr(path string, err error) error {
	if namesFile(err, path) {
		return err
	}
	return &fileError{path, err}
}

// namesFile reports whether err carries the file path in one of the error
// types that name a file.
func namesFile(err error, path string) bool {
	var fe *fileError
	return store.NamesPath(err, path) || errors.As(err, &fe) && fe.path == path
}

// writer is a recording being written, with what it takes to remove it.
// Its counts are read under mu while it is written (recorded: an operator
// window's scrape), directly once it is closed.
type writer struct {
	store.Writer
	path    string
	format  string
	mu      sync.Mutex
	rows    int64
	appends int64
	batches console.Batches
	kinds   map[store.Kind]int64
}

// Append counts the rows it writes, by kind, and the write by its rows.
func (w *writer) Append(rows ...store.Entry) error {
	err := w.Writer.Append(rows...)
	if err == nil {
		w.mu.Lock()
		w.rows += int64(len(rows))
		w.appends++
		w.batches.Add(len(rows))
		for i := range rows {
			w.kinds[rows[i].Kind]++
		}
		w.mu.Unlock()
	}
	return err
}

// recorded is what w wrote so far, for an operator window: its rows by
// kind, its appends (and their rows), and the size of its files on disk (the recording and,
// for SQLite, its write-ahead log; -1 when it cannot be read).
func (w *writer) recorded() console.Recording {
	w.mu.Lock()
	r := console.Recording{Rows: make(map[string]int64, len(w.kinds)), Appends: w.appends, Batches: w.batches}
	for k, n := range w.kinds {
		r.Rows[string(k)] = n
	}
	w.mu.Unlock()
	fi, err := os.Stat(w.path)
	if err != nil {
		r.Bytes = -1
		return r
	}
	r.Bytes = fi.Size()
	if wal, err := os.Stat(w.path + "-wal"); err == nil {
		r.Bytes += wal.Size()
	}
	return r
}

// inputs counts the input rows written (INDEXED, INLINE, TIMER).
func (w *writer) inputs() int64 {
	return w.kinds[store.KindIndexed] + w.kinds[store.KindInline] + w.kinds[store.KindTimer]
}

// createStore creates a new recording at path in format. It refuses (an
// error wrapping store.ErrHoldsRecording naming the file) a file that holds
// anything, and never truncates one.
func createStore(path, format string) (*writer, error) {
	if !isURL(path) {
		if err := checkFile(path, "a recording", true); err != nil {
			return nil, err
		}
		if err := checkDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	w, err := store.Create(path, format)
	if err != nil {
		return nil, storeErr(path, err)
	}
	return &writer{Writer: w, path: path, format: format, kinds: map[store.Kind]int64{}}, nil
}

// holdsBytes reports whether path names a file with content.
func holdsBytes(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}

// removeStore removes a recording, the files SQLite keeps beside it, and
// the temporary file of its first write that a killed run may have left
// (store.StartPath) with SQLite's; a PostgreSQL run (a URL) is deleted with
// its rows, unless a writer holds it.
func removeStore(path string) error {
	if isURL(path) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return pgstore.Delete(ctx, path)
	}
	var errs []error
	start := store.StartPath(store.Target(path))
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal", start, start + "-wal", start + "-shm", start + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WriteJSON writes v as indented JSON and a newline: the JSON every command
// prints (--json), for commands added with WithCommand.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// writeReport writes a report as JSON or as its text.
func writeReport(w io.Writer, asJSON bool, r interface{ WriteText(io.Writer) error }) error {
	if asJSON {
		return WriteJSON(w, r)
	}
	return r.WriteText(w)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress shows a one-line progress report on a terminal, at most ten
// times a second; it does nothing when its writer is not a terminal. It is
// safe for concurrent use.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	on    bool
	last  time.Time
	shown bool
}

func (c *CLI) progress() *progress {
	return &progress{w: c.stderr, on: isTerminal(c.stderr)}
}

// Printf replaces the progress line, unless one was shown less than 100ms
// ago.
func (p *progress) Printf(format string, args ...any) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		p.shown = true
		fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	}
}

// Done clears the progress line.
func (p *progress) Done() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// yesNo is "yes" or "no".
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// checkDir checks that path names a directory.
func checkDir(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &fileError{path, errors.New("no such directory")}
	case err != nil:
		return &fileError{path, unwrapPathError(err)}
	case !fi.IsDir():
		return &fileError{path, errors.New("is not a directory")}
	}
	return nil
}

// count is "1 line", "2 lines": n and the noun, plural unless n is 1.
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// expandGroups replaces, in a comma-separated list of recordings, each
// postgres:// URL with group=G and no run= by the URLs of the group's
// runs (pgstore.Runs: members of a consumer group, in the order their
// recordings were created), so that a group's members are stitched as one side. A group
// the database holds no run of is a usage error.
func expandGroups(list string) (string, error) {
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if !isURL(p) {
			out = append(out, p)
			continue
		}
		loc, err := pgstore.ParseURL(p)
		if err != nil {
			return "", usagef("%v", err)
		}
		if loc.Group == "" || loc.Run != "" {
			out = append(out, p)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		runs, err := pgstore.Runs(ctx, p)
		cancel()
		if err != nil {
			return "", storeErr(p, err)
		}
		type member struct {
			url     string
			created time.Time
		}
		var ms []member
		for _, r := range runs {
			if r.Group != loc.Group || r.Rows == 0 {
				continue
			}
			u, err := pgstore.WithRun(p, r.ID)
			if err != nil {
				return "", usagef("%v", err)
			}
			rec, err := store.Open(u)
			if err != nil {
				return "", storeErr(u, err)
			}
			ms = append(ms, member{u, rec.Meta().Created})
			rec.Close()
		}
		if len(ms) == 0 {
			return "", usagef("%s: no run of group %q", pgstore.Redact(p), loc.Group)
		}
		// In the order their recordings were created (META), the order
		// store.CheckRuns wants.
		slices.SortStableFunc(ms, func(a, b member) int { return a.created.Compare(b.created) })
		for _, m := range ms {
			out = append(out, m.url)
		}
	}
	return strings.Join(out, ","), nil
}

// isGroup reports whether a comma-separated list of recordings names a
// consumer group's runs (a postgres:// URL with group= and no run=, which
// expandGroups expands): runs of members that ran at the same time, not
// one after another.
func isGroup(list string) bool {
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if !isURL(p) {
			continue
		}
		if loc, err := pgstore.ParseURL(p); err == nil && loc.Group != "" && loc.Run == "" {
			return true
		}
	}
	return false
}

// openRuns opens a comma-separated list of consecutive runs (a crashed run
// and its restarts, as diff, explain and report stitch them) and refuses,
// before any work, a list that cannot be one (a usage error naming the
// files and why): a file given twice, a recording that holds the same rows
// as another (a copy of it), a run created before the run given before it
// (store.CheckRuns). It returns the readers and their paths.
func openRuns(what, list string) ([]store.Reader, []string, error) {
	list, err := expandGroups(list)
	if err != nil {
		return nil, nil, err
	}
	rs, err := openStores(list)
	if err != nil {
		return nil, nil, err
	}
	paths := strings.Split(list, ",")
	for i := range paths {
		paths[i] = strings.TrimSpace(paths[i])
	}
	fail := func(err error) ([]store.Reader, []string, error) {
		store.CloseAll(rs)
		return nil, nil, err
	}
	for j := range paths {
		for i := range j {
			if sameFile(paths[i], paths[j]) {
				return fail(usagef("%s %s and %s name the same file: a run given twice (give each run once, in the order they ran)", what, paths[i], paths[j]))
			}
		}
	}
	if err := store.CheckRuns(rs); err != nil {
		var re *store.RunsError
		switch {
		case errors.As(err, &re) && re.Copy:
			return fail(usagef("%s %s holds the same rows as %s: a copy of it, a run given twice (give each run once, in the order they ran)",
				what, paths[re.Second], paths[re.First]))
		case errors.As(err, &re):
			return fail(usagef("%s %s was created at %s, before %s (created at %s): runs out of order (give them in the order they ran)",
				what, paths[re.Second], store.FormatInstant(re.Later), paths[re.First], store.FormatInstant(re.Created)))
		}
		return fail(fmt.Errorf("%s: %w", list, err))
	}
	return rs, paths, nil
}
