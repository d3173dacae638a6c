package torture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// fileInput is a scenario's file input: the path the runs read, the
// rotated files beside it, and what the harness wrote. Not safe for
// concurrent use: one goroutine applies the operations.
type fileInput struct {
	dir     string
	path    string // DIR/in.txt
	rotated int    // the suffix of the last rotation (PATH-000K)
	gen     *lineGen
	current []int // the lines PATH holds, by id
	// running says a run follows the input now: the lines an operation
	// destroys then may not have been read yet, and no source can know
	// they existed (atRisk).
	running bool
	// fresh says the run following the input is the first to read it: it
	// has no pointer naming a file yet (none ran, or none wrote one), so
	// lines rotated away before it opened the file are not its to know
	// (atRisk too).
	fresh bool
	// known says a run that ran had the file at PATH to read (it was the
	// path while the run ran); a file put at PATH while stopped is not
	// known until the next run: destroyed before, its lines are no run's
	// to lose.
	known bool
	// copied is when PATH was last truncated by a copy (copytruncate), as
	// its modification time then: a pointer written before names the
	// content before the copy, and the copy holds all of it, so lines
	// written to PATH after the copy and destroyed while stopped leave a
	// restart nothing to see (copiedSincePointer).
	copied time.Time
}

// rotateAway notes that the lines PATH holds moved to a rotated file:
// kept, but at risk while the first run may not have opened PATH yet, and
// while stopped with no pointer naming a file (the runs before committed
// nothing): the next run is a first run again, and reads PATH alone.
func (fi *fileInput) rotateAway() {
	if fi.running && fi.fresh || !fi.running && !fi.pointerNamesFile() {
		for _, id := range fi.current {
			fi.gen.atRisk[id] = true
		}
	}
	fi.current = nil
}

// destroy marks the lines PATH holds as destroyed: while a run follows,
// they are at risk (the source may never have seen them); while stopped,
// the restart must count a loss for any it had not read.
func (fi *fileInput) destroy() {
	if fi.running || !fi.known || !fi.pointerPast() || fi.copiedSincePointer() {
		for _, id := range fi.current {
			fi.gen.atRisk[id] = true
		}
	}
	fi.current = nil
}

