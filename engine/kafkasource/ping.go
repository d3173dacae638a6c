package kafkasource

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kadm"
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

// EndOffsets lists the end offset of every partition of the source's
// topics now (kadm's ListEndOffsets: each partition's high watermark, the
// offset its next record will get), by topic and partition: what a lag is
// measured against, fresh even while the source does not fetch (paused,
// or idle). A partition the brokers could not list is left out. ctx bounds
// the request. Safe for concurrent use; ErrNoClient before Run, or after
// Close.
func (s *Source) EndOffsets(ctx context.Context) (map[string]map[int32]int64, error) {
	s.mu.Lock()
	cl := s.cl
	s.mu.Unlock()
	if cl == nil || s.closed.Load() {
		return nil, ErrNoClient
	}
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, s.opts.Topics...)
	if err != nil {
		return nil, err
	}
	ends := map[string]map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset < 0 {
			return
		}
		if ends[o.Topic] == nil {
			ends[o.Topic] = map[int32]int64{}
		}
		ends[o.Topic][o.Partition] = o.Offset
	})
	return ends, nil
}
