package apps

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/atomicfile"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// The ledger's saves of its state: its completions (a save per delivery,
// or a delivery counted into a batch), the batched-save machinery (the
// snapshots taken with its checkpoints' marks, the saving goroutine, its
// tries and their failure) and the write of the state file.

// ErrStateNotSaved: the ledger's batched saves of its state kept failing
// (SaveTries in a row); the *StateError names the file.
var ErrStateNotSaved = errors.New("apps: ledger: state not saved")

// SaveTries is how many times in a row the ledger tries a batched save of
// its state before it reports that the state cannot be saved
// (core.Checkpoint.Fail). Tries after a failed one come every
// min(SaveInterval, MaxSaveRetry).
const (
	SaveTries    = 3
	MaxSaveRetry = time.Second
)

// StateError is a state the ledger could not save: its file, how many
// tries in a row failed, and the last one's error. errors.Is(err,
// ErrStateNotSaved) holds and errors.Is/As reach the write's error. It is
// immutable and safe for concurrent use.
type StateError struct {
	Path  string
	Tries int
	Err   error
}

func (e *StateError) Error() string {
	return fmt.Sprintf("apps: ledger state %s: not saved (%d tries in a row): %v", e.Path, e.Tries, e.Err)
}

// Is reports whether target is ErrStateNotSaved.
func (e *StateError) Is(target error) bool { return target == ErrStateNotSaved }

// Unwrap returns the last write's error.
func (e *StateError) Unwrap() error { return e.Err }

// ledgerSnap is a snapshot of the state (a copy: the saving goroutine
// encodes it) and, taken with it, the marks of the ledger's checkpoints
// (by index) it covers. A marks-only snapshot (st nil) covers the state
// last written: nothing changed since.
type ledgerSnap struct {
	st    *LedgerState
	marks []core.Mark
}

