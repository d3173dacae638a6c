package recorder

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync/atomic"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

// journalSlots is how many recent items of each journalled feed the
// recorder remembers (the hash of their encoded payload), to decide whether
// a processor's input is INDEXED. An input whose journal entry has left the
// ring (its group lags further behind its feed) is written INLINE: correct,
// only larger.
const journalSlots = 1 << 17

// feedJournal is one journalled feed: a ring of (seq, hash of the JOURNAL
// row's payload). Its one writer is the feed's publisher (under the feed's
// lock); its readers are the subscribing groups. A slot is a seqlock: the
// seq is cleared, the hash written, then the seq set; a reader accepts the
// hash only if it reads the same seq before and after it. Seqs of a feed
// only grow, so a slot never shows an old seq again.
type feedJournal struct {
	name   string
	broken atomic.Bool
	slots  []slot
	last   atomic.Int64 // the highest seq whose JOURNAL row was written
}

type slot struct {
	seq  atomic.Int64
	hash atomic.Uint64
}

func newFeedJournal(name string, n int) *feedJournal {
	return &feedJournal{name: name, slots: make([]slot, n)}
}

func (j *feedJournal) put(seq int64, h uint64) {
	s := &j.slots[uint64(seq)%uint64(len(j.slots))]
	s.seq.Store(0)
	s.hash.Store(h)
	s.seq.Store(seq)
}

func (j *feedJournal) get(seq int64) (uint64, bool) {
	if seq <= 0 { // 0 marks a slot being written; feeds number from 1
		return 0, false
	}
	s := &j.slots[uint64(seq)%uint64(len(j.slots))]
	if s.seq.Load() != seq {
		return 0, false
	}
	h := s.hash.Load()
	if s.seq.Load() != seq {
		return 0, false
	}
	return h, true
}

// fnv64a is the FNV-1a 64 hash of b.
func fnv64a(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// journalled reports whether (feed, seq) has a JOURNAL row whose payload
// is b.
func (r *Recorder) journalled(feed string, seq int64, b []byte) bool {
	v, ok := r.feeds.Load(feed)
	if !ok {
		return false
	}
	h, ok := v.(*feedJournal).get(seq)
	return ok && h == fnv64a(b)
}

func (r *Recorder) feedJournal(feed string) *feedJournal {
	if v, ok := r.feeds.Load(feed); ok {
		return v.(*feedJournal)
	}
	r.feedMu.Lock()
	defer r.feedMu.Unlock()
	if v, ok := r.feeds.Load(feed); ok {
		return v.(*feedJournal)
	}
	j := newFeedJournal(feed, journalSlots)
	r.feeds.Store(feed, j)
	return j
}

// breakJournal stops journalling a feed, once: its later items are recorded
// INLINE.
func (r *Recorder) breakJournal(j *feedJournal, err error) {
	if j.broken.Swap(true) {
		return
	}
	be := &BrokenError{Feed: j.name, Err: err}
	r.errMu.Lock()
	r.errs = append(r.errs, be)
	r.errMu.Unlock()
	r.log.Warn(fmt.Sprintf("blackbox %v", be))
}

type journal struct{ r *Recorder }

// Journal returns the engine.Journal that writes each item of a journalled
// feed once, as a JOURNAL row, before it is dispatched; put it in the
// FeedConfig.Journal of the feeds to journal. It is an engine.JournalBatch:
// the items a source publishes in one batch (Intake.TryPublishBatch, as the
// file source does) are written with one Append (one write, one
// transaction). A failure to journal never refuses an item (the live run
// goes on): the feed's journal stops and its later inputs are recorded
// INLINE. It is safe for concurrent use.
func (r *Recorder) Journal() engine.Journal { return journal{r} }

// Append journals one item.
func (j journal) Append(ctx context.Context, feed string, seq int64, item any) error {
	return j.AppendBatch(ctx, feed, seq, []any{item})
}

// AppendBatch journals items[i] under sequence first+i with one Append.
// An item the codec cannot encode stops the feed's journal: the items
// before it are journalled, it and every later item of the feed are not.
func (j journal) AppendBatch(_ context.Context, feed string, first int64, items []any) error {
	r := j.r
	fj := r.feedJournal(feed)
	if fj.broken.Load() {
		return nil
	}
	if err := checkName("feed", feed); err != nil {
		r.breakJournal(fj, err)
		return nil
	}
	rows := make([]store.Entry, 0, len(items))
	var encErr error
	for i, item := range items {
		b, err := r.encode(item)
		if err != nil {
			encErr = fmt.Errorf("item seq %d: %w", first+int64(i), err)
			break
		}
		rows = append(rows, store.Entry{Kind: store.KindJournal, Source: feed, Seq: first + int64(i), Payload: b})
	}
	if len(rows) > 0 {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			r.breakJournal(fj, ErrClosed)
			return nil
		}
		for i := range rows {
			rows[i].Index = r.globalNext + int64(i)
		}
		var err error
		if !r.open && r.openErr == nil {
			// Not written yet: the opening takes them (the items are not
			// dispatched before it is written, and their inputs' rows are
			// written with it or after it).
			if err = holdable(rows); err == nil {
				r.head = append(r.head, rows...)
				r.globalNext += int64(len(rows))
			}
		} else {
			var n int
			if n, err = r.appendLocked(rows, false); err == nil {
				r.globalNext += int64(len(rows))
				r.wrote(n)
			}
		}
		r.mu.Unlock()
		if err != nil {
			r.breakJournal(fj, err)
			return nil
		}
		for _, e := range rows {
			fj.put(e.Seq, fnv64a(e.Payload))
		}
		storeMax(&fj.last, rows[len(rows)-1].Seq)
	}
	if encErr != nil {
		r.breakJournal(fj, encErr)
	}
	return nil
}

// storeMax raises v to x, if x is higher.
func storeMax(v *atomic.Int64, x int64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}
