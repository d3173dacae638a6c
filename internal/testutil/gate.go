package testutil

import (
	"context"
	"sync"
	"testing"
)

// Gate is a one-shot gate: closed until the test opens it, then open for
// good. A waiter also goes on when the test ends, so that a failed test
// never leaves a goroutine (a processor, and the engine's Stop waiting for
// it) blocked. Safe for concurrent use.
type Gate struct {
	ch   chan struct{}
	once sync.Once
	end  context.Context
}

// NewGate returns a closed gate that lets its waiters go when t ends.
func NewGate(t testing.TB) *Gate {
	return &Gate{ch: make(chan struct{}), end: t.Context()}
}

// Open opens the gate; opening it again does nothing.
func (g *Gate) Open() { g.once.Do(func() { close(g.ch) }) }

// Wait waits until the gate is open or the test has ended.
func (g *Gate) Wait() {
	select {
	case <-g.ch:
	case <-g.end.Done():
	}
}
