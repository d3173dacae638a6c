package filesource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
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
// pointer at path+".ptr", a 1ms idle interval, lines of at most
// DefaultMaxLine bytes, the rotated siblings DefaultRotated and warnings to
// slog.Default(). Options is a plain value, safe to copy.
type Options struct {
	// Read is the read strategy. Default Committed.
	Read Strategy
	// Pointer is the pointer file's path (Committed only). Default
	// path+".ptr".
	Pointer string
	// Interval is how long an idle or paused source sleeps between duty
	// cycles, after a few yields. Default 1ms.
	Interval time.Duration
	// Logger receives warnings at level Warn (a pointer file that cannot be
	// used, a replaced or truncated input, unterminated bytes, an oversized
	// line, a hole, a file never read to its end), each message beginning
	// "filesource: ". Default: slog.Default().
	Logger *slog.Logger
	// MaxLine is the maximum line length in bytes, its terminator not
	// counted. A longer line is never truncated: it is skipped whole (not
	// published), counted in the feed status (oversized, which makes the
	// feed not lossless) and warned with its offsets; the position moves
	// past it. The reader never buffers more than about twice MaxLine.
	// Default DefaultMaxLine (16 MiB); negative is an error.
	MaxLine int
	// Rotated are the glob patterns (filepath.Match syntax) of the names a
	// rotated input may have; "{path}" in a pattern stands for the input
	// path. When the path names another file than the pointer's at the
	// start (Committed), the pointer's file is looked for there by
	// identity (device and inode) and fingerprint and read to its end
	// first, then every file rotated after it, in rotation order. While
	// tailing, a file rotated away is read to its end, then every file
	// rotated after it (quick rotations), in order, then the path; a file
	// truncated or rewritten under the reader is finished from a copy of
	// it there (copytruncate), found by the bytes read, before it is read
	// again from 0. Rotation order is the natural order of the names
	// (digit runs as numbers): see the package documentation. Default
	// DefaultRotated; an empty non-nil slice looks nowhere.
	Rotated []string
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
// once Run returned. Path, Strategy, PointerPath, DefaultPolicy and Status
// are safe for concurrent use. A Source may be run again after Run returned (a
// restart resumes at its pointer).
//
// Memory: the lines of one batch (up to 128, offered under one lock) share
// one allocation, so a processor that keeps a line keeps its batch's text
// alive (about 13 KB of 100-byte lines); strings.Clone a line kept for long.
// The read buffer (256 KiB) is reused: no line refers to it. It grows for
// a line longer than itself, up to about twice Options.MaxLine: a longer
// line is discarded as it is read, never buffered whole.
type Source struct {
	path     string
	opts     Options
	logf     func(format string, args ...any) // warns through opts.Logger
	interval time.Duration
	maxLine  int
	rotated  []string
	running  atomic.Bool

	mu  sync.Mutex // guards ptr: the source's goroutine, then the engine's stop goroutine
	ptr pointerFile
	com committer

	// Run's state, owned by the goroutine that runs (or, after Run
	// returned, by the one that polls).
	f         *engine.Intake
	file      *os.File
	fileID    uint64
	rd        *lineReader
	epoch     int64
	final     bool            // a once-read reached the end of the file
	switching bool            // the path names another file: finish this one, then reopen
	published bool            // a line of the current epoch was published
	hold      bool            // the current file's lines wait for the pointer to describe it (holding)
	items     []any           // the batch being offered (reused)
	poss      []core.Position // its positions
	state     engine.FeedState
	detail    string
	commitErr string // the last commit failure warned about
	openErr   string // the last reopen failure warned about
	refused   uint64 // the identity of the file the path named then
	note      string // what the run lost, kept in every detail
	scratch   []byte // the prefix check's buffer

	// truncated is the identity of a file truncated under the reader
	// whose copy (copytruncate) is read before it: when it is read again
	// (at the path, or renamed), a leading run of NUL bytes is a hole.
	truncated uint64

	// known are the files at the rotated names (Options.Rotated) that the
	// run read, or that were rotated before the files it read, by identity,
	// with the fingerprint of their first bytes: a rotated sibling that is
	// not known was rotated after the file being read, and is read before
	// the path (nextRotated).
	known map[uint64]seenFile

	ptrCreated bool // this run created the (empty) pointer file

	// What the source skipped or read again that is not a loss (Status),
	// since the last Run began.
	holeBytes atomic.Int64
	replaced  atomic.Int64

	// for tests
	bufSize    int
	hookOpened func()        // after the input file is opened, before it is identified
	hookEOF    func()        // at the end of the open file, before the identity check
	hookRotate func(string)  // before a rotated sibling (its name) is opened to be read
	hookWrite  func(Pointer) // before each write of the pointer file, with what it will hold
}

// DefaultRotated are the default rotated-sibling patterns: PATH.1 and
// PATH-* (logrotate's numbered and dated names).
var DefaultRotated = []string{"{path}.1", "{path}-*"}

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
	if opts.MaxLine < 0 {
		return nil, fmt.Errorf("%w: negative maximum line length %d for %s", ErrOptions, opts.MaxLine, path)
	}
	if opts.MaxLine == 0 {
		opts.MaxLine = DefaultMaxLine
	}
	if opts.Rotated == nil {
		opts.Rotated = DefaultRotated
	}
	for _, pat := range opts.Rotated {
		if _, err := filepath.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("%w: rotated-sibling pattern %q: %v", ErrOptions, pat, err)
		}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Source{path: path, opts: opts, interval: opts.Interval, maxLine: opts.MaxLine, rotated: slices.Clone(opts.Rotated)}
	s.logf = func(format string, args ...any) { logger.Warn("filesource: " + fmt.Sprintf(format, args...)) }
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
func (s *Source) Run(ctx context.Context, f *engine.Intake) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: %s", ErrRunning, s.path)
	}
	defer s.running.Store(false)
	s.f = f
	s.rd, s.file, s.fileID = nil, nil, 0
	s.final, s.switching, s.truncated = false, false, 0
	s.published, s.hold = false, false
	s.state, s.detail, s.note, s.openErr = "", "", "", ""
	s.known = map[uint64]seenFile{}
	s.holeBytes.Store(0)
	s.replaced.Store(0)
	if s.opts.Read == Committed {
		s.mu.Lock()
		s.ptr = pointerFile{path: s.opts.Pointer, hookWrite: s.hookWrite}
		created, err := s.ptr.acquire(true)
		s.ptrCreated = created
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
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
	case err.Error() != s.commitErr: // warned once per distinct failure (the text only tells a repeat: nothing is decided on it)
		s.commitErr = err.Error()
		s.logf("%v (retried at every duty cycle; the pointer lags: lines are re-delivered, never lost)", err)
	}
}

