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

// Reader reads a recording. Reads stream: memory does not grow with the
// recording's length. A Reader is safe for concurrent use by several
// goroutines unless its implementation says otherwise; each iterator is used
// by one goroutine.
type Reader interface {
	// Meta is the recording's META row, decoded.
	Meta() Meta
	// Processors lists the recorded processors in the order their streams start.
	Processors() []string
	// Rows yields every row in storage order (META first, then rows of every
	// processor and JOURNAL rows interleaved as written).
	Rows() iter.Seq2[Entry, error]
	// Stream yields one processor's rows in index order.
	Stream(processor string) iter.Seq2[Entry, error]
	// Journal returns the JOURNAL row of (feed, seq), or an error wrapping
	// ErrMissingJournal. Lookups of one feed in increasing seq are streaming.
	Journal(feed string, seq int64) (Entry, error)
	// Problems lists the integrity problems of the recording as it was
	// when opened (a backend may check it at open or at the first read that
	// needs it); empty means complete. A store that cannot be read (an I/O
	// error, a closed store) reports an unreadable Problem, never none.
	Problems() []Problem
	Close() error
}

// StreamsReader is a Reader that reads the rows of every processor stream,
// or every row, in one pass over the recording, checking the whole recording as it goes
// (csvstore and sqlitestore stores implement it): a replay reads a
// recording once through it.
type StreamsReader interface {
	Reader
	// Streams yields the rows of every processor stream (the rows whose
	// Processor is not ""): the rows of each stream in the order its
	// Stream yields them, the streams interleaved as the backend reads
	// them. A row that Stream(p) would yield as a *Problem (a malformed
	// row, the torn last line) is yielded with that *Problem and an Entry
	// holding only its Processor, p. An I/O error is yielded once and
	// ends the iteration. Streams is a pass, not a store of rows: the
	// Payload and Reads of a yielded Entry may be the backend's buffers,
	// valid only until the iteration goes on (copy what you keep), so
	// that a row costs no allocation. Every row of the recording, META and JOURNAL
	// rows included, is checked as Problems checks it: once an iteration
	// has run to its end, Problems and Processors answer without reading
	// the recording again.
	Streams() iter.Seq2[Entry, error]
	// Scan yields every row in storage order as Rows does (META first,
	// the rows of every stream and the rows of no stream, JOURNAL and
	// COMMIT, interleaved as written; a row that cannot be read as a zero
	// Entry with its *Problem), in one pass that checks the recording as
	// Streams does: once an iteration has run to its end, Problems and
	// Processors answer without reading the recording again. As in
	// Streams, the Payload and Reads of a yielded Entry may be the
	// backend's buffers, valid only until the iteration goes on. Explain
	// and report read a recording once through it.
	Scan() iter.Seq2[Entry, error]
}

// Writer appends rows to a new recording. Each Append is atomic with respect
// to a crash as far as the backend allows: one write call (CSV) or one
// transaction (SQLite). A Writer is not safe for concurrent use.
type Writer interface {
	Append(rows ...Entry) error
	Close() error
}

// Syncer is implemented by writers that can force their rows to stable
// storage (fsync), for the recorder's power-loss durability option.
type Syncer interface {
	Sync() error
}

// Store is an open recording: a Reader, plus Append for one that was
// created for recording. A store opened for reading refuses Append with
// ErrReadOnly.
type Store interface {
	Reader
	Writer
}
