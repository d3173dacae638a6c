package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/internal/atomicfile"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/pgstore"
)

func (c *CLI) convertCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "convert SRC DST",
		Short: "Convert a recording between CSV and SQLite",
		Long: `Copy every row of the recording SRC into a new recording DST, losslessly: CSV
to SQLite or back, DST's format from its extension (.csv is CSV, anything
else SQLite) or --format. A recording with integrity problems is copied as
it is (an unfinished recording converts to an equally unfinished one).

It refuses to overwrite an existing DST. DST appears whole or not at all:
the rows go to a temporary file beside it (.DST.blackbox-tmp, which no
command takes for a recording), renamed to DST once complete and synced; a
convert killed on the way leaves no DST, and the next one removes the
temporary file. Rows of SRC that cannot be read (a torn last line, a
malformed row) cannot be copied: DST is written without them, each is
named, and the exit is 3.

DST (or SRC) may be a PostgreSQL run, a postgres:// URL with run=ID (a
new run id when DST has none: the output names the run). A convert to a
run appends the rows in the groups a recorder writes, each a
transaction, and deletes the run if it fails; one killed on the way leaves
the run unfinished (blackbox runs: ended no), never complete.

Exit: 0 converted; 2 a usage or I/O error (DST not written); 3 converted
but rows of SRC could not be read.`,
		Args: exactArgs("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := args[0], args[1]
			f, err := formatOf(dst, format)
			if err != nil {
				return err
			}
			if f == formatPostgres {
				return convertToRun(cmd.OutOrStdout(), src, dst)
			}
			if _, err := os.Lstat(dst); err == nil {
				return &fileError{dst, errors.New("already exists: convert never overwrites")}
			}
			dstArg := pathArg{flag: "DST", path: dst, write: true}
			if err := checkDistinct([]pathArg{{flag: "SRC", path: src}, dstArg}); err != nil {
				return err
			}
			if err := checkWritable(dstArg, "a recording"); err != nil {
				return err
			}
			r, srcFormat, err := openStore(src)
			if err != nil {
				return err
			}
			defer r.Close()
			n, copyErr, err := convert(r, dst, f)
			if err != nil {
				return fmt.Errorf("convert %s to %s (not written): %w", src, dst, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "converted %s (%s) to %s (%s): %d rows\n", src, srcFormat, dst, f, n)
			if copyErr != nil {
				fmt.Fprintf(out, "not copied: %v\n", copyErr)
				return exit(ExitIncomplete, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "DST's format: csv or sqlite (default: from its extension; postgres for a postgres:// DST)")
	return cmd
}

// convert copies r into a new recording dst in format, whole or not at
// all: the rows go to tempPath(dst) (a stale one, left by a killed
// convert, is removed first: dst's lock is held), which is fsynced and then
// linked to dst (never over a file that appeared meanwhile) and removed,
// and dst's directory is fsynced. It returns the rows written and, in
// unreadable, the rows of r that could not be read (a torn last line, a
// malformed row: dst is written without them); err is any other failure
// (dst not written).
func convert(r store.Reader, dst, format string) (n int64, unreadable, err error) {
	release, err := lockOutputs([]pathArg{{flag: "DST", path: dst, write: true}})
	if err != nil {
		return 0, nil, err
	}
	defer release()
	tmp := tempPath(dst)
	if err := removeStore(tmp); err != nil {
		return 0, nil, &fileError{tmp, fmt.Errorf("removing a stale temporary file: %w", unwrapPathError(err))}
	}
	w, err := createStore(tmp, format)
	if err != nil {
		return 0, nil, err
	}
	defer func() {
		if err != nil {
			removeStore(tmp)
		}
	}()
	copyErr := store.Copy(reachAfterAppend(w, killpoint.Convert), r)
	killpoint.Reach(killpoint.ConvertCopied) // tests only: dormant unless armed
	var p *store.Problem
	if copyErr != nil && errors.As(copyErr, &p) && (errors.Is(copyErr, store.ErrTorn) || errors.Is(copyErr, store.ErrMalformed)) {
		unreadable, copyErr = copyErr, nil
	}
	err = copyErr
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = atomicfile.SyncFile(tmp) // the file as closed (SQLite's last pages)
	}
	if err != nil {
		return 0, nil, err
	}
	if err := os.Link(tmp, dst); err != nil {
		return 0, nil, &fileError{dst, unwrapPathError(err)}
	}
	if err := os.Remove(tmp); err != nil {
		return 0, nil, &fileError{tmp, unwrapPathError(err)}
	}
	if err := atomicfile.SyncDir(filepath.Dir(dst)); err != nil {
		return 0, nil, &fileError{filepath.Dir(dst), unwrapPathError(err)}
	}
	return w.rows, unreadable, nil
}

// reachAfterAppend returns w with the kill point reached after each
// Append that succeeded (dormant unless internal/killpoint is armed).
func reachAfterAppend(w *writer, point string) store.Writer { return &reachingWriter{w, point} }

// reachingWriter is a writer that reaches a kill point after each Append;
// safe for concurrent use as far as its writer is.
type reachingWriter struct {
	*writer
	point string
}

func (r *reachingWriter) Append(rows ...store.Entry) error {
	err := r.writer.Append(rows...)
	if err == nil {
		killpoint.Reach(r.point)
	}
	return err
}

// convertToRun is convert to a PostgreSQL run (DST a postgres:// URL; a
// new run id when it has no run=, printed with DST): the rows are appended
// in the groups a recorder writes, each a transaction; a convert that fails
// deletes the run it created. One killed on the way leaves the run's rows
// so far, never ended (`blackbox runs`: ended no; verify: not complete).
func convertToRun(out io.Writer, src, dst string) error {
	loc, err := pgstore.ParseURL(dst)
	if err != nil {
		return usagef("DST: %v", err)
	}
	if loc.Run == "" {
		if dst, err = pgstore.WithRun(dst, pgstore.NewRunID(time.Now())); err != nil {
			return usagef("DST: %v", err)
		}
	}
	if !isURL(src) && sameFile(src, dst) {
		return usagef("SRC %s and DST %s name the same file", src, dst)
	}
	r, srcFormat, err := openStore(src)
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := createStore(dst, formatPostgres)
	if err != nil {
		return err
	}
	copyErr := store.Copy(reachAfterAppend(w, killpoint.Convert), r)
	var p *store.Problem
	var unreadable error
	if copyErr != nil && errors.As(copyErr, &p) && (errors.Is(copyErr, store.ErrTorn) || errors.Is(copyErr, store.ErrMalformed)) {
		unreadable, copyErr = copyErr, nil
	}
	if cerr := w.Close(); copyErr == nil {
		copyErr = cerr
	}
	if copyErr != nil {
		if err := removeStore(dst); err != nil {
			copyErr = errors.Join(copyErr, fmt.Errorf("deleting the run: %w", err))
		}
		return fmt.Errorf("convert %s to %s (not written): %w", src, pgstore.Redact(dst), copyErr)
	}
	fmt.Fprintf(out, "converted %s (%s) to %s (%s): %d rows\n", src, srcFormat, pgstore.Redact(dst), formatPostgres, w.rows)
	if unreadable != nil {
		fmt.Fprintf(out, "not copied: %v\n", unreadable)
		return exit(ExitIncomplete, nil)
	}
	return nil
}
