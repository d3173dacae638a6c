package filesource

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
)

// Strategy is where a source starts reading and whether it tails the file.
// The zero value is Committed. A Strategy is a plain value, safe to share.
type Strategy int

// The read strategies (see the package documentation).
const (
	Committed Strategy = iota
	Earliest
	Latest
	OnceEarliest
	OnceLatest
)

var strategyNames = [...]string{"committed", "earliest", "latest", "once-earliest", "once-latest"}

// String is the strategy's name as ParseStrategy reads it.
func (s Strategy) String() string {
	if s < 0 || int(s) >= len(strategyNames) {
		return fmt.Sprintf("Strategy(%d)", int(s))
	}
	return strategyNames[s]
}

// ParseStrategy reads a strategy name: "committed", "earliest", "latest",
// "once-earliest" or "once-latest" (case and '-' / '_' insensitive). An
// unknown name gives an error wrapping ErrStrategy.
func ParseStrategy(name string) (Strategy, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "_", "-")
	for i, s := range strategyNames {
		if n == s {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want one of %s)", ErrStrategy, name, strings.Join(strategyNames[:], ", "))
}

func (s Strategy) valid() bool { return s >= Committed && s <= OnceLatest }
func (s Strategy) once() bool  { return s == OnceEarliest || s == OnceLatest }

// Options configure a Source. The zero value reads with Committed, the
// pointer at path+".ptr", a 1ms idle interval and warnings to log.Printf.
// Options is a plain value, safe to copy.
type Options struct {
	// Read is the read strategy. Default Committed.
	Read Strategy
	// Pointer is the pointer file's path (Committed only). Default
	// path+".ptr".
	Pointer string
	// Interval is how long an idle or paused source sleeps between duty
	// cycles, after a few yields. Default 1ms.
	Interval time.Duration
	// Logf receives warnings (a pointer file that cannot be used, a replaced
	// or truncated input, unterminated bytes). Default log.Printf.
	Logf func(format string, args ...any)
	// Epoch, if not 0, is the epoch of the file a strategy without a
	// pointer (Earliest, Latest, OnceEarliest) opens at the start, instead
	// of the hash of the file's identity: for recordings that must not
	// depend on the inode (golden recordings, tests). A file that replaces
	// it while tailing still gets its identity's epoch. Committed ignores it.
	Epoch int64
}

// Source is the tailed-file source: an engine.Source (and
// engine.PolicySource: engine.Pause by default) publishing the lines of one
// file as strings, each at the byte offset after its terminator.
//
// A Source is run by one engine at a time: Run must not be called
// concurrently with itself (a second Run returns ErrRunning); the engine
// calls its committer on the polling goroutine, never concurrently, also
// once Run returned. Path, Strategy, PointerPath and DefaultPolicy are safe
// for concurrent use. A Source may be run again after Run returned (a
// restart resumes at its pointer).
//
// Memory: the lines of one batch (up to 128, offered under one lock) share
// one allocation, so a processor that keeps a line keeps its batch's text
// alive (about 13 KB of 100-byte lines); strings.Clone a line kept for long.
// The read buffer (256 KiB) is reused: no line refers to it.
type Source struct {
	path     string
	opts     Options
	logf     func(format string, args ...any)
	interval time.Duration
	running  atomic.Bool

	mu  sync.Mutex // guards ptr: the source's goroutine, then the engine's stop goroutine
	ptr pointerFile
	com committer

	// Run's state, owned by the goroutine that runs (or, after Run
	// returned, by the one that polls).
	f         *engine.Feed
	file      *os.File
	fileID    uint64
	rd        *lineReader
	epoch     int64
	final     bool              // a once-read reached the end of the file
	switching bool              // the path names another file: finish this one, then reopen
	items     []any             // the batch being offered (reused)
	poss      []engine.Position // its positions
	state     engine.FeedState
	detail    string
	commitErr string // the last commit failure warned about

	// for tests
	bufSize    int
	hookOpened func() // after the input file is opened, before it is identified
	hookEOF    func() // at the end of the open file, before the identity check
}

var (
	_ engine.Source       = (*Source)(nil)
	_ engine.PolicySource = (*Source)(nil)
	_ engine.Committer    = (*committer)(nil)
)

