package store

import (
	"errors"
	"fmt"
	"iter"
)

// Sentinel errors. Callers test them with errors.Is; they are never matched
// by their text.
var (
	// ErrReadOnly: an append into a recording opened for reading, or into one
	// with an integrity problem.
	ErrReadOnly = errors.New("store: read-only recording")
	// ErrHoldsRecording: RECORD into a store that already holds a recording.
	ErrHoldsRecording = errors.New("store: already holds a recording")
	// ErrFormat: the file is not a recording of a format this build reads
	// (another format, another version, not a CSV or SQLite recording).
	ErrFormat = errors.New("store: not a blackbox recording")
	// ErrName: a processor, feed or sink name that the format cannot hold
	// (a line break).
	ErrName = errors.New("store: invalid name")
	// ErrClosed: use of a closed store.
	ErrClosed = errors.New("store: closed")
	// ErrLocked: a recording another store holds open for writing (an
	// exclusive OS lock on its file): a second Create, or Lock, fails at
	// once with an error wrapping it that names the file.
	ErrLocked = errors.New("store: recording is locked by another run")

	// One sentinel per problem kind; a *Problem unwraps to its kind's.
	ErrTorn           = errors.New("store: torn row")
	ErrOrphan         = errors.New("store: orphan row")
	ErrGap            = errors.New("store: gap")
	ErrUnfinished     = errors.New("store: unfinished stream")
	ErrMissingJournal = errors.New("store: missing journal row")
	ErrMalformed      = errors.New("store: malformed row")
	ErrMissingStream  = errors.New("store: missing stream")
	ErrUnreadable     = errors.New("store: unreadable")
	ErrMissingInput   = errors.New("store: missing input")
	ErrFailed         = errors.New("store: recorded failure")
)

// FileError is an error of the recording file Path: Op says what failed
// ("csvstore: open", "sqlitestore: append", "store: lock"), Line the CSV
// line or SQLite row at fault (0: none). Unwrap gives the cause: a sentinel
// (ErrFormat, ErrClosed, ErrLocked ...) or an I/O error. A caller that
// names files itself finds the file with errors.As, never in the text. A
// FileError is not modified once returned: safe to share.
type FileError struct {
	Op   string
	Path string
	Line int64
	Err  error
}

func (e *FileError) Error() string {
	loc := e.Path
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	return e.Op + " " + loc + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// ProblemKind names an integrity problem. The names are part of the JSON of
// `blackbox verify` and of docs/FORMAT.md.
type ProblemKind string

// The problem kinds.
const (
	ProblemTorn           ProblemKind = "torn"            // a last line with no terminator (CSV)
	ProblemOrphan         ProblemKind = "orphan"          // DELIVERY or OUTPUT rows with no input, too few or too many OUTPUT rows
	ProblemGap            ProblemKind = "gap"             // a missing index, a stream without START
	ProblemUnfinished     ProblemKind = "unfinished"      // a stream without END: the process did not stop cleanly
	ProblemMissingJournal ProblemKind = "missing-journal" // an INDEXED row whose JOURNAL row is missing
	ProblemMalformed      ProblemKind = "malformed"       // a row that does not parse (bad number, unknown kind, bad column count)
	ProblemMissingStream  ProblemKind = "missing-stream"  // a stream META lists with no row, a stream META does not list, no stream at all
	ProblemUnreadable     ProblemKind = "unreadable"      // the store could not be read (an I/O error): nothing is known of it
	ProblemMissingInput   ProblemKind = "missing-input"   // seqs a COMMIT row (or a clean end) covers with no row in a processor that takes the feed
	ProblemFailed         ProblemKind = "failed"          // a FAILED row: its stream is not reproducible past it
)

// Problem is one integrity problem of a recording. It is an error: errors.Is
// matches the sentinel of its kind (ErrTorn, ErrOrphan ...), errors.As
// extracts it with its location.
type Problem struct {
	Kind      ProblemKind `json:"kind"`
	File      string      `json:"-"`
	Processor string      `json:"processor"`
	Index     int64       `json:"index"`
	Row       Kind        `json:"row,omitempty"` // the kind of the row at fault, when there is one
	Line      int64       `json:"line"`          // CSV: physical line (the header is line 1); SQLite: rowid; 0 for none
	Detail    string      `json:"detail"`
	// Feed, First and Last are the seqs a missing-input problem is about:
	// seqs First to Last of Feed have no row in Processor (a processor
	// with its workers' streams merged: BaseStream). Zero for other kinds.
	Feed  string `json:"feed,omitempty"`
	First int64  `json:"first,omitempty"`
	Last  int64  `json:"last,omitempty"`
}

func (p *Problem) Error() string {
	loc := p.File
	if p.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, p.Line)
	}
	who := ""
	if p.Processor != "" {
		who = fmt.Sprintf(" processor %q", p.Processor)
		if p.Index > 0 {
			who += fmt.Sprintf(" index %d", p.Index)
		}
	}
	row := ""
	if p.Row != "" {
		row = " " + string(p.Row)
	}
	return fmt.Sprintf("%s: %s%s%s: %s", loc, p.Kind, who, row, p.Detail)
}

