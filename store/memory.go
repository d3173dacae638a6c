package store

import (
	"fmt"
	"iter"
	"sync"
)

// Memory is a recording held in memory: the reference backend, used by
// tests and by the conformance suite, read through the one checked reader
// (Recording) as every backend is. It holds the rows as Normalize returns
// them and hands out copies, so callers never share its memory.
//
// A Memory from NewMemory is writable; one from OpenMemory or ReadOnly is
// read-only (Append returns ErrReadOnly). Close ends appending
// (ErrClosed); reads keep working after Close. Memory has no torn rows; its
// Problem lines are row positions (META = 1).
//
// Memory is safe for concurrent use: readers may read while one writer
// appends; each read sees the rows appended before it began.
type Memory struct {
	*Recording
	b *memBackend
}

// memBackend is the Backend of a Memory.
type memBackend struct {
	mu       sync.RWMutex
	rows     []Entry
	readOnly bool
	closed   bool
	journal  map[journalKey]int // (feed, seq) -> position of the first JOURNAL row
}

// NewMemory returns an empty, writable recording.
func NewMemory() *Memory {
	b := &memBackend{journal: make(map[journalKey]int)}
	return &Memory{Recording: CreateBackend(b, ""), b: b}
}

// OpenMemory returns a read-only recording holding rows as they are, like a
// file holding them: rows are not validated (a row of an unknown kind is a
// malformed Problem, as in a file). A first row that is META with another
// format than Format is refused with an error wrapping ErrFormat.
func OpenMemory(rows ...Entry) (*Memory, error) {
	b := &memBackend{journal: make(map[journalKey]int), readOnly: true}
	for _, e := range rows {
		b.add(Normalize(e))
	}
	return openMemory(b)
}

func openMemory(b *memBackend) (*Memory, error) {
	r, err := OpenBackend(b, "")
	if err != nil {
		return nil, fmt.Errorf("memory recording: %w", err)
	}
	return &Memory{Recording: r, b: b}, nil
}

// ReadOnly returns a read-only recording holding the rows of m appended so
// far: what Open returns for a file.
func (m *Memory) ReadOnly() *Memory {
	rows := m.b.snapshot()
	b := &memBackend{journal: make(map[journalKey]int), readOnly: true}
	for _, e := range rows {
		b.add(e)
	}
	r, err := openMemory(b)
	if err != nil { // a META row that does not decode: read it as it is
		r = &Memory{Recording: &Recording{b: b, readOnly: true}, b: b}
	}
	return r
}

// Close ends appending. Reads keep working.
func (m *Memory) Close() error {
	m.b.mu.Lock()
	m.b.closed = true
	m.b.mu.Unlock()
	return nil
}

// Len returns the number of rows.
func (m *Memory) Len() int { return len(m.b.snapshot()) }

func (b *memBackend) add(e Entry) {
	b.rows = append(b.rows, e)
	if e.Kind == KindJournal && e.Processor == "" {
		k := journalKey{e.Source, e.Seq}
		if _, ok := b.journal[k]; !ok {
			b.journal[k] = len(b.rows) - 1
		}
	}
}

func (b *memBackend) snapshot() []Entry {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.rows[:len(b.rows):len(b.rows)]
}

// Append adds rows, all or none: every row is checked by ValidateIn (in the
// format of the META row held or appended first) and CheckRowSize first, as
// a file store checks it.
func (b *memBackend) Append(rows ...Entry) error {
	held := b.snapshot()
	format := ""
	switch {
	case len(held) > 0:
		if meta, err := DecodeMeta(held[0]); err == nil {
			format = meta.Format
		}
	case len(rows) > 0 && rows[0].Kind == KindMeta:
		if meta, err := DecodeMeta(rows[0]); err == nil {
			format = meta.Format
		}
	}
	for i := range rows {
		err := ValidateIn(format, rows[i])
		if err == nil {
			err = CheckRowSize(&rows[i], Format)
		}
		if err != nil {
			return fmt.Errorf("memory recording: %w", err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.readOnly:
		return fmt.Errorf("memory recording: %w", ErrReadOnly)
	case b.closed:
		return fmt.Errorf("memory recording: %w", ErrClosed)
	}
	for _, e := range rows {
		b.add(Normalize(e))
	}
	return nil
}

// Sync has nothing to do.
func (b *memBackend) Sync() error { return nil }

// Close has nothing to release: Memory's Close ends appending.
func (b *memBackend) Close() error { return nil }

// unreadable returns the malformed Problem of a row no file could hold
// (one that fails Validate, possible only in a Memory from OpenMemory), or
// nil.
func unreadable(e Entry, line int64) *Problem {
	err := Validate(e)
	if err == nil {
		return nil
	}
	p := &Problem{Kind: ProblemMalformed, Processor: e.Processor, Index: e.Index, Line: line, Detail: err.Error()}
	if e.Kind.Valid() {
		p.Row = e.Kind
	}
	return p
}

// Scan yields every row in storage order, copies; a row that fails
// Validate (only in a Memory from OpenMemory) with its malformed *Problem,
// as a file's reader yields a line that is not a row.
func (b *memBackend) Scan(ScanMode) iter.Seq2[*Row, error] {
	return func(yield func(*Row, error) bool) {
		var row Row
		for i, e := range b.snapshot() {
			row = Row{Line: int64(i + 1), Entry: Normalize(e)}
			if p := unreadable(e, row.Line); p != nil {
				row = Row{Line: row.Line, Entry: Entry{Processor: e.Processor}, Problem: p}
			}
			if !yield(&row, nil) {
				return
			}
		}
	}
}

// Journal returns the first JOURNAL row of (feed, seq).
func (b *memBackend) Journal(feed string, seq int64) (Entry, error) {
	b.mu.RLock()
	i, ok := b.journal[journalKey{feed, seq}]
	var e Entry
	if ok {
		e = b.rows[i]
	}
	b.mu.RUnlock()
	if !ok {
		return Entry{}, fmt.Errorf("memory recording: %w: feed %q seq %d", ErrMissingJournal, feed, seq)
	}
	return Normalize(e), nil
}