// New returns a source reading path with opts. It checks the options only:
// the file may not exist yet (a tailing source waits for it). Errors wrap
// ErrOptions or ErrStrategy.
func New(path string, opts Options) (*Source, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: no input path", ErrOptions)
	}
	if !opts.Read.valid() {
		return nil, fmt.Errorf("%w %d for %s", ErrStrategy, int(opts.Read), path)
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("%w: negative interval %s for %s", ErrOptions, opts.Interval, path)
	}
	if opts.Interval == 0 {
		opts.Interval = time.Millisecond
	}
	if opts.Pointer == "" {
		opts.Pointer = path + ".ptr"
	}
	if opts.Pointer == path {
		return nil, fmt.Errorf("%w: the pointer file is the input file %s", ErrOptions, path)
	}
	logf := opts.Logf
	if logf == nil {
		logf = log.Printf
	}
	s := &Source{path: path, opts: opts, interval: opts.Interval}
	s.logf = func(format string, args ...any) { logf("filesource: "+format, args...) }
	return s, nil
}

// Path is the input file's path.
func (s *Source) Path() string { return s.path }

// Strategy is the read strategy.
func (s *Source) Strategy() Strategy { return s.opts.Read }

// PointerPath is the pointer file's path (used by Committed only).
func (s *Source) PointerPath() string { return s.opts.Pointer }

// DefaultPolicy is engine.Pause: a file can be re-read, so a full queue
// pauses the source instead of dropping.
func (s *Source) DefaultPolicy() engine.Policy { return engine.Pause() }

// Run reads the file and publishes its lines into f until ctx is done (the
// tailing strategies) or the end of the file (the once strategies: Run
// returns once the last line was taken; they register no committer, so
// nothing waits for acknowledgements). A once-read of a missing file, an
// unreadable file or pointer file ends Run with a *FileError.
func (s *Source) Run(ctx context.Context, f *engine.Feed) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: %s", ErrRunning, s.path)
	}
	defer s.running.Store(false)
	s.f = f
	s.rd, s.file, s.fileID = nil, nil, 0
	s.final, s.switching = false, false
	s.state, s.detail = "", ""
	defer s.closeRun()

	switch s.opts.Read {
	case OnceLatest:
		f.SetBounded(true)
		f.SetState(engine.StateEndOfStream, "once-latest starts at the end of "+s.path+" and ends there: no line is read")
		return nil
	case OnceEarliest:
		f.SetBounded(true)
	case Committed:
		s.mu.Lock()
		s.ptr = pointerFile{path: s.opts.Pointer}
		s.com = committer{s: s}
		s.mu.Unlock()
		f.SetCommitter(&s.com)
	}
	s.setState(engine.StateBehind, "opening "+s.path)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	idle := 0
	for {
		s.poll()
		if ctx.Err() != nil {
			return nil
		}
		progress, published, done, err := s.cycle()
		if published {
			s.poll()
		}
		if err != nil || done {
			return err
		}
		if progress {
			idle = 0
			continue
		}
		if !s.idle(ctx, timer, &idle) {
			s.poll()
			return nil
		}
	}
}

// idle waits between cycles that did nothing: a few yields first (a queue
// emptied by a fast consumer is refilled without a sleep), then sleeps
// growing from 20µs to Interval.
func (s *Source) idle(ctx context.Context, timer *time.Timer, n *int) bool {
	const yields = 64
	*n++
	if *n <= yields {
		runtime.Gosched()
		return ctx.Err() == nil
	}
	d := s.interval
	if shift := *n - yields - 1; shift < 16 {
		d = min(d, 20*time.Microsecond<<shift)
	}
	timer.Reset(d)
	select {
	case <-ctx.Done():
		return false
	case <-s.f.Ready(): // a paused feed has room again
		timer.Stop()
		*n = 0
		return true
	case <-timer.C:
		return true
	}
}

// poll polls acknowledgements: the engine calls the committer, which
// commits. A failed commit is warned and retried at the next poll (the
// pointer lags: re-delivery, never loss).
func (s *Source) poll() {
	_, err := s.f.PollAcks()
	switch {
	case err == nil:
		s.commitErr = ""
	case err.Error() != s.commitErr: // warned once per distinct failure
		s.commitErr = err.Error()
		s.logf("%v (retried at every duty cycle; the pointer lags: lines are re-delivered, never lost)", err)
	}
}

func (s *Source) setState(st engine.FeedState, detail string) {
	if st == s.state && detail == s.detail {
		return
	}
	s.state, s.detail = st, detail
	s.f.SetState(st, detail)
}