// Unwrap returns the sentinel of the problem's kind.
func (p *Problem) Unwrap() error {
	switch p.Kind {
	case ProblemTorn:
		return ErrTorn
	case ProblemOrphan:
		return ErrOrphan
	case ProblemGap:
		return ErrGap
	case ProblemUnfinished:
		return ErrUnfinished
	case ProblemMissingJournal:
		return ErrMissingJournal
	case ProblemMissingStream:
		return ErrMissingStream
	case ProblemUnreadable:
		return ErrUnreadable
	case ProblemMissingInput:
		return ErrMissingInput
	case ProblemFailed:
		return ErrFailed
	default:
		return ErrMalformed
	}
}

// Unreadable returns the problems of a store that could not be read: one
// unreadable Problem naming the file and the error. Readers return it from
// Problems and Verify when they cannot read, so that no read error is ever
// taken for a complete recording.
func Unreadable(file string, err error) []Problem {
	return []Problem{{Kind: ProblemUnreadable, File: file, Detail: fmt.Sprintf("cannot read %s: %v", file, err)}}
}

// Reader reads a recording: the one checked reader (Recording) over any
// backend, or a Memory. Reads stream: memory does not grow with the
// recording's length. A Reader is safe for concurrent use by several
// goroutines; each iterator is used by one goroutine.
//
// The first pass that reads every row (Rows, Scan, Streams) checks the
// recording as it goes (Checker): once it has run to its end, Problems and
// Processors answer without reading the recording again. A Problems or
// Processors asked before any pass reads the recording once to check it.
type Reader interface {
	// Meta is the recording's META row, decoded.
	Meta() Meta
	// Processors lists the recorded processors in the order their streams start.
	Processors() []string
	// Problems lists the integrity problems of the recording as it was
	// when opened (of a recording being written: of the rows written so
	// far); empty means complete. A store that cannot be read (an I/O
	// error, a closed store) reports an unreadable Problem, never none.
	Problems() []Problem
	// Controls lists the CONTROL rows that decode (ControlOf), in order:
	// the operator's actions, read with the Problems (no pass of its own
	// once a pass over the rows ran).
	Controls() []Control
	// Rows yields every row in storage order (META first, then rows of
	// every processor and the rows of no stream, JOURNAL and COMMIT,
	// interleaved as written). A row that cannot be read (a malformed row,
	// the torn last line) is yielded as a zero Entry with its *Problem and
	// iteration goes on; an I/O error is yielded once and ends it.
	Rows() iter.Seq2[Entry, error]
	// Scan is Rows in one pass that may lend the backend's buffers: the
	// Payload and Reads of a yielded Entry are valid only until the
	// iteration goes on (copy what you keep), so that a row costs no
	// allocation. Explain and report read a recording once through it.
	Scan() iter.Seq2[Entry, error]
	// Stream yields one processor's rows in storage order (the order of
	// their indexes in a recording without problems); its unreadable rows
	// as Rows yields them.
	Stream(processor string) iter.Seq2[Entry, error]
	// Streams yields the rows of every processor stream (the rows whose
	// Processor is not ""), each stream's rows in the order Stream yields
	// them, the streams interleaved as stored. A row that Stream(p) would
	// yield as a *Problem is yielded with that *Problem and an Entry
	// holding only its Processor, p. As in Scan, the Payload and Reads of
	// a yielded Entry are valid only until the iteration goes on. A replay
	// reads a recording once through it.
	Streams() iter.Seq2[Entry, error]
	// Journal returns the JOURNAL row of (feed, seq), or an error wrapping
	// ErrMissingJournal. Lookups of one feed in increasing seq are streaming.
	Journal(feed string, seq int64) (Entry, error)
	Close() error
}

// Writer appends rows to a new recording. Each Append is atomic with respect
// to a crash as far as the backend allows: one write call (CSV) or one
// transaction (SQLite). Sync forces the rows appended to stable storage
// (fsync; a no-op where there is none), for the recorder's power-loss
// durability option. A Writer is not safe for concurrent use.
type Writer interface {
	Append(rows ...Entry) error
	Sync() error
	Close() error
}
