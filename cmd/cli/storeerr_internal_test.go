package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/store"
)

// TestAnErrorNamesItsFileOnceByItsType: storeErr puts the path before an
// error unless the error carries that path in a type that names a file;
// an error whose text merely contains the path is still prefixed.
func TestAnErrorNamesItsFileOnceByItsType(t *testing.T) {
	const path = "run.csv"
	cause := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a store.FileError of the file", fmt.Errorf("replayer: %w", &store.FileError{Op: "csvstore: read", Path: path, Err: cause}),
			"replayer: csvstore: read run.csv: boom"},
		{"a store.FileError of another file", &store.FileError{Op: "csvstore: read", Path: "other.csv", Err: cause},
			"run.csv: csvstore: read other.csv: boom"},
		{"a store.Problem of the file", fmt.Errorf("golden: %w", &store.Problem{Kind: store.ProblemTorn, File: path, Line: 3, Detail: "x"}),
			"golden: " + (&store.Problem{Kind: store.ProblemTorn, File: path, Line: 3, Detail: "x"}).Error()},
		{"an fs.PathError of the file", &fs.PathError{Op: "open", Path: path, Err: fs.ErrPermission},
			"open run.csv: permission denied"},
		{"a text that only mentions the file", errors.New("recorder: run.csv is busy"),
			"run.csv: recorder: run.csv is busy"},
		{"an error naming nothing", cause, "run.csv: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := storeErr(path, tt.err)
			if got.Error() != tt.want {
				t.Errorf("storeErr = %q, want %q", got.Error(), tt.want)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("storeErr(%v) does not wrap it", tt.err)
			}
		})
	}
}

// TestBothStoresNameTheFileTheyRefuseByType: opening a file that is not a
// recording fails, in both formats, with a *store.FileError naming the file
// and wrapping store.ErrFormat.
func TestBothStoresNameTheFileTheyRefuseByType(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"notes.csv": "this is not a recording\n",
		"other.db":  "SQLite format 3\x00 but not a database",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			r, _, err := openStore(p)
			if err == nil {
				r.Close()
				t.Fatalf("openStore(%s) succeeded", name)
			}
			var fe *store.FileError
			if !errors.As(err, &fe) || fe.Path != p || !errors.Is(err, store.ErrFormat) {
				t.Errorf("openStore(%s) = %v: want a *store.FileError of %s wrapping store.ErrFormat", name, err, p)
			}
		})
	}
}