// closeRun closes the input file and unmaps the pointer file; a commit after
// Run returned maps the pointer file for its write.
func (s *Source) closeRun() {
	s.mu.Lock()
	if err := s.ptr.close(); err != nil {
		s.logf("%v", err)
	}
	if s.file != nil {
		s.file.Close()
	}
	s.file, s.rd = nil, nil
	s.mu.Unlock()
}

// cycle is one duty cycle: open the file if needed, publish the buffered
// lines, read at most one more buffer and publish its lines. progress says
// it did something (no idle wait), done that a once-read is complete.
func (s *Source) cycle() (progress, published, done bool, err error) {
	if s.rd == nil {
		ok, err := s.start()
		if err != nil || !ok {
			return false, false, false, err
		}
		progress = true
	}
	for reads := 0; ; reads++ {
		n, paused := s.publish()
		if n > 0 {
			progress, published = true, true
		}
		if paused {
			s.setState(engine.StateBehind, "paused: a subscriber's queue is full")
			return progress, published, false, nil
		}
		if s.final {
			s.endOnce()
			return true, published, true, nil
		}
		if reads == 1 {
			return progress, published, false, nil
		}
		got, err := s.rd.fill()
		if err != nil {
			return progress, published, false, fileErr("read", s.path, err)
		}
		if got > 0 {
			progress = true
			if !s.switching {
				s.setState(engine.StateBehind, "")
			}
			continue
		}
		if s.opts.Read.once() {
			s.final = true
			reads = -1 // publish what the end of the file terminates
			continue
		}
		p, err := s.atEOF()
		return progress || p, published, false, err
	}
}

// publishBatch is how many lines the source offers under one acquisition of
// the feed's lock.
const publishBatch = 128

// publish offers the complete buffered lines in order, a batch at a time,
// until the buffer has none or the feed refuses one (paused: that line and
// the rest of the buffer stay unconsumed and are offered again next cycle).
func (s *Source) publish() (n int, paused bool) {
	rd := s.rd
	if rd.skip != skipNone && !rd.doSkip(s.final) {
		return 0, false
	}
	for {
		r0, pos0 := rd.r, rd.pos
		var items []any
		items, poss := rd.lines(s.final, publishBatch, s.items[:0], s.poss[:0])
		s.items, s.poss = items, poss
		if len(items) == 0 {
			return n, false
		}
		k := s.f.TryPublishBatch(items, poss)
		clear(items) // keep no line alive past its publish
		n += k
		if k < len(items) {
			// Un-consume the lines the feed did not take.
			to := pos0
			if k > 0 {
				to = poss[k-1].Offset
			}
			rd.rewind(r0+int(to-pos0), to)
			return n, true
		}
	}
}

// endOnce ends a once-read: bytes after the last terminator are counted as
// unterminated (not published).
func (s *Source) endOnce() {
	n := int64(s.rd.buffered())
	s.f.SetUnterminated(n)
	detail := "read " + s.path + " to its end"
	if n > 0 {
		detail += fmt.Sprintf("; %d unterminated bytes after the last line were not published", n)
		s.logf("%s: %d unterminated bytes after the last line (offset %d) were not published", s.path, n, s.rd.pos)
	}
	s.setState(engine.StateEndOfStream, detail)
}

// open opens the path and identifies the opened file (by its open
// descriptor: never whatever the path names by then).
func (s *Source) open() (*os.File, os.FileInfo, uint64, error) {
	file, err := os.Open(s.path)
	if err != nil {
		return nil, nil, 0, err
	}
	if s.hookOpened != nil {
		s.hookOpened()
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, nil, 0, err
	}
	return file, fi, identity(fi), nil
}

func idEpoch(id uint64) int64 {
	if id == 0 {
		return 1
	}
	return int64(id)
}

// start opens the input file for the first time and decides where to read
// from. ok is false while a tailing source waits for the file to exist.
func (s *Source) start() (ok bool, err error) {
	file, fi, id, err := s.open()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !s.opts.Read.once() {
			s.setState(engine.StateCaughtUp, "waiting for "+s.path+" to exist")
			return false, nil
		}
		return false, fileErr("open", s.path, err)
	}
	size := fi.Size()
	var off int64
	skip := skipNone
	epoch := idEpoch(id)
	if s.opts.Epoch != 0 {
		epoch = s.opts.Epoch
	}
	switch s.opts.Read {
	case Committed:
		off, epoch, err = s.startPointer(file, size, id)
		if err != nil {
			file.Close()
			return false, err
		}
	case Latest:
		off = size
		if size > 0 {
			var b [1]byte
			if _, err := file.ReadAt(b[:], size-1); err != nil {
				file.Close()
				return false, fileErr("read", s.path, err)
			}
			switch b[0] {
			case '\n':
			case '\r':
				skip = skipLF
			default:
				skip = skipRest
			}
		}
	}
	s.f.SetEpoch(epoch)
	s.epoch = epoch
	s.file, s.fileID = file, id
	s.rd = newLineReader(file, off, s.bufSize)
	s.rd.skip = skip
	s.setState(engine.StateBehind, "")
	return true, nil
}