func (s *Source) setState(st engine.FeedState, detail string) {
	if s.note != "" {
		if detail != "" {
			detail += "; "
		}
		detail += s.note
	}
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
	s.ptr.release()
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
	if s.holding() {
		s.setState(engine.StateBehind, "waiting for the lines of the file read before this one to be committed before publishing its lines")
		return progress, false, false, nil
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
			// What was just read is published only if the file's first
			// bytes are still those read: else it may be a fragment of a
			// rewrite, at the old content's offsets.
			changed, err := s.prefixChanged()
			if err != nil {
				return progress, published, false, err
			}
			if changed {
				_, err := s.rewritten()
				return true, published, false, err
			}
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
	defer s.report()
	if rd.skip != skipNone && !rd.doSkip(s.final) {
		return 0, false
	}
	for {
		var items []any
		items, poss := rd.lines(s.final, publishBatch, s.items[:0], s.poss[:0])
		s.items, s.poss = items, poss
		if len(items) == 0 {
			return n, false
		}
		s.reportOver() // the lines it skipped came before these
		k := s.f.TryPublishBatch(items, poss)
		clear(items) // keep no line alive past its publish
		n += k
		if k > 0 {
			s.published = true
		}
		if k < len(items) {
			// Un-consume the lines the feed did not take.
			r0, pos0 := rd.batchR, rd.batchPos
			to := pos0
			if k > 0 {
				to = poss[k-1].Offset
			}
			rd.rewind(r0+int(to-pos0), to)
			return n, true
		}
	}
}

// report reports and warns what the reader skipped: oversized lines (a
// loss) and a hole's NUL bytes.
func (s *Source) report() {
	rd := s.rd
	s.reportOver()
	if rd.holes > 0 && rd.skip != skipNUL {
		s.holeBytes.Add(rd.holes)
		s.logf("%s: %d NUL bytes at offsets [%d, %d) of the file truncated or rewritten under the reader are a hole a writer left (it kept its old offset), not data: skipped",
			s.path, rd.holes, rd.holeFrom, rd.holeFrom+rd.holes)
		rd.holes = 0
	}
}

// reportOver reports each oversized line the reader skipped as a loss
// (engine.LossOversized) of the file it read, with its byte range, and
// warns: before the lines read after it are published, so that every
// processor's stream shows the loss where it happened.
func (s *Source) reportOver() {
	rd := s.rd
	for _, o := range rd.over {
		s.logf("%s: a line of %d bytes at offsets [%d, %d) is longer than the maximum line length %d: skipped whole, not published (the feed is not lossless)",
			s.path, o.to-o.from, o.from, o.to, s.maxLine)
		s.f.AddLoss(engine.Loss{Reason: engine.LossOversized, Items: 1, Epoch: s.epoch, From: o.from, To: o.to,
			Detail: fmt.Sprintf("%s (identity %x): a line of %d bytes, longer than the maximum %d", s.path, s.fileID, o.to-o.from, s.maxLine)})
	}
	rd.over = rd.over[:0]
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

// open opens the path without blocking (a FIFO would block open(2)) and
// identifies the opened file by its open descriptor (never whatever the
// path names by then). Anything but a regular file is closed again: an
// error wrapping ErrNotRegular.
func (s *Source) open() (*os.File, os.FileInfo, uint64, error) {
	file, err := openInput(s.path)
	if err != nil {
		return nil, nil, 0, err
	}
	if s.hookOpened != nil {
		s.hookOpened()
	}
	fi, err := file.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w (%s)", ErrNotRegular, fi.Mode().Type())
	}
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

// readHead reads the first min(size, FingerprintMax) bytes of file: the
// head of a reader that has not read them yet.
func readHead(file *os.File, size int64, path string) ([]byte, error) {
	head := make([]byte, min(size, FingerprintMax), FingerprintMax)
	n, err := file.ReadAt(head, 0)
	if err == io.EOF {
		err = nil // shorter by now: the prefix check notices
	}
	return head[:n], fileErr("read", path, err)
}

// start opens the input file for the first time and decides where to read
// from. ok is false while a tailing source waits for the file to exist.
func (s *Source) start() (ok bool, err error) {
	// The rotated siblings before the path is opened: each was rotated
	// before the file the path names then. (A once-read never moves on to
	// another file; a path with no file yet is looked at again.)
	var pre []sibling
	if _, err := os.Stat(s.path); err == nil && !s.opts.Read.once() {
		pre = s.rotatedSiblings()
	}
	file, fi, id, err := s.open()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !s.opts.Read.once() {
			s.setState(engine.StateCaughtUp, "waiting for "+s.path+" to exist")
			return false, nil
		}
		return false, fileErr("open", s.path, err)
	}
	size := fi.Size()
	head, err := readHead(file, size, s.path)
	if err != nil {
		file.Close()
		return false, err
	}
	var off int64
	skip := skipNone
	epoch := idEpoch(id)
	if s.opts.Epoch != 0 {
		epoch = s.opts.Epoch
	}
	switch s.opts.Read {
	case Committed:
		var st started
		st, err = s.startPointer(file, size, id, head)
		if err != nil {
			file.Close()
			return false, err
		}
		if st.file != nil { // the pointer's file, found rotated: finish it first
			file.Close()
			file, id, head = st.file, st.id, st.head
			s.switching = true
			// The siblings before it in rotation order were rotated before
			// it (an earlier run read them); those after it, after it: they
			// are read next, in order, then the path.
			var before []sibling
			for _, sb := range pre {
				if compareNatural(sb.name, st.name) < 0 {
					before = append(before, sb)
				}
			}
			pre = before
			if st.pre != nil {
				pre = st.pre
			}
			s.truncated = st.truncated
		}
		off, epoch = st.off, st.epoch
		if st.hole {
			skip = skipNUL
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
	s.rd = s.newReader(file, off, head)
	s.rd.skip = skip
	s.rememberAll(pre)
	s.remember(id, head)
	s.setState(engine.StateBehind, "")
	return true, nil
}

func (s *Source) newReader(file *os.File, off int64, head []byte) *lineReader {
	rd := newLineReader(file, off, s.bufSize)
	rd.max = s.maxLine
	rd.head, rd.checked = head, len(head)
	return rd
}

// started is where startPointer says to start: at off under epoch; in file
// (identity id, first bytes head) when not nil: the pointer's file found
// among the rotated siblings, to be read to its end before the path; hole:
// the file was truncated or rewritten in place, a leading run of NUL bytes
// is a hole.
type started struct {
	off, epoch int64
	file       *os.File
	name       string // file's name
	id         uint64
	head       []byte
	hole       bool
	// pre, when not nil: the rotated siblings rotated before file (known,
	// never read after it); nil: those before it in rotation order.
	pre []sibling
	// truncated: the identity of the path's file, truncated after file
	// was copied from it (copytruncate while stopped): read from 0 after
	// it, a leading run of NUL bytes being a hole.
	truncated uint64
}

// startPointer reads the pointer file and checks the input against it: it
// returns where to resume. When the path names another file than the
// pointer's, the pointer's file is looked for among the rotated siblings
// (Options.Rotated) and finished first; when it cannot be found, its bytes
// after the pointer were never read: a loss, said and counted.
//
// What the pointer file holds from the start to the run's first commit
// (record before effect: a restart must find whatever this start found
// until the recording holds it):
//
//   - no pointer yet (none, empty, or a header it cannot use) and a pointer
//     of layout 0 (an offset only): the header of the file at the path, at
//     0 (at the offset, for layout 0) under a new epoch, written at once;
//     it held no position a restart could lose, and the file is then
//     found by identity if it is rotated before the first commit;
//   - the pointer's file, at the path (the same identity, or the same
//     first bytes under another: kept), renamed to a rotated name (found
//     by identity and fingerprint) or copied there (copytruncate, found by
//     fingerprint): the pointer's offset and epoch go on in it, and its
//     header (the identity, the fingerprint grown from the bytes there
//     now) is written at once: nothing is passed over;
//   - the pointer's file replaced, truncated or rewritten with no copy of
//     it found: the rest of it is counted lost (unread) and the file at the
//     path is read from 0 under a new epoch. The header keeps the old
//     file, offset and epoch until the first commit, which comes only once
//     an item read after the loss is processed (and its rows, after the
//     LOST row, recorded): a run killed, or whose recording cannot be
//     written, before it leaves the pointer as it found it, and the next
//     run finds the same loss, counts it and records it. Only the pending
//     header (pointerFile.pending: the new file's identity, fingerprint and
//     epoch, at 0) is written at once, so that the next run, finding that
//     file again (the same identity and first bytes), reads it under the
//     same epoch: a line the run applied to durable state, keyed by epoch
//     and offset (core.Delivery.AlreadyApplied), is not applied again.
func (s *Source) startPointer(file *os.File, size int64, id uint64, head []byte) (started, error) {
	p, trust, pending := Pointer{}, trustNothing, Pointer{}
	if !s.ptrCreated { // a file this run created is empty: nothing to warn about
		var err error
		if p, trust, pending, err = loadPointer(s.opts.Pointer, s.logf); err != nil {
			return started{}, err
		}
	}
	st := started{epoch: newEpoch()}
	switch trust {
	case trustOffsetOnly:
		st.off = p.Offset
		if size < st.off {
			s.logf("input %s (%d bytes) is shorter than the pointer's offset %d: reading from 0", s.path, size, st.off)
			st.off = 0
		}
	case trustAll:
		other := p.Identity != 0 && id != 0 && p.Identity != id
		if other {
			if st, ok := s.findRotated(p, true); ok {
				return st, s.writeStart(header(st.head, st.id, p.Offset, p.Epoch), p.Offset, p.Epoch)
			}
		}
		keep, why := s.verdict(head, size, id, p, p.Offset)
		if keep && p.FingerprintLen == 0 && !other {
			// Never read a byte of: a copy made while stopped is told by
			// when it was made, not by its first bytes.
			return s.startStopped(p, file, size, id, head)
		}
		if keep {
			st.off, st.epoch = p.Offset, p.Epoch
			break
		}
		// Not the pointer's file, nor its rotated sibling by identity: a
		// copy (copytruncate) of it, found by its fingerprint?
		if st, ok := s.findRotated(p, false); ok {
			return st, s.writeStart(header(st.head, st.id, p.Offset, p.Epoch), p.Offset, p.Epoch)
		}
		s.replaced.Add(1)
		if pendingFor(pending, id, head) {
			st.epoch = pending.Epoch // an earlier start read this file from 0 under it, and committed nothing
		}
		s.logf("input %s was %s: reading it from 0 under a new epoch", s.path, why)
		if other {
			s.unread(p, fmt.Sprintf("it is not at %s nor at its rotated siblings (%s)", s.path, strings.Join(s.rotated, ", ")))
		} else {
			s.unread(p, fmt.Sprintf("%s was %s (or deleted, its inode reused), and no rotated sibling (%s) is a copy of it", s.path, why, strings.Join(s.rotated, ", ")))
		}
		st.hole = !other // the same file, truncated or rewritten in place
		return st, s.startAfterLoss(p, header(head, id, 0, st.epoch))
	}
	return st, s.writeStart(header(head, id, st.off, st.epoch), st.off, st.epoch)
}

// startStopped starts at the pointer's file p, still at the path (open
// as file: size bytes, identity id, first bytes head) and read of no byte
// (an empty fingerprint), looking first for a copy of it made while the
// source was stopped (copytruncate: findStoppedCopy). Found, the copy is
// read from p.Offset to its end under p's epoch (its header written at
// once, as for a copy found by fingerprint), then every other such copy,
// in rotation order, then the path's file from 0 under a new epoch, a
// leading run of NUL bytes being a hole. A sibling that may or may not be
// a copy is never read: p's file's bytes from p.Offset are counted unread
// (a loss, naming the siblings), and the pointer file is left as it is
// until the first commit (as after any loss at the start): a run that
// commits nothing leaves the next run the same pointer, written at the
// same time, and it counts the same loss.
func (s *Source) startStopped(p Pointer, file *os.File, size int64, id uint64, head []byte) (started, error) {
	fi, err := os.Stat(s.opts.Pointer)
	if err != nil {
		return started{}, fileErr("stat pointer", s.opts.Pointer, err)
	}
	sc := s.findStoppedCopy(p, file, size, id, head, fi.ModTime())
	st := started{off: p.Offset, epoch: p.Epoch}
	np := header(head, id, p.Offset, p.Epoch)
	if sc.file != nil {
		s.logf("input %s is the pointer's file, never read, but does not go on from the bytes of %s, made after the pointer was last written (%s): %s is a copy of it made before it was truncated (copytruncate while stopped): reading %s from offset %d to its end, then %s",
			s.path, sc.sb.name, fi.ModTime().Format(time.RFC3339Nano), sc.sb.name, sc.sb.name, p.Offset, s.path)
		st.file, st.name, st.id, st.head, st.truncated = sc.file, sc.sb.name, sc.sb.id, sc.head, id
		st.pre = []sibling{} // every sibling but the copies was there before
		for _, sb := range sc.sibs {
			if sb.id != sc.sb.id && !slices.Contains(sc.later, sb) {
				st.pre = append(st.pre, sb)
			}
		}
		np = header(sc.head, sc.sb.id, p.Offset, p.Epoch)
	}
	if len(sc.unsure) == 0 {
		return st, s.writeStart(np, p.Offset, p.Epoch)
	}
	s.unread(p, fmt.Sprintf("it was still at %s, but %s (made when the pointer %s was last written, %s, or unreadable) may be a copy of it made before it was truncated (copytruncate while stopped), or a file rotated before it: not read",
		s.path, strings.Join(sc.unsure, ", "), s.opts.Pointer, fi.ModTime().Format(time.RFC3339Nano)))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ptr.hdr = p // what the pointer file holds, left as it is
	s.com.reset(np.Epoch, np.Offset)
	s.com.head, s.com.waiting = &np, true
	return st, nil
}

// pendingFor reports whether pending (a pointer file's pending header) is
// the header of the file of identity id whose first bytes are head, at 0:
// the same identity, and head starts with the bytes it fingerprinted.
func pendingFor(pending Pointer, id uint64, head []byte) bool {
	return pending.Epoch != 0 && pending.Identity == id && pending.Offset == 0 &&
		int64(len(head)) >= pending.FingerprintLen && fingerprintOf(head[:pending.FingerprintLen]) == pending.Fingerprint
}

// writeStart writes the pointer a run starts with, np (at off under
// epoch), and maps it.
func (s *Source) writeStart(np Pointer, off, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ptr.write(np); err != nil {
		return err
	}
	s.com.reset(epoch, off)
	return nil
}

// startAfterLoss starts a run after a loss counted at the start: the
// pointer file keeps old, the header it holds, with np, the header of the
// file read from 0, as its pending header; np is the committer's header to
// write at the first commit (see startPointer).
func (s *Source) startAfterLoss(old, np Pointer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ptr.store(old, np); err != nil {
		return err
	}
	s.com.reset(np.Epoch, np.Offset)
	s.com.head, s.com.waiting = &np, true
	return nil
}

// findRotated looks for the file p describes among the rotated siblings of
// the path (Options.Rotated): a regular file at least p.Offset bytes long
// with p's fingerprint and, byIdentity, p's identity (the file renamed);
// otherwise any identity (a copy: copytruncate). It returns it open, to be
// read from p.Offset under p.Epoch.
func (s *Source) findRotated(p Pointer, byIdentity bool) (started, bool) {
	if !byIdentity && p.FingerprintLen == 0 {
		return started{}, false // nothing to recognise a copy by
	}
	for _, pat := range s.rotated {
		names, _ := filepath.Glob(strings.ReplaceAll(pat, "{path}", globQuote(s.path)))
		for _, name := range names {
			if fi, err := os.Stat(name); err != nil || (byIdentity && identity(fi) != p.Identity) {
				continue
			}
			file, err := openInput(name)
			if err != nil {
				continue
			}
			fi, err := file.Stat()
			id := uint64(0)
			if err == nil {
				id = identity(fi)
			}
			if err != nil || !fi.Mode().IsRegular() || (byIdentity && id != p.Identity) {
				file.Close()
				continue
			}
			head, err := readHead(file, fi.Size(), name)
			keep := false
			if err == nil {
				q := p
				q.Identity = id // by identity, or a copy: the fingerprint decides
				var why string
				if keep, why = s.verdict(head, fi.Size(), id, q, p.Offset); !keep && byIdentity {
					s.logf("%s has the identity of the pointer's file but was %s: not taken for it", name, why)
				}
			}
			if !keep {
				file.Close()
				continue
			}
			how := "rotated to"
			if !byIdentity {
				how = "copied to"
			}
			s.logf("input %s is not the pointer's file, which was %s %s: reading %s from offset %d to its end, then %s", s.path, how, name, name, p.Offset, s.path)
			return started{off: p.Offset, epoch: p.Epoch, file: file, name: name, id: id, head: head}, true
		}
	}
	return started{}, false
}

// unread says that the rest of the file p describes, from p.Offset to its
// end, was never read and cannot be: a loss (engine.LossUnread, with the
// file's identity, epoch and offset: FeedStatus.Losses["unread"]), warned
// and kept in the feed's detail for the rest of the run. (Whether that file
// had any byte after p.Offset is unknown once it is gone: counted all the
// same, a verdict is only as good as its worst case.)
func (s *Source) unread(p Pointer, where string) {
	s.lose(p, "the file the pointer "+s.opts.Pointer+" describes", where)
}

// unreadTail says that the bytes of the open file (named file) after the
// last line published from it (at offset published, under the current
// epoch), to its old end, were never read and are gone (it was truncated
// or rewritten in place under the reader, and no copy holds them): a loss,
// as unread says.
func (s *Source) unreadTail(published int64, file, where string) {
	s.lose(Pointer{Identity: s.fileID, Epoch: s.epoch, Offset: published}, file, where)
}

// lose reports the bytes of a file (file says which; p its identity and
// epoch) from p.Offset to its end as never read: see unread.
func (s *Source) lose(p Pointer, file, where string) {
	msg := fmt.Sprintf("%s (identity %x, epoch %d) was read to offset %d; %s: its bytes from offset %d to its end were never read",
		file, p.Identity, p.Epoch, p.Offset, where, p.Offset)
	s.logf("%s", msg)
	s.f.AddLoss(engine.Loss{Reason: engine.LossUnread, Epoch: p.Epoch, From: p.Offset,
		Detail: fmt.Sprintf("%s: %s (identity %x) was read to offset %d; %s", s.path, file, p.Identity, p.Offset, where)})
	if s.note != "" {
		s.note += "; "
	}
	s.note += "unread: " + msg
}

// globQuote quotes the glob metacharacters of a path.
func globQuote(p string) string {
	var b strings.Builder
	for _, c := range p {
		switch c {
		case '*', '?', '[':
			b.WriteByte('[')
			b.WriteRune(c)
			b.WriteByte(']')
		case '\\':
			if filepath.Separator != '\\' {
				b.WriteString(`\\`)
				continue
			}
			b.WriteRune(c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// header is a pointer for the file (identity id, first bytes head as read)
// at off under epoch.
func header(head []byte, id uint64, off, epoch int64) Pointer {
	return Pointer{Offset: off, Epoch: epoch, Identity: id, Layout: Layout, FingerprintLen: int64(len(head)), Fingerprint: fingerprintOf(head)}
}

// verdict decides whether a file (size bytes, identity id, first bytes
// head) is still the file p describes, read up to at: keep, or the reason
// it is not (truncated, replaced). Never a file time.
func (s *Source) verdict(head []byte, size int64, id uint64, p Pointer, at int64) (keep bool, why string) {
	if size < at {
		return false, fmt.Sprintf("truncated (%d bytes, shorter than the %d already read)", size, at)
	}
	sameID := p.Identity == 0 || id == 0 || p.Identity == id
	if p.FingerprintLen > 0 {
		if int64(len(head)) < p.FingerprintLen {
			return false, fmt.Sprintf("truncated (%d bytes, shorter than its %d fingerprinted bytes)", size, p.FingerprintLen)
		}
		if fingerprintOf(head[:p.FingerprintLen]) != p.Fingerprint {
			return false, fmt.Sprintf("replaced (its first %d bytes differ)", p.FingerprintLen)
		}
	} else if !sameID {
		return false, "replaced (another file, and no fingerprint to match)"
	}
	if !sameID {
		s.logf("input %s is another file (identity %x, was %x) with the same first %d bytes: keeping the pointer and its epoch", s.path, id, p.Identity, p.FingerprintLen)
	}
	return true, ""
}

// prefixChanged reports whether the open file's first bytes are no longer
// those the reader read (its head): the file was truncated or rewritten in
// place.
func (s *Source) prefixChanged() (bool, error) {
	h := s.rd.head
	if len(h) == 0 {
		return false, nil
	}
	if s.scratch == nil {
		s.scratch = make([]byte, FingerprintMax)
	}
	b := s.scratch[:len(h)]
	n, err := s.file.ReadAt(b, 0)
	if n < len(h) {
		if err != nil && err != io.EOF {
			return false, fileErr("read", s.path, err)
		}
		return true, nil
	}
	if !bytes.Equal(b, h) {
		return true, nil
	}
	s.rd.checked = len(h)
	return false, nil
}

// rewritten handles an open file whose first bytes changed under the
// reader, or that is shorter than what was read (truncated, or rewritten
// in place with or without a truncation): the bytes read and not yet
// published may be the new content's, at the old content's offsets, so
// they are discarded. The bytes after the last published line, to the old
// end, are then only in a copy, if any (copytruncate): a tailing source
// looks for it among the rotated siblings (findCopy) and reads it from
// there to its end under the same epoch, then the files rotated after it,
// then the path (readCopy). With no copy, those bytes are a loss (unread,
// counted and warned: whether there were any cannot be known), and the
// file is read again from 0 under a new epoch (switchTo).
func (s *Source) rewritten() (bool, error) {
	name := s.path
	if s.switching {
		name = "the rotated " + s.path
	}
	s.logf("input %s was truncated or rewritten in place while being read (its first %d bytes changed, or it is shorter than the %d bytes read): %d bytes read after the last published line are discarded",
		name, len(s.rd.head), s.rd.readOff(), s.rd.buffered())
	published := s.rd.pos // the end of the last line published from it
	s.rd.drop()
	sibs := s.rotatedSiblings()
	if !s.opts.Read.once() { // a once-read never moves on to another file
		if cp, ok := s.findCopy(sibs, published); ok {
			return true, s.readCopy(cp, published)
		}
	}
	s.unreadTail(published, "input "+name, fmt.Sprintf("it was truncated or rewritten in place while being read, and no rotated sibling (%s) is a copy of it holding those bytes", strings.Join(s.rotated, ", ")))
	// The siblings there now hold nothing read from it: never read as
	// rotated after it.
	s.rememberAll(sibs)
	fi, err := s.file.Stat()
	if err != nil {
		return false, fileErr("stat", s.path, err)
	}
	wasSwitching := s.switching
	if err := s.switchTo(s.file, fi, s.fileID, "", true); err != nil {
		return false, err
	}
	s.switching = wasSwitching // a rotated file is still finished before the path
	return true, nil
}

// atEOF is the end of the open file while tailing: check that its first
// bytes did not change under the reader, that the path still names it and
// that it did not shrink; if it was rewritten, read it again; if it was
// replaced, finish it (read it to its end) and reopen. A path with no file
// is not a change.
func (s *Source) atEOF() (progress bool, err error) {
	if s.hookEOF != nil {
		s.hookEOF()
	}
	if changed, err := s.prefixChanged(); err != nil || changed {
		if err != nil {
			return false, err
		}
		return s.rewritten()
	}
	if s.switching {
		return s.reopen()
	}
	st, err := os.Stat(s.path)
	if err != nil {
		s.setState(engine.StateCaughtUp, "")
		return false, nil
	}
	fst, err := s.file.Stat()
	if err != nil {
		return false, fileErr("stat", s.path, err)
	}
	if fst.Size() < s.rd.readOff() {
		return s.rewritten() // truncated, with the same first bytes
	}
	if id := identity(st); id == s.fileID || (id == s.refused && s.openErr != "") {
		s.setState(engine.StateCaughtUp, s.openErr)
		return false, nil
	}
	why := "the input file " + s.path + " was replaced while being read"
	s.logf("%s: reading it to its end, then reopening", why)
	s.switching = true
	s.setState(engine.StateBehind, why)
	return true, nil
}

// holding reports whether a Committed source holds the lines of the file
// it moved to (switchTo) until the pointer describes that file: until
// every line it published from the files before is committed, and the
// pointer's header moved to the file (committer.advance). Meanwhile it
// reads and publishes nothing (the file stays open: a file replaced
// meanwhile is still read), and the duty cycles poll acknowledgements. So
// only the pointer's file ever has lines processed and not committed: a
// restart reads again only lines of the pointer's file, under its epoch,
// and a state that skips by epoch and offset (core.Delivery.AlreadyApplied)
// does not apply them twice. (Without the hold, lines of several files
// were processed past the pointer, and a restart read the files after the
// pointer's under new epochs: a state saved with a later file's epoch took
// the earlier files' lines for new ones, and applied them again.)
func (s *Source) holding() bool {
	if !s.hold {
		return false
	}
	if c := &s.com; len(c.moves) > 0 || c.head != nil {
		return true
	}
	s.hold = false
	return false
}

// reopen moves on once the old file was read to its end: to the next file
// rotated after it (nextRotated), if any, else to the file now at the
// path. Anything but a regular file at the path is refused with a warning
// (the old file is read on; the path is tried again at the next end of
// file).
func (s *Source) reopen() (bool, error) {
	file, fi, id, err := s.open()
	if next, nfi, sb, ok := s.nextRotated(id); ok {
		if file != nil {
			file.Close()
		}
		if err := s.switchTo(next, nfi, sb.id, sb.name, false); err != nil {
			next.Close()
			return false, err
		}
		return true, nil
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			s.switching = false // no file at the path: read the old one on
			return false, nil
		}
		if msg := fmt.Sprintf("cannot reopen %s: %v", s.path, err); msg != s.openErr {
			s.openErr = msg
			s.logf("%s: the old file is read on; the path is tried again once it names another file", msg)
		}
		s.refused = 0
		if st, err := os.Stat(s.path); err == nil {
			s.refused = identity(st)
		}
		s.switching = false
		s.setState(engine.StateCaughtUp, s.openErr)
		return false, nil
	}
	s.openErr = ""
	if err := s.switchTo(file, fi, id, "", false); err != nil {
		file.Close()
		return false, err
	}
	return true, nil
}

// switchTo moves the reader to file (the file now at the path, or the open
// file itself after an in-place rewrite) once the old reader's lines were
// published, through the same identity check as a restart: the old
// fingerprint (the old reader's head: the bytes it read) against the new
// file's first bytes. A kept file is read on from the old position under
// the same epoch; otherwise from 0 under a new epoch, and, when it is the
// same file (truncated or rewritten in place), a leading run of NUL bytes
// is skipped as a hole.
//
// With a pointer, the pointer keeps describing the old file until every
// line published from it is committed (a crash before re-reads them from
// the old file, found by identity among the rotated siblings); only then
// does it move to the new file.
//
// rotated, when not "", is the name of a file rotated after the old one
// (nextRotated): another file by identity, read from 0 under a new epoch
// with no verdict, and the path is read after it.
//
// lost: the old file's bytes after its last published line were just
// counted lost (rewritten): read from 0, the file is a move after a loss
// (committer.moveTo), which the pointer takes only with the commit of a
// line of its own, so never before the loss is recorded.
func (s *Source) switchTo(file *os.File, fi os.FileInfo, id uint64, rotated string, lost bool) error {
	old := s.rd
	size := fi.Size()
	name := s.path
	if rotated != "" {
		name = rotated
	}
	head, err := readHead(file, size, name)
	if err != nil {
		return err
	}
	p := header(old.head, s.fileID, old.pos, s.epoch)
	keep, why := false, ""
	if rotated == "" {
		keep, why = s.verdict(head, size, id, p, old.pos)
	}
	var off int64
	epoch := idEpoch(id)
	if keep {
		off, epoch = old.pos, s.epoch
	} else {
		s.replaced.Add(1)
		if s.opts.Read == Committed {
			epoch = newEpoch()
		}
		msg := fmt.Sprintf("input %s was %s: reading it from 0 under a new epoch", s.path, why)
		if rotated != "" {
			msg = fmt.Sprintf("%s was rotated after the file read before it: reading it from 0 under a new epoch, then %s", rotated, s.path)
		}
		if n := old.buffered(); n > 0 {
			msg += fmt.Sprintf("; %d unterminated bytes at the end of the old file were not published", n)
		}
		s.logf("%s", msg)
	}
	if s.opts.Read == Committed {
		if err := s.com.moveTo(header(head, id, off, epoch), old.pos, keep, lost && !keep); err != nil {
			return err
		}
	} else if n := old.buffered(); n > 0 && keep {
		s.logf("%d unterminated bytes at the end of the old %s were not published", n, s.path)
	}
	if epoch != s.epoch {
		s.f.SetEpoch(epoch)
		s.epoch = epoch
	}
	if !keep {
		// A move after a loss is not held: the pointer moves to the file
		// only with the commit of a line of its own (the pending header
		// holds its epoch meanwhile).
		s.hold = s.hold || (s.opts.Read == Committed && s.published && !lost)
		s.published = false
	}
	s.mu.Lock()
	if file != s.file {
		s.file.Close()
	}
	s.file, s.fileID = file, id
	s.rd = s.newReader(file, off, head)
	if !keep && (id == p.Identity || id == s.truncated) {
		s.rd.skip = skipNUL
		s.rd.holeFrom = 0
	}
	if id == s.truncated {
		s.truncated = 0
	}
	s.mu.Unlock()
	s.remember(id, head)
	if rotated != "" {
		s.switching = true // the path after it
		s.setState(engine.StateBehind, "reading the rotated "+rotated)
		return nil
	}
	s.switching, s.truncated = false, 0
	s.setState(engine.StateBehind, "reopened "+s.path)
	return nil
}

// committer commits acknowledged offsets of the current epoch into the
// pointer file. It is used by one goroutine at a time: the source's (Run,
// which polls), then the engine's stop after Run returned.
type committer struct {
	s         *Source
	epoch     int64
	acked     int64 // the highest acknowledged offset of epoch
	committed int64 // the offset in the pointer file

	// moves are the files read after the one the pointer describes, in
	// order, each with the end of the lines published from the file before
	// it (in that file's positions). The pointer moves to a file only once
	// every line of the files before it is acknowledged: acked reaches the
	// oldEnd (not for a move after a loss), or an acknowledgement of the
	// file's own epoch arrives (acknowledgements come in publish order).
	// head, when not nil, is the header of epoch's file, not yet written.
	moves []move
	head  *Pointer

	// waiting: head follows a loss counted at the start, and the pointer
	// file still describes the file lost from: only Commit writes head (or
	// the header of a file after it), which the engine calls only with the
	// acknowledgement of an item read after the loss, so once the loss's
	// LOST row, written before that item's rows, is recorded.
	waiting bool
}

// A move is a file read after the one before it: hdr its header, oldEnd
// the end of the lines published from the file before it. lost: the bytes
// of the file before it after those lines were counted lost (it was
// truncated or rewritten under the reader, no copy found): the pointer
// moves to it only with an acknowledgement of its own epoch, or of a file
// after it, never at oldEnd, so never before the loss is recorded.
type move struct {
	hdr    Pointer
	oldEnd int64
	lost   bool
}

// reset moves to a new epoch: acknowledgements of the old one are never
// committed, and what was acknowledged before is forgotten.
func (c *committer) reset(epoch, off int64) {
	c.epoch, c.acked, c.committed = epoch, off, off
	c.moves, c.head, c.waiting = nil, nil, false
}

// moveTo records np, the header of the file read from now on (oldEnd: the
// end of the lines published from the file before it). The pointer moves
// to it at once if every line before is acknowledged, else at the commit
// that completes them. keep: the same position space goes on in the new
// file (only the identity and the fingerprint change). lost: the rest of
// the file before it was counted lost (see move): np is written as the
// pointer file's pending header at once (pointerFile.pending), so that a
// restart reads the file under np's epoch, and the pointer moves to it
// only with the acknowledgement of an item of its own.
func (c *committer) moveTo(np Pointer, oldEnd int64, keep, lost bool) error {
	if keep {
		switch {
		case len(c.moves) > 0:
			np.Offset = c.moves[len(c.moves)-1].hdr.Offset
			c.moves[len(c.moves)-1].hdr = np
			return nil
		case c.head != nil:
			c.head = &np
			return nil
		}
		np.Offset = c.committed
		return c.s.writePointer(np)
	}
	c.moves = append(c.moves, move{np, oldEnd, lost})
	if lost {
		if err := c.s.writePending(np); err != nil {
			return err
		}
	}
	if c.advance() && !c.waiting {
		return c.writeHead()
	}
	return nil
}

// advance moves epoch on past every file whose lines are all acknowledged
// (up to a move after a loss); it reports whether the pointer's header
// must be rewritten.
func (c *committer) advance() bool {
	for len(c.moves) > 0 && !c.moves[0].lost && c.acked >= c.moves[0].oldEnd {
		m := c.moves[0]
		c.moves = c.moves[1:]
		c.epoch, c.acked = m.hdr.Epoch, m.hdr.Offset
		c.head = &m.hdr
	}
	return c.head != nil
}

// writeHead writes epoch's file's header at the acknowledged offset.
func (c *committer) writeHead() error {
	h := *c.head
	h.Offset = c.acked
	if err := c.s.writePointer(h); err != nil {
		return err
	}
	c.head, c.committed, c.waiting = nil, h.Offset, false
	return nil
}

// Acknowledged records an acknowledged position of the current epoch, or
// of a later file's (the files before it are then complete).
func (c *committer) Acknowledged(_, epoch int64, pos core.Position) {
	if epoch == c.epoch {
		c.acked = max(c.acked, pos.Offset)
		return
	}
	for k, m := range c.moves {
		if m.hdr.Epoch == epoch {
			c.moves = c.moves[k+1:]
			c.epoch, c.acked = epoch, pos.Offset
			c.head = &m.hdr
			return
		}
	}
}

// Commit writes the acknowledged offset, forward only; once the pointer's
// file is complete, the header of the file after it.
func (c *committer) Commit() error {
	if c.advance() {
		return c.writeHead()
	}
	if c.acked <= c.committed {
		return nil
	}
	if err := c.s.commit(c.acked); err != nil {
		return err
	}
	c.committed = c.acked
	return nil
}

// writePointer writes a whole header.
func (s *Source) writePointer(h Pointer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ptr.write(h)
}

// writePending writes np as the pointer file's pending header, keeping
// its header.
func (s *Source) writePending(np Pointer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ptr.store(s.ptr.hdr, np)
}

// commit writes off into the pointer: one flushed store, or, while the
// fingerprint covers less than FingerprintMax bytes and the reader read
// more of the file the pointer describes, a whole new header with the
// fingerprint grown from the bytes the reader read (its head, never what
// the file holds now), after checking that the file's first bytes are
// still those: a file rewritten in place keeps its old fingerprint, and the
// rewrite is noticed at the next check of the source, or at a restart.
func (s *Source) commit(off int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.ptr.hdr
	if h.FingerprintLen < FingerprintMax && s.rd != nil && s.file != nil && len(s.com.moves) == 0 &&
		s.com.head == nil && h.Identity == s.fileID &&
		h.Epoch == s.epoch && int64(len(s.rd.head)) > h.FingerprintLen {
		changed, err := s.prefixChanged()
		if err != nil {
			return err
		}
		if !changed {
			h2 := header(s.rd.head, h.Identity, off, h.Epoch)
			return s.ptr.write(h2)
		}
	}
	return s.ptr.setOffset(off)
}