func (fi *fileInput) appendLines(lines []line) error {
	if len(lines) == 0 {
		return nil
	}
	for _, l := range lines {
		fi.current = append(fi.current, l.id)
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	f, err := os.OpenFile(fi.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// nextRotated is the name of the next rotated file, PATH-000K (the file
// source's default rotated names include PATH-*).
func (fi *fileInput) nextRotated() string {
	fi.rotated++
	return fmt.Sprintf("%s-%04d", fi.path, fi.rotated)
}

// apply does op to the input. A rotation by rename moves PATH aside and
// creates it again empty; by copy it copies PATH aside then truncates it
// (the writer keeps appending at its end); a burst is N renames, each
// after a line or two; truncate, rewrite and recreate destroy what was in
// PATH (a careless operator), rewrite and recreate writing N new lines.
func (fi *fileInput) apply(op inputOp) error {
	switch op.Kind {
	case opAppend:
		return fi.appendLines(fi.gen.gen(op.N))
	case opRename:
		if err := fi.appendLines(fi.gen.gen(op.N)); err != nil {
			return err
		}
		if err := os.Rename(fi.path, fi.nextRotated()); err != nil {
			return err
		}
		fi.rotateAway()
		fi.known = fi.running
		return os.WriteFile(fi.path, nil, 0o644)
	case opCopy:
		lines := fi.gen.gen(op.N)
		if err := fi.appendLines(lines); err != nil {
			return err
		}
		if fi.running {
			// Written, copied and truncated within one look of the
			// source: a file it had read nothing of still looks empty
			// after, so the copy cannot be known to hold them.
			for _, l := range lines {
				fi.gen.atRisk[l.id] = true
			}
		}
		if err := copyFile(fi.path, fi.nextRotated()); err != nil {
			return err
		}
		fi.rotateAway()
		if err := os.Truncate(fi.path, 0); err != nil {
			return err
		}
		st, err := os.Stat(fi.path)
		if err != nil {
			return err
		}
		fi.copied = st.ModTime()
		return nil
	case opBurst:
		for range op.N {
			if err := fi.appendLines(fi.gen.gen(1 + fi.gen.r.IntN(2))); err != nil {
				return err
			}
			if err := os.Rename(fi.path, fi.nextRotated()); err != nil {
				return err
			}
			fi.rotateAway()
			fi.known = fi.running
			if err := os.WriteFile(fi.path, nil, 0o644); err != nil {
				return err
			}
		}
		return nil
	case opTruncate:
		fi.destroy()
		return os.Truncate(fi.path, 0)
	case opRewrite:
		old, err := os.ReadFile(fi.path)
		if err != nil {
			return err
		}
		fi.destroy()
		var b bytes.Buffer
		for b.Len() < len(old) || b.Len() == 0 {
			for _, l := range fi.gen.gen(max(1, op.N)) {
				b.WriteString(l.text)
				b.WriteByte('\n')
				fi.current = append(fi.current, l.id)
			}
		}
		f, err := os.OpenFile(fi.path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt(b.Bytes(), 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case opRecreate:
		fi.destroy()
		if err := os.Remove(fi.path); err != nil {
			return err
		}
		fi.known = fi.running
		return fi.appendLines(fi.gen.gen(max(1, op.N)))
	}
	return fmt.Errorf("torture: %s is not an operation on a file", op.Kind)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// hashFiles hashes the files of dir whose names start with one of the
// prefixes: what a refused run must leave as it found it.
func hashFiles(dir string, prefixes ...string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasSuffix(name, ".blackbox-lock") || strings.HasSuffix(name, "-shm") {
			// A lock holds nothing; an SQLite recording's -shm is the
			// index of its write-ahead log, which any reader rebuilds
			// (a run's outbox reads a killed run's recording): no row.
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					return nil, err
				}
				h := fnv.New64a()
				h.Write(b)
				out[name] = fmt.Sprintf("%d:%x", len(b), h.Sum64())
				break
			}
		}
	}
	return out, nil
}

// pointerNamesFile reports whether the pointer file names a file (an
// identity): a restart then looks for that file among the rotated ones.
func (fi *fileInput) pointerNamesFile() bool {
	b, err := os.ReadFile(fi.path + ".ptr")
	return err == nil && len(b) >= 24 && binary.LittleEndian.Uint64(b[16:24]) != 0
}

// copiedSincePointer reports whether PATH was copied and truncated
// (copytruncate) since the pointer file was last written: the pointer's
// offset is then in the content the copy holds, and a restart that finds
// PATH shorter reads the copy and cannot know of lines written to PATH
// after the copy and destroyed while stopped (seed 1796320000000000140).
func (fi *fileInput) copiedSincePointer() bool {
	if fi.copied.IsZero() {
		return false
	}
	st, err := os.Stat(fi.path + ".ptr")
	return err == nil && !st.ModTime().After(fi.copied)
}

// pointerPast reports whether the pointer file (read while stopped) names
// the file now at PATH with a committed offset past 0: only then can a
// restart see that the file lost bytes after it (shorter than the offset,
// or its first bytes changed). A pointer at 0, or on another file (an
// older one the rotation left), leaves bytes destroyed at PATH without a
// trace: no source can know them.
func (fi *fileInput) pointerPast() bool {
	b, err := os.ReadFile(fi.path + ".ptr")
	if err != nil || len(b) < 24 {
		return false
	}
	offset := int64(binary.LittleEndian.Uint64(b[0:8]))
	id := binary.LittleEndian.Uint64(b[16:24])
	st, err := os.Stat(fi.path)
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	var k [16]byte
	binary.LittleEndian.PutUint64(k[0:], uint64(sys.Dev))
	binary.LittleEndian.PutUint64(k[8:], uint64(sys.Ino))
	h := fnv.New64a()
	h.Write(k[:])
	return offset > 0 && id == h.Sum64()
}