// startPointer reads the pointer file and checks the input against it: it
// returns the offset to resume at and the epoch, and writes the pointer
// (new, reset, or with the input's identity and fingerprint brought up to
// date) before anything is published.
func (s *Source) startPointer(file *os.File, size int64, id uint64) (int64, int64, error) {
	p, trust, err := loadPointer(s.opts.Pointer, s.logf)
	if err != nil {
		return 0, 0, err
	}
	var off, epoch int64
	switch trust {
	case trustNothing:
		epoch = newEpoch()
	case trustOffsetOnly:
		epoch, off = newEpoch(), p.Offset
		if size < off {
			s.logf("input %s (%d bytes) is shorter than the pointer's offset %d: reading from 0", s.path, size, off)
			off = 0
		}
	case trustAll:
		keep, why, err := s.verdict(file, size, id, p, p.Offset)
		if err != nil {
			return 0, 0, err
		}
		if keep {
			off, epoch = p.Offset, p.Epoch
		} else {
			s.logf("input %s was %s: reading it from 0 under a new epoch", s.path, why)
			epoch = newEpoch()
		}
	}
	np, err := s.header(file, size, id, off, epoch)
	if err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ptr.write(np); err != nil {
		return 0, 0, err
	}
	if err := s.ptr.open(); err != nil {
		return 0, 0, err
	}
	s.com.reset(epoch, off)
	return off, epoch, nil
}

// header is a pointer for file at off under epoch, fingerprinting the
// file's first min(FingerprintMax, size) bytes.
func (s *Source) header(file *os.File, size int64, id uint64, off, epoch int64) (Pointer, error) {
	n := min(size, FingerprintMax)
	fp, err := fingerprint(file, n)
	if err != nil {
		return Pointer{}, fileErr("fingerprint", s.path, err)
	}
	return Pointer{Offset: off, Epoch: epoch, Identity: id, Layout: Layout, FingerprintLen: n, Fingerprint: fp}, nil
}

// verdict decides whether file (size bytes, identity id) is still the file
// p describes, read up to at: keep, or the reason it is not (truncated,
// replaced). Never a file time.
func (s *Source) verdict(file *os.File, size int64, id uint64, p Pointer, at int64) (keep bool, why string, err error) {
	if size < at {
		return false, fmt.Sprintf("truncated (%d bytes, shorter than the %d already read)", size, at), nil
	}
	sameID := p.Identity == 0 || id == 0 || p.Identity == id
	if p.FingerprintLen > 0 {
		if size < p.FingerprintLen {
			return false, fmt.Sprintf("truncated (%d bytes, shorter than its %d fingerprinted bytes)", size, p.FingerprintLen), nil
		}
		fp, err := fingerprint(file, p.FingerprintLen)
		if err != nil {
			return false, "", fileErr("fingerprint", s.path, err)
		}
		if fp != p.Fingerprint {
			return false, fmt.Sprintf("replaced (its first %d bytes differ)", p.FingerprintLen), nil
		}
	} else if !sameID {
		return false, "replaced (another file, and no fingerprint to match)", nil
	}
	if !sameID {
		s.logf("input %s is another file (identity %x, was %x) with the same first %d bytes: keeping the pointer and its epoch", s.path, id, p.Identity, p.FingerprintLen)
	}
	return true, "", nil
}

// atEOF is the end of the open file while tailing: check that the path
// still names it and that it did not shrink; if not, finish it (read it to
// its end) and reopen. A path with no file is not a change.
func (s *Source) atEOF() (progress bool, err error) {
	if s.hookEOF != nil {
		s.hookEOF()
	}
	if s.switching {
		return s.reopen()
	}
	st, err := os.Stat(s.path)
	if err != nil {
		s.setState(engine.StateCaughtUp, "")
		return false, nil
	}
	var why string
	switch {
	case identity(st) != s.fileID:
		why = "the input file " + s.path + " was replaced while being read"
	case st.Size() < s.rd.readOff():
		why = fmt.Sprintf("the input file %s was truncated while being read (%d bytes, %d read)", s.path, st.Size(), s.rd.readOff())
	default:
		s.setState(engine.StateCaughtUp, "")
		return false, nil
	}
	s.logf("%s: reading it to its end, then reopening", why)
	s.switching = true
	s.setState(engine.StateBehind, why)
	return true, nil
}

