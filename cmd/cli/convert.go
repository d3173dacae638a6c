package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/store"
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

It refuses to overwrite an existing DST. On failure it removes the
half-written DST. Rows of SRC that cannot be read (a torn last line, a
malformed row) cannot be copied: DST is kept without them, each is named,
and the exit is 3.

Exit: 0 converted; 2 a usage or I/O error (DST not written); 3 converted
but rows of SRC could not be read.`,
		Args: exactArgs("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := args[0], args[1]
			f, err := formatOf(dst, format)
			if err != nil {
				return err
			}
			if _, err := os.Lstat(dst); err == nil {
				return &fileError{dst, errors.New("already exists: convert never overwrites")}
			}
			if src == dst {
				return usagef("SRC and DST are the same file %s", src)
			}
			r, srcFormat, err := openStore(src)
			if err != nil {
				return err
			}
			defer r.Close()
			w, err := createStore(dst, f)
			if err != nil {
				return err
			}
			copyErr := store.Copy(reachAfterAppend(w, killpoint.Convert), r)
			closeErr := w.Close()
			var p *store.Problem
			unreadable := copyErr != nil && errors.As(copyErr, &p) &&
				(errors.Is(copyErr, store.ErrTorn) || errors.Is(copyErr, store.ErrMalformed))
			if (copyErr != nil && !unreadable) || closeErr != nil {
				removeStore(dst)
				if copyErr == nil {
					copyErr = closeErr
				}
				return fmt.Errorf("convert %s to %s (removed): %w", src, dst, copyErr)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "converted %s (%s) to %s (%s): %d rows\n", src, srcFormat, dst, f, w.rows)
			if unreadable {
				fmt.Fprintf(out, "not copied: %v\n", copyErr)
				return exit(ExitIncomplete, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "DST's format: csv or sqlite (default: from its extension)")
	return cmd
}
