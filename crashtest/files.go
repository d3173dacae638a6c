package crashtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/blackbox-audit/blackbox/store"
	_ "github.com/blackbox-audit/blackbox/store/csvstore"    // the csv backend (store.Register)
	_ "github.com/blackbox-audit/blackbox/store/sqlitestore" // the sqlite backend (store.Register)
)

// fileErr names path once: an *fs.PathError's text repeats it.
func fileErr(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &FileError{Path: path, Err: err}
}

// storeErr makes an error of the recording path name it, once.
func storeErr(path string, err error) error {
	var fe *FileError
	if store.NamesPath(err, path) || errors.As(err, &fe) && fe.Path == path {
		return err
	}
	return &FileError{Path: path, Err: err}
}

// openStore opens the recording at path for reading.
func openStore(path string) (store.Reader, error) {
	r, err := store.Open(path)
	if err != nil {
		return nil, storeErr(path, err)
	}
	return r, nil
}

// verifyFile opens and verifies a recording.
func verifyFile(path string) ([]store.Problem, error) {
	r, err := openStore(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Problems(), nil
}

// problemText is one problem on one line, naming the file.
func problemText(path string, p store.Problem) string {
	p.File = path
	return p.Error()
}

// readOutputs reads an --out file: one JSON output per line, each returned
// re-encoded without the ignored keys (the clock differs between runs).
func readOutputs(path string, ignore []string) ([]string, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	for i, l := range lines {
		lines[i] = withoutKeys(l, ignore)
	}
	return lines, nil
}

// readLines reads the lines of an --out file as they are (none for a
// missing file).
func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fileErr(path, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, &FileError{Path: path, Err: fmt.Errorf("line %d: %w", len(lines)+1, err)}
	}
	return lines, nil
}

// withoutKeys is an output line re-encoded without the ignored keys, the
// line as it is when it is not a JSON object.
func withoutKeys(line string, ignore []string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return line // not an object: compared as it is
	}
	for _, k := range ignore {
		delete(m, k)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// lineCounter counts the lines of a growing file, reading only what was
// appended since the last count. Not safe for concurrent use.
type lineCounter struct {
	path string
	off  int64
	n    int64
	buf  []byte
}

func (l *lineCounter) count() (int64, error) {
	f, err := os.Open(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return l.n, nil
	}
	if err != nil {
		return l.n, fileErr(l.path, err)
	}
	defer f.Close()
	if l.buf == nil {
		l.buf = make([]byte, 64<<10)
	}
	for {
		k, err := f.ReadAt(l.buf, l.off)
		l.n += int64(bytes.Count(l.buf[:k], []byte{'\n'}))
		l.off += int64(k)
		if err == io.EOF || k == 0 {
			return l.n, nil
		}
		if err != nil {
			return l.n, fileErr(l.path, err)
		}
	}
}

// countLines counts the complete lines of a file (0 for a missing file).
func countLines(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fileErr(path, err)
	}
	return int64(bytes.Count(b, []byte{'\n'})), nil
}

// recorded reports whether a run's recording exists: a file with content
// at path. A run killed before it created its recording (in its outbox's
// recovery, before its store was created) left no file, one killed before
// its first write an empty one.
func recorded(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}
