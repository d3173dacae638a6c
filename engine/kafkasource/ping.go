package kafkasource

import (
	"context"
	"errors"
)

// ErrNoClient: Ping was called before the source's client was created (its
// Run had not begun) or after Close.
var ErrNoClient = errors.New("kafkasource: no client")

// Ping asks the brokers whether any of them answers (the client's Ping: an
// ApiVersions request to a discovered or seed broker): nil when one did, the
// error of the last one tried otherwise. It does not touch the group. Safe
// for concurrent use; ctx bounds the wait.
func (s *Source) Ping(ctx context.Context) error {
	s.mu.Lock()
	cl := s.cl
	s.mu.Unlock()
	if cl == nil || s.closed.Load() {
		return ErrNoClient
	}
	return cl.Ping(ctx)
}