// reopen opens the file now at the path once the old one was read to its
// end, through the same identity check as a restart.
func (s *Source) reopen() (bool, error) {
	file, fi, id, err := s.open()
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.logf("reopen %s: %v (retried)", s.path, err)
			return false, nil
		}
		s.switching = false // no file at the path: read the old one on
		return false, nil
	}
	old := s.rd
	size := fi.Size()
	var off int64
	epoch := idEpoch(id)
	if s.opts.Read == Committed {
		// Compare with the old file's own first bytes (its open
		// descriptor), as far as it was read.
		p := s.ptr.hdr
		p.FingerprintLen = min(FingerprintMax, old.readOff())
		p.Fingerprint, err = fingerprint(s.file, p.FingerprintLen)
		if err != nil {
			file.Close()
			return false, fileErr("fingerprint", s.path, err)
		}
		p.Identity = s.fileID
		keep, why, err := s.verdict(file, size, id, p, old.pos)
		if err != nil {
			file.Close()
			return false, err
		}
		committed := s.ptr.hdr.Offset
		if keep {
			off, epoch = old.pos, s.epoch
		} else {
			epoch, committed = newEpoch(), 0
			msg := fmt.Sprintf("input %s was %s: reading it from 0 under a new epoch", s.path, why)
			if n := old.buffered(); n > 0 {
				msg += fmt.Sprintf("; %d unterminated bytes at the end of the old file were not published", n)
			}
			s.logf("%s", msg)
		}
		np, err := s.header(file, size, id, committed, epoch)
		if err != nil {
			file.Close()
			return false, err
		}
		s.mu.Lock()
		err = s.ptr.write(np)
		if err == nil && !keep {
			s.com.reset(epoch, 0)
		}
		s.mu.Unlock()
		if err != nil {
			file.Close()
			return false, err
		}
	} else if n := old.buffered(); n > 0 {
		s.logf("%d unterminated bytes at the end of the old %s were not published", n, s.path)
	}
	if epoch != s.epoch {
		s.f.SetEpoch(epoch)
		s.epoch = epoch
	}
	s.mu.Lock()
	s.file.Close()
	s.file, s.fileID = file, id
	s.rd = newLineReader(file, off, s.bufSize)
	s.mu.Unlock()
	s.switching = false
	s.setState(engine.StateBehind, "reopened "+s.path)
	return true, nil
}

// committer commits acknowledged offsets of the current epoch into the
// pointer file. It is called on the polling goroutine only.
type committer struct {
	s         *Source
	epoch     int64
	acked     int64 // the highest acknowledged offset of epoch
	committed int64 // the offset in the pointer file
}

// reset moves to a new epoch: acknowledgements of the old one are never
// committed, and what was acknowledged before is forgotten.
func (c *committer) reset(epoch, off int64) {
	c.epoch, c.acked, c.committed = epoch, off, off
}

// Acknowledged records an acknowledged position of the current epoch.
func (c *committer) Acknowledged(_, epoch int64, pos engine.Position) {
	if epoch == c.epoch && pos.Offset > c.acked {
		c.acked = pos.Offset
	}
}

// Commit writes the acknowledged offset, forward only.
func (c *committer) Commit() error {
	if c.acked <= c.committed {
		return nil
	}
	if err := c.s.commit(c.acked); err != nil {
		return err
	}
	c.committed = c.acked
	return nil
}

// commit writes off into the pointer: one flushed store, or, while the
// fingerprint covers less than FingerprintMax bytes and more of the open
// file was read, a whole new header with the fingerprint grown (read from
// the open file, never from whatever the path names now).
func (s *Source) commit(off int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.ptr.hdr
	if h.FingerprintLen < FingerprintMax && s.rd != nil && s.file != nil {
		if n := min(FingerprintMax, s.rd.readOff()); n > h.FingerprintLen {
			fp, err := fingerprint(s.file, n)
			if err != nil {
				return fileErr("fingerprint", s.path, err)
			}
			h.Offset, h.FingerprintLen, h.Fingerprint = off, n, fp
			return s.ptr.write(h)
		}
	}
	return s.ptr.setOffset(off)
}
