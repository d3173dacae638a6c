package memsource

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// List is a bounded push source: it publishes its items in order, then
// reports END_OF_STREAM. It is safe for concurrent use.
type List struct {
	items []any
}

// NewList returns a source publishing items.
func NewList(items ...any) *List { return &List{items: items} }

// Run publishes every item and ends.
func (l *List) Run(ctx context.Context, f *engine.Intake) error {
	f.SetBounded(true)
	f.SetState(engine.StateBehind, "")
	for _, it := range l.items {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f.Publish(ctx, it); err != nil {
			return err
		}
	}
	f.SetState(engine.StateEndOfStream, "")
	return nil
}

// Chan is a push source fed by a channel: it publishes what it receives
// until the channel is closed (END_OF_STREAM) or the engine stops.
type Chan struct {
	ch <-chan any
}

// NewChan returns a source publishing what ch delivers.
func NewChan(ch <-chan any) *Chan { return &Chan{ch: ch} }

// Run publishes until ch is closed or ctx is done.
func (c *Chan) Run(ctx context.Context, f *engine.Intake) error {
	f.SetState(engine.StateCaughtUp, "")
	for {
		select {
		case <-ctx.Done():
			return nil
		case it, ok := <-c.ch:
			if !ok {
				f.SetState(engine.StateEndOfStream, "")
				return nil
			}
			if err := f.Publish(ctx, it); err != nil {
				return err
			}
		}
	}
}

// Log is an in-memory, re-readable log: items appended at offsets 1, 2, 3
// (the offset of an item is the count of items up to and including it) and a
// committed offset that only the committer moves, forward after the engine
// acknowledged the items, back only for a backwards seek
// (LogSource.Rewind). A new Source over the same Log resumes at
// the committed offset, as a restarted file source resumes at its pointer.
// Log is safe for concurrent use.
type Log struct {
	mu        sync.Mutex
	items     []any
	committed int64
	epoch     int64
	closed    bool
	groups    map[string]int64 // each group's completed offset (GroupSource)
}

// NewLog returns a log holding items, under epoch 1.
func NewLog(items ...any) *Log { return &Log{items: append([]any(nil), items...), epoch: 1} }

// Append adds items at the end.
func (l *Log) Append(items ...any) {
	l.mu.Lock()
	l.items = append(l.items, items...)
	l.mu.Unlock()
}

// Close makes the log bounded: a source reports END_OF_STREAM once it has
// published everything.
func (l *Log) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// Committed is the committed offset.
func (l *Log) Committed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.committed
}

// Len is how many items the log holds.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// Source returns a source reading the log from its committed offset; every
// duty cycle (Interval) it polls acknowledgements, then publishes what it
// can until the feed pauses.
func (l *Log) Source() *LogSource { return &LogSource{log: l, Interval: 200 * time.Microsecond} }

// GroupSource returns a source reading the log as Source does, whose
// committer also keeps each group's own progress with the log's committed
// offset (engine.GroupCommitter), and which tells the feed, at its start,
// what each group completed (engine.Intake.SkipCompleted).
func (l *Log) GroupSource() *LogSource {
	s := l.Source()
	s.groups = map[string]int64{}
	return s
}

// Completed is the offset through which group completed the log's items,
// as its GroupSource committed it (0: none kept).
func (l *Log) Completed(group string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.groups[group]
}

// LogSource reads a Log. It is used by one engine at a time.
type LogSource struct {
	log      *Log
	Interval time.Duration
	pending  int64 // offset acknowledged, not yet committed
	next     int64
	// groups, not nil for a GroupSource: each group's acknowledged
	// offset, not yet committed.
	groups map[string]int64
}

// groupCommitter is a GroupSource's committer.
type groupCommitter struct{ *LogSource }

