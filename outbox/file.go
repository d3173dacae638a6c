package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// The line formats of a File.
const (
	// FormatValue: each output's recorded value (compact JSON), one per
	// line.
	FormatValue = "value"
	// FormatEnvelope: {"key":KEY,"output":VALUE} per line, KEY the
	// output's core.EffectKey: a reader of the file can drop a key it has
	// seen.
	FormatEnvelope = "envelope"
)

// How often, and how far apart, a batch's write is tried before the
// delivery fails.
const (
	fileAttempts = 3
	fileBackoff  = 10 * time.Millisecond
)

// File is the outbox's own sink: a file of one line per output, appended
// to. With its outbox it is exactly once: a batch's mark holds the file's
// size before the batch, so recovery finds how much of the batch a crash
// let through and appends the rest. Its methods are called by its outbox's
// goroutine only (Size, Close by its owner once the outbox is closed).
type File struct {
	f      *os.File
	w      io.Writer // f, or what Wrap made of it
	path   string
	format string
	size   int64
	sync   bool
	// lines counts the file's line breaks for the kill points OutMarked
	// and OutWrite (tests only): -1 until one of them is armed and asks.
	lines int64
}

// OpenFile opens (creating it when missing) the file at path for an
// outbox, lines written in format (FormatValue or FormatEnvelope), each
// batch synced to stable storage when sync is set.
func OpenFile(path, format string, sync bool) (*File, error) {
	if format != FormatValue && format != FormatEnvelope {
		return nil, fmt.Errorf("outbox: line format %q: want %s or %s", format, FormatValue, FormatEnvelope)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, w: f, path: path, format: format, size: fi.Size(), sync: sync, lines: -1}, nil
}

// Wrap makes the file's lines go through wrap(file) (tests inject failing
// writes with it). Call it before the outbox is opened.
func (f *File) Wrap(wrap func(io.Writer) io.Writer) { f.w = wrap(f.f) }

// Path is the file's path as given.
func (f *File) Path() string { return f.path }

// Size is the file's size: where the next line starts.
func (f *File) Size() int64 { return f.size }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Deliver appends the batch's lines with one write (a short write is
// followed by one of the rest; a write that fails, or writes nothing, is
// tried again from where it stopped, fileAttempts times in all), then
// syncs the file when asked to.
// Each payload must be one line of JSON: a batch holding one that is not
// is refused whole (nothing written).
func (f *File) Deliver(_ int64, effects []core.Effect) error { return f.deliver(effects, false) }

// deliver is Deliver; checked says every payload is known to be one line
// of JSON (the recorder's JSON codec wrote it in this run): not checked
// again.
func (f *File) deliver(effects []core.Effect, checked bool) error {
	b, err := f.encode(effects, checked)
	if err != nil {
		return err
	}
	return f.append(b)
}

func (f *File) append(b []byte) error {
	if killpoint.Armed(killpoint.OutWrite) { // tests only: dormant unless armed
		killpoint.WriteHalfAt(killpoint.OutWrite, f.linesAfter(int64(bytes.Count(b, newline))), f.w, b)
	}
	rest := b
	var err error
	for failed := 0; len(rest) > 0; {
		var n int
		n, err = f.w.Write(rest)
		if f.lines >= 0 {
			f.lines += int64(bytes.Count(rest[:n], newline))
		}
		rest = rest[n:]
		f.size += int64(n)
		if len(rest) == 0 || err == nil && n > 0 {
			continue // done, or a short write that made progress: write the rest
		}
		if err == nil {
			err = io.ErrShortWrite
		}
		if failed++; failed == fileAttempts {
			break
		}
		time.Sleep(fileBackoff)
	}
	if len(rest) > 0 {
		return fmt.Errorf("writing %s (%d tries): %w", f.path, fileAttempts, err)
	}
	if f.sync {
		if err := f.f.Sync(); err != nil {
			return fmt.Errorf("syncing %s: %w", f.path, err)
		}
	}
	return nil
}

var newline = []byte{'\n'}

// linesAfter is the value of the kill points OutMarked and OutWrite (tests
// only): the lines the file holds once n more are appended. The first call
// counts the file's lines from its start; append keeps the count after it.
func (f *File) linesAfter(n int64) int64 {
	if f.lines < 0 {
		f.lines = 0
		buf := make([]byte, 64<<10)
		for off := int64(0); off < f.size; {
			k, err := f.f.ReadAt(buf[:min(int64(len(buf)), f.size-off)], off)
			f.lines += int64(bytes.Count(buf[:k], newline))
			off += int64(k)
			if err != nil || k == 0 {
				break
			}
		}
	}
	return f.lines + n
}

// encode is the lines of effects; unless checked, it refuses a payload
// that is not one line of JSON.
func (f *File) encode(effects []core.Effect, checked bool) ([]byte, error) {
	n := 0
	for _, e := range effects {
		n += len(e.Payload) + 1
	}
	if f.format == FormatEnvelope {
		n += len(effects) * len(`{"key":,"output":}`)
	}
	b := make([]byte, 0, n)
	for _, e := range effects {
		if !checked && (!json.Valid(e.Payload) || bytes.ContainsAny(e.Payload, "\r\n")) {
			return nil, fmt.Errorf("%w: output %d of stream %s: %s cannot hold it", ErrPayload, e.Key.Index, e.Stream, f.path)
		}
		if f.format == FormatEnvelope {
			k, err := json.Marshal(e.Key)
			if err != nil {
				return nil, err
			}
			b = append(b, `{"key":`...)
			b = append(b, k...)
			b = append(b, `,"output":`...)
			b = append(b, e.Payload...)
			b = append(b, '}')
		} else {
			b = append(b, e.Payload...)
		}
		b = append(b, '\n')
	}
	return b, nil
}

// complete finishes the batch whose mark says the file was from bytes
// long before it: the file must hold a prefix of want from there; the
// rest is appended. It returns how many lines it appended to (a line a
// crash tore counts once).
func (f *File) complete(from int64, want []byte) (int64, error) {
	end := from + int64(len(want))
	switch {
	case f.size < from:
		return 0, fmt.Errorf("%w: %s is %d bytes, shorter than the %d its marks say it held (remove the marks file to start it afresh)", ErrOut, f.path, f.size, from)
	case f.size > end:
		return 0, fmt.Errorf("%w: %s is %d bytes, %d more than its marks account for", ErrOut, f.path, f.size, f.size-end)
	}
	got := make([]byte, f.size-from)
	if _, err := f.f.ReadAt(got, from); err != nil {
		return 0, fmt.Errorf("reading %s: %w", f.path, err)
	}
	if !bytes.Equal(got, want[:len(got)]) {
		return 0, fmt.Errorf("%w: %s holds other bytes from offset %d than the batch its marks name", ErrOut, f.path, from)
	}
	rest := want[len(got):]
	if len(rest) == 0 {
		return 0, nil
	}
	return int64(bytes.Count(rest, []byte{'\n'})), f.append(rest)
}

func absPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("outbox: %w", err)
	}
	return abs, nil
}
