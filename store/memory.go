package store

import (
	"fmt"
	"iter"
	"sync"
)

// Memory is a recording held in memory: the reference backend, used by
// tests and by the conformance suite. It holds the rows as Normalize
// returns them and hands out copies, so callers never share its memory.
//
// A Memory from NewMemory is writable; one from OpenMemory or ReadOnly is
// read-only (Append returns ErrReadOnly). Close ends appending
// (ErrClosed); reads keep working after Close. Memory has no torn rows; its
// Problem lines are row positions (META = 1).
//
// Memory is safe for concurrent use: readers may read while one writer
// appends; each read sees the rows appended before it began.
type Memory struct {
	mu       sync.RWMutex
	rows     []Entry
	readOnly bool
	closed   bool
	journal  map[journalKey]int // (feed, seq) -> position of the first JOURNAL row

	checked  int // len(rows) when problems was computed; -1 never
	problems []Problem
	procs    []string
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty, writable recording.
func NewMemory() *Memory {
	return &Memory{journal: make(map[journalKey]int), checked: -1}
}

// OpenMemory returns a read-only recording holding rows as they are, like a
// file holding them: rows are not validated (a row of an unknown kind is a
// malformed Problem, as in a file). A first row that is META with another
// format than Format is refused with an error wrapping ErrFormat.
func OpenMemory(rows ...Entry) (*Memory, error) {
	m := NewMemory()
	m.readOnly = true
	if len(rows) > 0 && rows[0].Kind == KindMeta {
		if _, err := DecodeMeta(rows[0]); err != nil {
			return nil, fmt.Errorf("memory recording: %w", err)
		}
	}
	for _, e := range rows {
		m.add(Normalize(e))
	}
	return m, nil
}

// ReadOnly returns a read-only recording holding the rows of m appended so
// far: what Open returns for a file.
func (m *Memory) ReadOnly() *Memory {
	m.mu.RLock()
	rows := m.rows[:len(m.rows):len(m.rows)]
	m.mu.RUnlock()
	r := NewMemory()
	r.readOnly = true
	for _, e := range rows {
		r.add(e)
	}
	return r
}

func (m *Memory) add(e Entry) {
	m.rows = append(m.rows, e)
	if e.Kind == KindJournal && e.Processor == "" {
		k := journalKey{e.Source, e.Seq}
		if _, ok := m.journal[k]; !ok {
			m.journal[k] = len(m.rows) - 1
		}
	}
}

// Append adds rows, all or none: every row is checked by ValidateIn (in the
// format of the META row held or appended first) and CheckRowSize first, as
// a file store checks it.
func (m *Memory) Append(rows ...Entry) error {
	format := m.Meta().Format
	if len(rows) > 0 && rows[0].Kind == KindMeta && m.Len() == 0 {
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
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.readOnly:
		return fmt.Errorf("memory recording: %w", ErrReadOnly)
	case m.closed:
		return fmt.Errorf("memory recording: %w", ErrClosed)
	}
	for _, e := range rows {
		m.add(Normalize(e))
	}
	return nil
}

// Close ends appending. Reads keep working.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// Len returns the number of rows.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.rows)
}

func (m *Memory) snapshot() []Entry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rows[:len(m.rows):len(m.rows)]
}

// Meta returns the decoded META row, or the zero Meta when the first row is
// not a META row.
func (m *Memory) Meta() Meta {
	rows := m.snapshot()
	if len(rows) == 0 {
		return Meta{}
	}
	meta, err := DecodeMeta(rows[0])
	if err != nil {
		return Meta{}
	}
	return meta
}

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

// Rows yields every row in storage order. A row that fails Validate (only
// in a Memory from OpenMemory) is yielded as a zero Entry with its
// malformed *Problem, as a file's reader yields a line that is not a row.
func (m *Memory) Rows() iter.Seq2[Entry, error] {
	return m.entries(func(Entry) bool { return true })
}

// Stream yields the rows of one processor in storage order, as Rows.
func (m *Memory) Stream(processor string) iter.Seq2[Entry, error] {
	return m.entries(func(e Entry) bool { return e.Processor == processor })
}

// entries yields the rows that keep selects, as Rows says.
func (m *Memory) entries(keep func(Entry) bool) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for i, e := range m.snapshot() {
			if !keep(e) {
				continue
			}
			if p := unreadable(e, int64(i+1)); p != nil {
				if !yield(Entry{}, p) {
					return
				}
				continue
			}
			if !yield(Normalize(e), nil) {
				return
			}
		}
	}
}

// Journal returns the first JOURNAL row of (feed, seq).
func (m *Memory) Journal(feed string, seq int64) (Entry, error) {
	m.mu.RLock()
	i, ok := m.journal[journalKey{feed, seq}]
	var e Entry
	if ok {
		e = m.rows[i]
	}
	m.mu.RUnlock()
	if !ok {
		return Entry{}, fmt.Errorf("memory recording: %w: feed %q seq %d", ErrMissingJournal, feed, seq)
	}
	return Normalize(e), nil
}

func (m *Memory) check() ([]Problem, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.checked != len(m.rows) {
		var c Checker
		for i, e := range m.rows {
			if p := unreadable(e, int64(i+1)); p != nil {
				c.Report(*p)
				continue
			}
			c.Add(e, int64(i+1))
		}
		m.procs = c.Processors()
		m.problems = c.Finish()
		m.checked = len(m.rows)
	}
	return m.problems, m.procs
}

// Processors lists the processors in the order their streams start.
func (m *Memory) Processors() []string {
	_, procs := m.check()
	return append([]string(nil), procs...)
}

// Problems checks the rows held now (a writable Memory being written is
// unfinished until its END rows are appended).
func (m *Memory) Problems() []Problem {
	ps, _ := m.check()
	return append([]Problem(nil), ps...)
}

// Verify is Problems: a Memory has nothing to re-read.
func (m *Memory) Verify() []Problem { return m.Problems() }
