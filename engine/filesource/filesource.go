package filesource

import (
	"context"
	"fmt"
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

// The read strategies (see the package documentation): the values of
// Options.Read, and what ParseStrategy returns for their names.
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
	// unkept names the groups whose progress the pointer file could not
	// keep, warned of (mu).
	unkept map[string]bool
	// reading is what a backwards seek's check (CheckRewind, on the
	// operator's goroutine) reads of the run (mu): see rewind.go.
	reading runState
	// checks counts the backwards seeks CheckRewind accepted (incremented
	// under mu); seen is its value before the run's last poll that
	// completed (Run's): while they differ, a seek accepted may wait for
	// the next poll to apply it, and the run leaves not the file it reads
	// (pinned).
	checks atomic.Uint64
	seen   uint64

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
	commitErr string        // the last commit failure warned about
	openErr   string        // the last reopen failure warned about
	refused   uint64        // the identity of the file the path named then
	note      string        // what the run lost, kept in every detail
	lastPub   engine.Commit // the last line published: its epoch and position (Seq unused)
	reported  engine.Commit // the end of the last oversized line reported lost, in its epoch (Seq unused)
	redo      bool          // a rewrite noticed while pinned: handled at the next cycle
	scratch   []byte        // the prefix check's buffer

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

	// pending is the pointer file's pending header, as the run found it or
	// last wrote it (a move after a loss), kept by every write of the
	// header until the pointer moves to its file or past it. resume is the
	// one the run found: the first file the run moves to (the one after
	// the pointer's), if it is the file it describes (pendingFor), is read
	// under its epoch; never a file this run read before.
	pending, resume Pointer

	// What the source skipped or read again that is not a loss (Status),
	// since the last Run began.
	holeBytes atomic.Int64
	replaced  atomic.Int64

	// for tests
	bufSize    int
	hookOpened func()                   // after the input file is opened, before it is identified
	hookListed func()                   // at the start, after the rotated siblings are listed, before the input is opened
	hookEOF    func()                   // at the end of the open file, before the identity check
	hookRotate func(string)             // before a rotated sibling (its name) is opened to be read
	hookWrite  func(Pointer)            // before each write of the pointer file, with what it will hold
	hookGroup  func(GroupProgress, int) // pointerFile.hookGroup
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
	s.published, s.hold, s.pending, s.resume = false, false, Pointer{}, Pointer{}
	s.state, s.detail, s.note, s.openErr = "", "", "", ""
	s.lastPub, s.reported, s.redo = engine.Commit{}, engine.Commit{}, false
	s.known = map[uint64]seenFile{}
	s.mu.Lock()
	s.unkept = nil
	s.reading = runState{}
	s.seen = s.checks.Load()
	s.mu.Unlock()
	s.holeBytes.Store(0)
	s.replaced.Store(0)
	if s.opts.Read == Committed {
		s.mu.Lock()
		s.ptr = pointerFile{path: s.opts.Pointer, hookWrite: s.hookWrite, hookGroup: s.hookGroup}
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
			s.lastLook()
			return nil
		}
		if s.pinned() {
			// A backwards seek accepted may wait for the next poll: the
			// run reads nothing meanwhile (it would leave the file).
			if !s.idle(ctx, timer, &idle) {
				s.poll()
				s.lastLook()
				return nil
			}
			continue
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
			s.lastLook()
			return nil
		}
	}
}

// lastLook is a tailing source's last look when it stops: one stopped
// right after it published the last lines it read, before it looked at
// the file again, said BEHIND though nothing was left to read (a clean
// stop then not settled). It says CAUGHT_UP, reading nothing, when the
// open file ends where the reader is, no complete line waits in the
// reader, nothing is skipped or held, and the path still names the file.
func (s *Source) lastLook() {
	rd := s.rd
	if s.state != engine.StateBehind || rd == nil || s.switching || s.hold || s.final || rd.skip != skipNone {
		return
	}
	if _, _, ok := rd.next(false); ok {
		return
	}
	fi, err := s.file.Stat()
	if err != nil || fi.Size() != rd.readOff() {
		return
	}
	if st, err := os.Stat(s.path); err != nil || identity(st) != s.fileID {
		return
	}
	s.setState(engine.StateCaughtUp, s.openErr)
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
	checks := s.checks.Load()
	_, err := s.f.PollAcks()
	s.seen = checks
	s.noteReading()
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