// GroupAcknowledged records the last item of a group's completed prefix
// (engine.GroupCommitter).
func (c groupCommitter) GroupAcknowledged(group string, cm engine.Commit) {
	if cm.Epoch == c.log.epoch {
		c.groups[group] = max(c.groups[group], cm.Position.Offset)
	}
}

// Commit commits the log's offset and, with it, each group's.
func (c groupCommitter) Commit() error {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	l.committed = max(l.committed, c.pending)
	if l.groups == nil {
		l.groups = map[string]int64{}
	}
	for g, off := range c.groups {
		l.groups[g] = max(l.groups[g], off)
	}
	return nil
}

// Rewind reads the log again from the item after r.To, for a backwards
// seek (engine.Rewinder): the committed offset comes down to r.To (or
// stays where it is, when lower) and, for a GroupSource, each group of
// r.Others keeps its progress (at least the offset that was committed)
// and r.Group's is r.To, so that a new Source over the log hands r.Group
// again every item after r.To and the others nothing they completed. It
// returns the position of the last item it had published.
func (s *LogSource) Rewind(r engine.Rewind) (core.Position, error) {
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	to := r.To.Position.Offset
	if r.To.Epoch != l.epoch || to < 0 || to > s.next {
		return core.Position{}, fmt.Errorf("memsource: rewind to %s of epoch %d: the log reads epoch %d up to offset %d", r.To.Position, r.To.Epoch, l.epoch, s.next)
	}
	through := core.Position{Offset: s.next}
	c := max(l.committed, s.pending)
	if s.groups != nil {
		if l.groups == nil {
			l.groups = map[string]int64{}
		}
		for _, h := range r.Others {
			l.groups[h] = max(l.groups[h], s.groups[h], c)
			s.groups[h] = l.groups[h]
		}
		l.groups[r.Group], s.groups[r.Group] = to, to
	}
	l.committed = min(c, to)
	s.pending, s.next = l.committed, to
	return through, nil
}

var _ engine.Rewinder = (*LogSource)(nil)

// DefaultPolicy pauses: a log can be re-read.
func (s *LogSource) DefaultPolicy() engine.Policy { return engine.Pause() }

// Acknowledged records an acknowledged offset of the current epoch.
func (s *LogSource) Acknowledged(_, epoch int64, pos core.Position) {
	if epoch == s.log.epoch && pos.Offset > s.pending {
		s.pending = pos.Offset
	}
}

// Commit moves the log's committed offset forward to what was acknowledged.
func (s *LogSource) Commit() error {
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	l.committed = max(l.committed, s.pending)
	return nil
}

// Run reads from the committed offset until ctx is done, or, for a closed
// log, until everything was published and acknowledged.
func (s *LogSource) Run(ctx context.Context, f *engine.Intake) error {
	l := s.log
	l.mu.Lock()
	s.next, s.pending = l.committed, l.committed
	f.SetEpoch(l.epoch)
	var c engine.Committer = s
	if s.groups != nil {
		c = groupCommitter{s}
		for g, off := range l.groups {
			if off > l.committed {
				f.SkipCompleted(g, l.epoch, core.Position{Offset: off})
			}
		}
	}
	l.mu.Unlock()
	f.SetCommitter(c)
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		if _, err := f.PollAcks(); err != nil {
			return err
		}
		l.mu.Lock()
		n, closed := int64(len(l.items)), l.closed
		l.mu.Unlock()
		for s.next < n {
			l.mu.Lock()
			it := l.items[s.next]
			l.mu.Unlock()
			if !f.TryPublish(it, core.Position{Offset: s.next + 1}) {
				break
			}
			s.next++
		}
		switch {
		case s.next < n:
			f.SetState(engine.StateBehind, "")
		case closed:
			f.SetBounded(true)
			f.SetState(engine.StateEndOfStream, "")
		default:
			f.SetState(engine.StateCaughtUp, "")
		}
		select {
		case <-ctx.Done():
			_, err := f.PollAcks()
			return err
		case <-t.C:
		}
	}
}