// ledgerSaver is the ledger's saving goroutine: kick wakes it for a new
// snapshot; stop ends it, after its last save; done is closed when it has
// returned.
type ledgerSaver struct {
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// ledgerSave is the ledger's completion without batches: a pointer, so
// that registering it on every cycle of a delivery keeps it once. It runs
// right after its delivery: the only one open.
type ledgerSave struct{ l *Ledger }

// Complete records the delivery's position and saves the state.
func (s *ledgerSave) Complete(d *core.Delivery) error {
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.record(d)
	l.closeOpen()
	return l.completedLocked()
}

// ledgerBatchSave is the ledger's completion when it saves in batches: a
// core.BatchCompletion, since a batch's snapshot leaves out the postings
// of every open delivery (committedState), so the engine may run it after
// later deliveries were handled, once the batch's rows are written.
// Completions run in delivery order: it closes the oldest open delivery.
type ledgerBatchSave struct{ l *Ledger }

// Complete records the delivery's position, closes it (its postings are
// kept from now on) and counts it into the batch. The open deliveries
// before it are ones whose completion will never run (every try failed
// after posting, and the engine skipped the delivery): their postings are
// taken back.
func (s *ledgerBatchSave) Complete(d *core.Delivery) error {
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.record(d)
	k := 0
	for k < len(l.opened) && !l.opened[k].is(d) {
		k++
	}
	if k < len(l.opened) {
		l.takeBackFirst(k)
		l.closeFirst()
	} else { // it posted nothing: the deliveries of its feed before it are stale
		k = 0
		for k < len(l.opened) && l.opened[k].feed == d.Feed && l.opened[k].seq < d.Sequence {
			k++
		}
		l.takeBackFirst(k)
	}
	return l.completedLocked()
}

// BatchCompletion marks ledgerBatchSave a core.BatchCompletion.
func (*ledgerBatchSave) BatchCompletion() {}

// UseCheckpoint takes cp for batched saves (core.CheckpointUser); a
// ledger without a state file, or saving every delivery, releases it.
func (l *Ledger) UseCheckpoint(_ string, cp core.Checkpoint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		cp.Release()
		return
	}
	if l.every <= 1 {
		// A save per delivery, in its completion, before the item
		// counts: the hold is not needed, but a save that keeps
		// failing fails the group through it (saveLocked).
		cp.Release()
		l.fails = append(l.fails, cp)
		return
	}
	// Nothing of this run is handled yet: an open delivery is one an
	// earlier run abandoned, whose completion will never run.
	l.st = l.committedState()
	l.closeOpen()
	l.cps = append(l.cps, cp)
	if l.saver == nil {
		l.saver = &ledgerSaver{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		go l.saveLoop(l.saver)
	}
}

// CloseCheckpoint saves what the last save did not cover (without the
// postings of a delivery the engine abandoned, which the next run
// re-delivers), makes it durable, and stops the saving goroutine
// (core.CheckpointUser; Engine.Stop calls it). It returns the error of
// that last save (a *StateError), nil when the state holds everything it
// covers. Later completions save one by one (until an engine starts the
// ledger again).
func (l *Ledger) CloseCheckpoint() error {
	l.mu.Lock()
	s := l.saver
	l.saver = nil
	l.mu.Unlock()
	if s != nil {
		close(s.stop)
		<-s.done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cps, l.next, l.fails = nil, nil, nil
	err := l.saveErr
	l.saveErr = nil
	return err
}

// batched reports whether saves go in batches. mu held.
func (l *Ledger) batched() bool { return len(l.cps) > 0 }

// completedLocked counts a completed delivery (or an input without a
// position, after its cycle): a save now, without batches, whose error it
// returns (saveLocked); else a snapshot once the batch is full (a batch's failed save
// is the saving goroutine's to try again and report, not this delivery's:
// its completion did not fail). mu held.
func (l *Ledger) completedLocked() error {
	if !l.batched() {
		return l.saveLocked()
	}
	l.pending++
	if l.pending >= l.every {
		l.snapshotLocked()
	}
	return nil
}

// snapshotLocked takes the checkpoints' marks and the state together, for
// the saving goroutine to write: every delivery a mark counts has
// completed, so it is in the state; a delivery whose completion has not
// run is not counted, and its postings are left out (committedState).
// mu held.
func (l *Ledger) snapshotLocked() {
	st := l.committedState()
	if len(l.open) == 0 { // committedState shares st's maps: copy them (cheaper than encoding it here)
		st.Balances = maps.Clone(st.Balances)
	}
	st.Spaces, st.Positions = cloneSpaces(st.Spaces), maps.Clone(st.Positions) // shared by committedState in any case
	l.next = &ledgerSnap{st: &st, marks: l.marksLocked()}
	l.pending = 0
	if l.saver != nil {
		select {
		case l.saver.kick <- struct{}{}:
		default: // already kicked
		}
	}
}

func (l *Ledger) marksLocked() []core.Mark {
	ms := make([]core.Mark, len(l.cps))
	for i, cp := range l.cps {
		ms[i] = cp.Mark()
	}
	return ms
}

// tickLocked is the interval's save: a snapshot of what completed since
// the last one; with nothing new, fresh marks for the state last
// snapshotted (they may count the delivery whose completion took it).
// mu held.
func (l *Ledger) tickLocked() {
	switch {
	case l.pending > 0:
		l.snapshotLocked()
	case l.next != nil:
		l.next.marks = l.marksLocked()
	default:
		l.next = &ledgerSnap{marks: l.marksLocked()}
	}
}

// saveLoop is the saving goroutine: it writes each snapshot it is kicked
// for, every interval the snapshot of what completed since, and on stop
// the last one. A failed write is tried again every min(interval,
// MaxSaveRetry) (not sooner when a batch fills); after SaveTries failures
// in a row it tells the checkpoints (Fail: the engine fails the group, and
// the run stops) and only waits for stop, where it tries the last save.
func (l *Ledger) saveLoop(s *ledgerSaver) {
	defer close(s.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	retry := min(l.interval, MaxSaveRetry)
	fails := 0
	for fails < SaveTries {
		select {
		case <-s.kick:
			if fails > 0 {
				continue // failing: the tries keep their pace, and each writes the latest snapshot
			}
		case <-t.C:
			l.mu.Lock()
			l.tickLocked()
			l.mu.Unlock()
		case <-s.stop:
			l.last()
			return
		}
		wrote, err := l.writeNext()
		switch {
		case err != nil:
			fails++
			if fails == 1 && retry < l.interval {
				t.Reset(retry)
			}
		case wrote && fails > 0:
			fails = 0
			if retry < l.interval {
				t.Reset(l.interval)
			}
		}
	}
	l.mu.Lock()
	err := l.saveErr
	cps := l.cps
	l.mu.Unlock()
	for _, cp := range cps {
		cp.Fail(err)
	}
	<-s.stop
	l.last()
}

// last is the saving goroutine's last save, when the engine stops.
func (l *Ledger) last() {
	l.mu.Lock()
	l.tickLocked()
	l.mu.Unlock()
	l.writeNext()
}

// writeNext writes the latest snapshot, if any (wrote: a state was
// written), then makes its marks durable. A failed write (err) counts in
// the ledger's saveErr (a *StateError, its tries in a row), releases
// nothing, and leaves the state to snapshot again at the next interval; a
// write that succeeds clears saveErr.
func (l *Ledger) writeNext() (wrote bool, err error) {
	l.mu.Lock()
	sn := l.next
	l.next = nil
	cps := l.cps
	l.mu.Unlock()
	if sn == nil {
		return false, nil
	}
	if sn.st != nil {
		b, err := json.Marshal(sn.st)
		if err == nil {
			err = l.write(b, sn.st.Offset)
		}
		l.mu.Lock()
		if err != nil {
			tries := 1
			if se, ok := l.saveErr.(*StateError); ok {
				tries = se.Tries + 1
			}
			se := &StateError{Path: l.path, Tries: tries, Err: err}
			l.saveErr = se
			l.pending = max(l.pending, 1)
			l.mu.Unlock()
			return false, se
		}
		l.saveErr = nil
		l.mu.Unlock()
	}
	for i, m := range sn.marks { // marks[i] is cps[i]'s: cps only grows (UseCheckpoint) until CloseCheckpoint
		// A stale or empty mark (the feed subscribed again, or not at
		// all) releases nothing; the next snapshot's marks will.
		_ = cps[i].DurableThrough(m)
	}
	return sn.st != nil, nil
}

// saveLocked is the save of a delivery's completion without batches.
// Alone (a core.Host: no checkpoints) it writes the state once and returns
// the error, naming the state. Run by an engine (checkpoints to Fail), it
// tries SaveTries times in a row, every min(SaveInterval, MaxSaveRetry)
// (mu released meanwhile), and when every try failed it fails the
// checkpoints' group (core.Checkpoint.Fail with a *StateError) before it
// returns that error: the engine then does not count the delivery, so the
// source never commits a line the state file does not hold (a completion
// skipped after its retries would be committed). mu held.
func (l *Ledger) saveLocked() error {
	if len(l.fails) == 0 {
		if err := l.persist(); err != nil {
			return fmt.Errorf("apps: ledger state %s: %w", l.path, err)
		}
		return nil
	}
	retry := min(l.interval, MaxSaveRetry)
	var err error
	for try := 1; ; try++ {
		if err = l.persist(); err == nil {
			l.saveErr = nil
			return nil
		}
		l.saveErr = &StateError{Path: l.path, Tries: try, Err: err}
		if try == SaveTries {
			break
		}
		l.mu.Unlock()
		time.Sleep(retry)
		l.mu.Lock()
	}
	for _, cp := range l.fails {
		cp.Fail(l.saveErr)
	}
	return l.saveErr
}

// persist writes the state file at once; its error is the file system's.
// mu held.
func (l *Ledger) persist() error {
	if l.path == "" {
		return nil
	}
	st := l.committedState()
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return l.write(b, st.Offset)
}

// write writes the state file atomically: a temporary file in the same
// directory, fsync, rename over the state file, fsync of the directory.
// offset is the position of the last input the state holds (the value of
// the kill point StateSaved). One goroutine writes at a time: the
// engine's without batches, the saving goroutine with them. Its error is
// the file system's; the callers name the state.
func (l *Ledger) write(b []byte, offset int64) error {
	if err := atomicfile.Write(l.path, ".tmp", func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}); err != nil {
		return err
	}
	l.saves.Add(1)
	killpoint.ReachAt(killpoint.StateSaved, offset) // tests only: dormant unless armed
	return nil
}

// StateSaves counts the writes of the state file that succeeded (each
// durable: written, synced and renamed over the file), both a save per
// delivery and a batch's. Safe for concurrent use.
func (l *Ledger) StateSaves() int64 { return l.saves.Load() }
