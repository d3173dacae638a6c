package store_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/store"
)

// memoryBackend keys Memory recordings by path. Corrupted recordings are
// kept as raw rows and opened with OpenMemory, like a damaged file.
type memoryBackend struct {
	mu   sync.Mutex
	mems map[string]*store.Memory
	raw  map[string][]store.Entry
}

func newMemoryBackend() *memoryBackend {
	return &memoryBackend{mems: map[string]*store.Memory{}, raw: map[string][]store.Entry{}}
}

func (b *memoryBackend) Create(path string) (storetest.Store, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m, ok := b.mems[path]; (ok && m.Len() > 0) || len(b.raw[path]) > 0 {
		return nil, fmt.Errorf("memory %s: %w", path, store.ErrHoldsRecording)
	}
	m := store.NewMemory()
	b.mems[path] = m
	return m, nil
}

func (b *memoryBackend) Open(path string) (storetest.Store, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if raw, ok := b.raw[path]; ok {
		return store.OpenMemory(raw...)
	}
	m, ok := b.mems[path]
	if !ok {
		return nil, fmt.Errorf("memory %s: no recording", path)
	}
	// Refuse a META of another format, as a file store's Open does.
	r, err := store.OpenMemory(store.MemoryRows(m)...)
	if err != nil {
		return nil, fmt.Errorf("memory %s: %w", path, err)
	}
	return r, nil
}

func (b *memoryBackend) rows(path string) []store.Entry {
	if raw, ok := b.raw[path]; ok {
		return raw
	}
	var rows []store.Entry
	for e := range b.mems[path].Rows() {
		rows = append(rows, e)
	}
	return rows
}

func (b *memoryBackend) Truncate(path string, n int64) error {
	return fmt.Errorf("memory has no bytes to cut: %w", errors.ErrUnsupported)
}

func (b *memoryBackend) DeleteRow(path string, row int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	rows := b.rows(path)
	b.raw[path] = append(rows[:row-1:row-1], rows[row:]...)
	return nil
}

func (b *memoryBackend) SetField(path string, row int64, column, value string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	rows := append([]store.Entry(nil), b.rows(path)...)
	e := &rows[row-1]
	num := func(p *int64) error {
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("memory cannot hold %s %q: %w", column, value, errors.ErrUnsupported)
		}
		*p = v
		return nil
	}
	var err error
	switch column {
	case "processor":
		e.Processor = value
	case "index":
		err = num(&e.Index)
	case "kind":
		e.Kind = store.Kind(value)
	case "source":
		e.Source = value
	case "seq":
		err = num(&e.Seq)
	case "epoch":
		err = num(&e.Epoch)
	case "key":
		e.Key = value
	case "offset":
		err = num(&e.Offset)
	case "n":
		err = num(&e.N)
	case "payload":
		e.Payload, err = store.DecodePayload(value)
	case "detail":
		e.Detail = value
	case "instant":
		e.Instant, err = time.Parse(time.RFC3339Nano, value)
	case "reads":
		e.Reads = nil
		for s := range strings.SplitSeq(value, ";") {
			t, perr := time.Parse(time.RFC3339Nano, s)
			if perr != nil {
				err = perr
			}
			e.Reads = append(e.Reads, t)
		}
	default:
		return fmt.Errorf("no column %q", column)
	}
	if err != nil {
		return fmt.Errorf("memory cannot hold %s %q: %w", column, value, errors.ErrUnsupported)
	}
	b.raw[path] = rows
	return nil
}

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, newMemoryBackend())
}
