package outbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

// recoverChunk bounds the effects of one batch recovery delivers.
const recoverChunk = 4096

// Open opens the outbox of cfg.Marks and recovers before anything runs:
// it finishes the batch a crash interrupted (for the file sink, appending
// what of it the file lacks), then delivers every output the earlier runs
// the marks name recorded (their inputs' rows whole) but did not deliver,
// in order, and notes the positions of those inputs no commit covered:
// this run delivers no output of theirs again (Status.Suppressed). Then it
// rewrites the marks file (whole or not at all) as a header that names no
// run. It refuses marks written for another sink or line
// format, a recording they need that is gone or replaced, and a file sink
// whose file does not hold what they say, before delivering anything.
func Open(cfg Config) (*Outbox, error) {
	if cfg.Sink == nil || cfg.Marks == "" {
		return nil, errors.New("outbox: no sink or no marks file")
	}
	o := &Outbox{cfg: cfg, log: cfg.Logger, queues: map[class]*queue{}, through: map[class]int64{}, commits: map[string]bool{}, liveCommits: map[posKey]int64{}, seqs: map[string]int64{}, back: map[string]int64{}, wake: make(chan struct{}, 1),
		done: make(chan struct{}), failed: make(chan struct{}), parser: newParser(true), sup: newSuppress()}
	if o.log == nil {
		o.log = slog.Default()
	}
	o.st.Guarantee = guarantee(cfg.Sink)
	m, ok, err := readMarks(cfg.Marks)
	if err != nil {
		return nil, err
	}
	kind, format := sinkKind(cfg.Sink)
	file, _ := cfg.Sink.(*File)
	if file != nil && cfg.Durable {
		file.sync = true // Config.Durable: each file batch synced
	}
	if !ok {
		m.head = header{Version: marksVersion, Sink: kind, Format: format}
		if file != nil {
			m.head.Size = file.size
		}
		if err := writeFile(cfg.Marks, encodeLine(m.head)); err != nil {
			return nil, fmt.Errorf("outbox: creating %s: %w", cfg.Marks, err)
		}
	} else if m.head.Sink != kind || m.head.Format != format {
		return nil, &MarksError{cfg.Marks, 1, fmt.Errorf("%w: written for a %s sink of format %q, not a %s sink of format %q",
			ErrMarks, m.head.Sink, m.head.Format, kind, format)}
	}
	if o.marks, err = os.OpenFile(cfg.Marks, os.O_WRONLY|os.O_APPEND, 0); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if err := o.recover(m, file); err != nil {
		o.marks.Close()
		return nil, err
	}
	o.marks.Close()
	o.marks = nil
	if err := o.compact(); err != nil {
		return nil, err
	}
	if o.marks, err = os.OpenFile(cfg.Marks, os.O_WRONLY|os.O_APPEND, 0); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if st := o.st; st.Delivered > 0 || st.Again > 0 {
		o.log.Info(fmt.Sprintf("outbox: delivered %d outputs earlier runs recorded and committed (%d batches; %d again)",
			st.Delivered, st.Batches, st.Again))
	}
	return o, nil
}

// sinkKind names the sink in the marks header.
func sinkKind(s core.EffectSink) (kind, format string) {
	if f, ok := s.(*File); ok {
		return "file", f.format
	}
	return "sink", ""
}

func guarantee(s core.EffectSink) string {
	switch s.(type) {
	case *File, core.Transactional:
		return GuaranteeExactlyOnce
	case core.Idempotent:
		return GuaranteeIdempotent
	}
	return GuaranteeAtLeastOnce
}

// recovery is the state the marks' lines build.
type recovery struct {
	commits map[commitKey]lastCommit // (run, feed, key, epoch) -> the commit last marked
	marked  map[int]bool             // runs with a commit or batch mark
	free    map[int]map[string]bool  // per run, the feeds whose source commits nothing
	wm      map[entry]int64          // (run, stream, class) -> the row delivered through (entry.Row unused)
	last    *batchMark               // the last batch
	lastWM  []int64                  // the watermark of each of last's entries before it
}

type commitKey struct {
	run int
	posKey
}

// lastCommit is the commit a run marked last of a position space: its
// offset and the seq of the last item it covers.
type lastCommit struct {
	offset, seq int64
}

