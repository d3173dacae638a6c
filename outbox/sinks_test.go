package outbox_test

import (
	"errors"
	"sync"

	"github.com/blackbox-audit/blackbox/core"
)

var errSink = errors.New("test: the sink failed")

// memSink is a core.EffectSink of the tests': what it holds outlives the
// outboxes of a test's runs, as a database outlives the process an outbox
// runs in. Told to, it fails one batch: it applies the first apply of its
// effects (all of them: -1), then fails, as a process killed part way
// through, or right after, the sink's write would. Safe for concurrent use.
type memSink struct {
	mu     sync.Mutex
	idem   bool // drops an output whose key it holds (core.Idempotent)
	tx     bool // applies a batch whole or not at all, with its number
	held   []core.Effect
	keys   map[core.EffectKey]bool
	calls  []int64 // the batch of each Deliver call
	last   int64   // the last batch applied (tx)
	failAt int64   // the batch to fail (0: none)
	apply  int
	failed int          // the size of the batch failed
	called chan<- int64 // told each Deliver call's batch, when set
}

func (s *memSink) Deliver(n int64, effects []core.Effect) error {
	s.mu.Lock()
	called := s.called
	defer func() {
		s.mu.Unlock()
		if called != nil {
			called <- n
		}
	}()
	s.calls = append(s.calls, n)
	apply := len(effects)
	fail := s.failAt > 0 && n == s.failAt
	if fail {
		s.failAt, s.failed = 0, len(effects)
		if s.apply >= 0 {
			apply = s.apply
		}
		if s.tx && apply < len(effects) {
			apply = 0 // all or nothing
		}
	}
	for _, e := range effects[:apply] {
		if s.idem && s.keys[e.Key] {
			continue
		}
		if s.keys == nil {
			s.keys = map[core.EffectKey]bool{}
		}
		s.keys[e.Key] = true
		e.Payload = append([]byte(nil), e.Payload...)
		s.held = append(s.held, e)
	}
	if s.tx && apply == len(effects) {
		s.last = n
	}
	if fail {
		return errSink
	}
	return nil
}

// payloads is what the sink holds, in order.
func (s *memSink) payloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l []string
	for _, e := range s.held {
		l = append(l, string(e.Payload))
	}
	return l
}

func (s *memSink) effects() []core.Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.Effect(nil), s.held...)
}

func (s *memSink) batchCalls() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.calls...)
}

// failBatch makes the sink fail batch n once, having applied apply of
// its effects (-1: all).
func (s *memSink) failBatch(n int64, apply int) {
	s.mu.Lock()
	s.failAt, s.apply = n, apply
	s.mu.Unlock()
}

func (s *memSink) failedSize() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// plainSink is an EffectSink of no capability: at least once.
type plainSink struct{ *memSink }

// idemSink is a core.Idempotent sink.
type idemSink struct{ *memSink }

func (idemSink) Idempotent() {}

// txSink is a core.Transactional sink.
type txSink struct{ *memSink }

func (s txSink) Delivered() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

var (
	_ core.Idempotent    = idemSink{}
	_ core.Transactional = txSink{}
)

// tell makes the sink tell each Deliver call's batch on ch (nil: none).
func (s *memSink) tell(ch chan<- int64) {
	s.mu.Lock()
	s.called = ch
	s.mu.Unlock()
}
