package recorder

import (
	"sync"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

// commitLog holds the COMMIT rows the engine reported (Observer.Committed),
// and the STATE rows of its loss state changes (Observer.LossState: see
// lossState), that the recorder has not written yet. They cost no write of their own:
// the next Append the recorder makes anyway takes them (withCommits), and
// Close writes what is left. Safe for concurrent use.
type commitLog struct {
	mu      sync.Mutex
	pending []store.Entry // Index unset: given when written
}

// committed keeps a COMMIT row for the next write. It is the
// Observer.Committed hook, called on the feed's polling goroutine after the
// rows of the items it covers were written (their BeforeComplete).
func (r *Recorder) committed(feed string, c engine.Commit) {
	if checkName("feed", feed) != nil || checkName("key", c.Position.Key) != nil {
		return // a feed whose name the format cannot hold has no rows either
	}
	// No instant: reading the clock here would move the instants of the
	// rows after it by a step each time the source happens to commit.
	row := store.Entry{Kind: store.KindCommit, Source: feed, Seq: c.Seq,
		Epoch: c.Epoch, Key: c.Position.Key, Offset: c.Position.Offset}
	r.commits.mu.Lock()
	r.commits.pending = append(r.commits.pending, row)
	r.commits.mu.Unlock()
}

// withCommits returns rows followed by the pending COMMIT rows, indexed
// from r.globalNext, and how many it added (r.mu held). rows is not
// modified. Call commitsWritten(n) once the Append succeeded.
func (r *Recorder) withCommits(rows []store.Entry) ([]store.Entry, int) {
	r.commits.mu.Lock()
	defer r.commits.mu.Unlock()
	n := len(r.commits.pending)
	if n == 0 {
		return rows, 0
	}
	all := make([]store.Entry, 0, len(rows)+n)
	all = append(all, rows...)
	for i, c := range r.commits.pending {
		c.Index = r.globalNext + int64(i)
		all = append(all, c)
	}
	return all, n
}

// commitsWritten drops the first n pending COMMIT rows, written (r.mu
// held).
func (r *Recorder) commitsWritten(n int) {
	if n == 0 {
		return
	}
	r.commits.mu.Lock()
	r.commits.pending = append(r.commits.pending[:0], r.commits.pending[n:]...)
	r.commits.mu.Unlock()
	r.globalNext += int64(n)
}

// flushCommits writes the pending COMMIT rows on their own (r.mu held, the
// recorder not closed): at Close, for the commits made after the last rows.
// A failure is reported by Close; the rows are then lost, which leaves the
// recording showing the commit further behind than it was, never ahead.
func (r *Recorder) flushCommits() error {
	r.commits.mu.Lock()
	n := len(r.commits.pending)
	r.commits.mu.Unlock()
	if n == 0 {
		return nil
	}
	wrote, err := r.appendLocked(nil, true)
	if err != nil {
		return err
	}
	r.wrote(wrote)
	return nil
}