// recover replays the marks, finishes the last batch and delivers what
// the runs left.
func (o *Outbox) recover(m marks, file *File) error {
	rc := recovery{commits: map[commitKey]lastCommit{}, marked: map[int]bool{}, wm: map[entry]int64{}, free: map[int]map[string]bool{}}
	o.batch = m.head.Batch
	for _, l := range m.lines {
		switch {
		case l.Commit != nil:
			c := l.Commit
			k := commitKey{c.Run, posKey{c.Feed, c.Key, c.Epoch}}
			rc.commits[k] = lastCommit{offset: c.Offset, seq: c.Seq} // the last: a move back lowers it (docs/GUARANTEES.md "Seek")
			rc.marked[c.Run] = true
		case l.Uncommitted != nil:
			u := l.Uncommitted
			if rc.free[u.Run] == nil {
				rc.free[u.Run] = map[string]bool{}
			}
			rc.free[u.Run][u.Feed] = true
		case l.Batch != nil:
			rc.last = l.Batch
			rc.lastWM = rc.lastWM[:0]
			for _, e := range l.Batch.To {
				k := e
				k.Row = 0
				rc.lastWM = append(rc.lastWM, rc.wm[k])
				rc.wm[k] = max(rc.wm[k], e.Row)
				rc.marked[e.Run] = true
			}
			o.batch = max(o.batch, l.Batch.N)
		}
	}
	for _, p := range m.head.Suppress {
		for _, off := range p.Offsets {
			o.sup.add(&item{class: class{Feed: p.Feed, Key: p.Key}, epoch: p.Epoch, offset: off})
		}
		for _, off := range p.Timers {
			o.sup.add(&item{class: class{Feed: p.Feed, Key: p.Key}, epoch: p.Epoch, offset: off, timer: true})
		}
	}
	// Read every run: the last batch's effects, what is left to deliver;
	// each run's suppression is the one it ran with.
	var lastEffects []effect
	pending := make([][]effect, len(m.runs))
	for i, run := range m.runs {
		left, inLast, err := o.readRun(i, run, &rc)
		if err != nil {
			return err
		}
		pending[i] = left
		lastEffects = append(lastEffects, inLast...)
	}
	if rc.last == nil && file != nil && file.size != m.head.Size {
		if _, err := file.complete(m.head.Size, nil); err != nil {
			return err
		}
	}
	if rc.last != nil {
		if err := o.finish(rc.last, orderLike(rc.last.To, lastEffects), file); err != nil {
			return err
		}
	}
	for i, left := range pending {
		for len(left) > 0 {
			n := min(len(left), recoverChunk)
			b := newBatch(i, left[:n])
			left = left[n:]
			if err := o.send(b, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// readRun reads run i's recording: the effects left to deliver (in
// storage order) and those of the last batch. It moves o.sup on from the
// suppression run i ran with to the next run's: the positions of run i's
// whole inputs added, those its commits cover taken out.
func (o *Outbox) readRun(i int, run runMark, rc *recovery) (left, inLast []effect, err error) {
	rec, err := store.Open(run.Path)
	if err != nil {
		if !rc.marked[i] && (errors.Is(err, os.ErrNotExist) || isEmpty(run.Path)) {
			return nil, nil, nil // a run killed before it wrote its first rows
		}
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrRecording, run.Path, err)
	}
	defer rec.Close()
	if created := rec.Meta().Created; !created.Equal(run.Created) {
		return nil, nil, fmt.Errorf("%w: %s was replaced (created %s, the marks name the one created %s)", ErrRecording,
			run.Path, created.Format(time.RFC3339Nano), run.Created.Format(time.RFC3339Nano))
	}
	sup := o.sup.clone()            // the suppression run i ran with
	lastSet := map[entry][2]int64{} // (stream, class) of the last batch -> (its watermark before, its row)
	if rc.last != nil {
		for j, e := range rc.last.To {
			if e.Run == i {
				k := e
				k.Row = 0
				lastSet[k] = [2]int64{rc.lastWM[j], e.Row}
			}
		}
	}
	p := newParser(true)
	name := recordingName(run.Created)
	// A position read twice in the run: only the last reading's outputs
	// count (Written). at maps a position to its reading's outputs in left.
	type span struct{ lo, hi int }
	at := map[posAt]span{}
	var dropped []span
	// A move back (the CONTROL row of a seek whose after is below its
	// before, docs/GUARANTEES.md "Seek") lowered the feed's commit below
	// what the run had committed: a commit marked before it (of a seq
	// the feed had published by then, at most back[feed]) covers nothing
	// (its positions after the target are read again); one of a later
	// seq (a line read again, or after) does. What the feed had published
	// is the row's before, or more: the run's last DELIVERY may be far
	// below it (items a full queue dropped have none, and the commit
	// before the move back covers their seqs).
	back := map[string]int64{} // feed -> the highest seq the feed published before its last move back
	seen := map[string]int64{} // feed -> the highest seq of its inputs so far
	for e, err := range rec.Rows() {
		if err != nil {
			var pr *store.Problem
			if errors.As(err, &pr) && tolerable(pr.Kind) {
				continue
			}
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrRecording, run.Path, err)
		}
		switch e.Kind {
		case store.KindDelivery:
			seen[e.Source] = max(seen[e.Source], e.Seq)
		case store.KindControl:
			if c, err := store.ControlOf(e); err == nil && c.Action == engine.ActionSeek && c.After < c.Before {
				back[c.Feed] = max(seen[c.Feed], c.Before)
			}
		}
		it := p.row(&e)
		if it == nil {
			continue
		}
		if !it.Free && rc.free[i][it.Feed] {
			it.free()
		}
		if !it.Free && (!it.timer || len(it.effects) > 0) {
			if sup.covers(it) {
				continue // run i delivered none of its outputs: an earlier run's recording holds them
			}
			o.sup.add(it)
		}
		lo := len(left)
		for _, ef := range it.effects {
			ef.run, ef.recording = i, name
			k := entry{Run: i, Stream: ef.stream, class: ef.class}
			if r, ok := lastSet[k]; ok && ef.row > r[0] && ef.row <= r[1] {
				inLast = append(inLast, ef)
			} else if ef.row > rc.wm[k] {
				left = append(left, ef)
			}
		}
		if !it.Free && !it.timer {
			pa := posAt{it.key(), it.offset}
			if old, ok := at[pa]; ok {
				dropped = append(dropped, old)
			}
			at[pa] = span{lo, len(left)}
		}
	}
	if len(dropped) > 0 {
		drop := make([]bool, len(left))
		for _, sp := range dropped {
			for j := sp.lo; j < sp.hi; j++ {
				drop[j] = true
			}
		}
		kept := left[:0]
		for j, ef := range left {
			if !drop[j] {
				kept = append(kept, ef)
			}
		}
		left = kept
	}
	for k, c := range rc.commits {
		if b, moved := back[k.Feed]; k.run == i && (!moved || c.seq > b) {
			o.sup.prune(k.posKey, c.offset)
		}
	}
	return left, inLast, nil
}

// isEmpty reports whether path is an empty file: a recording never
// written (the first write places the whole opening at once).
func isEmpty(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == 0
}

// tolerable reports whether a problem of a recording leaves its rows as
// they were written: the torn last line and the ends a crash leaves, the
// journal rows a crash cut. The rows the marks need were written (and
// made durable, with Config.Durable) before their marks.
func tolerable(k store.ProblemKind) bool {
	switch k {
	case store.ProblemTorn, store.ProblemUnfinished, store.ProblemMissingJournal, store.ProblemMissingStream, store.ProblemMissingInput:
		return true
	}
	return false
}

// orderLike orders the last batch's effects as its mark's entries do.
func orderLike(to []entry, effects []effect) *batch {
	b := &batch{to: to, groups: make([][]effect, len(to))}
	for _, ef := range effects {
		for j, e := range to {
			if e.Run == ef.run && e.Stream == ef.stream && e.class == ef.class {
				b.groups[j] = append(b.groups[j], ef)
				b.n++
				break
			}
		}
	}
	return b
}

// finish completes the last batch: a file sink gets what of it the file
// lacks; a core.Transactional sink gets it again unless it says it holds
// it; any other sink gets it again (Status.Again counts it). What it
// delivers counts as recovered: a batch, and the effects (for a file, the
// lines whose line break it appends).
func (o *Outbox) finish(last *batchMark, b *batch, file *File) error {
	effects := b.effects()
	switch s := o.cfg.Sink.(type) {
	case *File:
		want, err := s.encode(effects, false) // read back from a recording: checked
		if err != nil {
			return err
		}
		n, err := file.complete(last.Size, want)
		if err != nil {
			return err
		}
		if n > 0 {
			o.recovered(n)
		}
		return nil
	case core.Transactional:
		held, err := s.Delivered()
		if err != nil {
			return fmt.Errorf("outbox: asking the sink what it holds: %w", err)
		}
		if held >= last.N {
			return nil
		}
	}
	if err := o.cfg.Sink.Deliver(last.N, effects); err != nil {
		return fmt.Errorf("outbox: delivering batch %d again: %w", last.N, err)
	}
	n := int64(len(effects))
	o.recovered(n)
	if _, ok := o.cfg.Sink.(core.Transactional); !ok {
		o.st.Again += n
	}
	return nil
}

// recovered counts a batch of n effects recovery delivered.
func (o *Outbox) recovered(n int64) {
	o.st.Batches++
	o.st.Delivered += n
	o.st.Recovered += n
}
