// Package killpoint is a test-only kill switch: it SIGKILLs the process at a
// named point of a write path, so that tests (and `blackbox crashtest
// --kill-at`) can prove what a crash leaves behind at exactly that point.
//
// It is armed only by the environment variable BLACKBOX_KILL_AT=POINT:N,
// read once when the process starts: the N-th time (N >= 1) the process
// reaches POINT, Reach kills it with SIGKILL (no deferred call, no flush,
// no END row: what a power cut or the OOM killer leaves, minus the page
// cache). A point that has a value (the pointer's offset, the highest input
// sequence of a batch of rows, the offset a saved state holds, the --out
// file's line count after a batch) can be armed
// as POINT@V instead: ReachAt kills the first time it is reached with a
// value of at least V, whatever the number of reaches before (the file
// source commits a varying number of lines per pointer write; the recorder
// writes a varying number of inputs per batch; the ledger saves a varying
// number of lines per batch; the outbox delivers a varying number of
// outputs per batch). It is never a flag
// a user sees. When the variable is unset or
// empty the package does nothing: Reach and WriteHalfAt cost one load of a
// package-level pointer and a compare. A malformed value (not POINT:N with
// a known POINT and N >= 1, or POINT@V with V >= 1) makes the process exit with code 2 at start-up,
// so that a test never mistakes a typo for a point that was not reached.
//
// The points (the constants below) sit in the write paths of the ledger
// run (StateSaved, RowsWritten, StoreWrite, PointerWritten,
// GroupProgressWritten) and of its
// --out outbox (OutMarked, OutWrite) and of its Kafka sink (SinkProduced,
// SinkCommitted), of `blackbox convert` (Convert,
// ConvertCopied) and of a golden update
// (GoldenRecorded, GoldenMoved, GoldenUpdate). It is the one way our tests
// stop a process at a named point: a test sets Env in a child process's
// environment (Value) and checks that SIGKILL ended it, then what it left.
//
// This is the one package of ours that store/, engine/ and outbox/ may
// import (an exception to "engine and store import nothing of ours",
// docs/ARCHITECTURE.md): the windows it proves (half a row, a pointer
// written but not flushed, a batch marked but not delivered) are inside
// those packages, where no hook of the public API reaches. It imports only the standard library and is
// internal, so users cannot arm it through an API.
//
// Every function is safe for concurrent use.
package killpoint

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Env is the environment variable that arms the switch: POINT:N or POINT@V.
const Env = "BLACKBOX_KILL_AT"

// The named points.
const (
	// StateSaved: after the ledger wrote its state file (internal/apps):
	// at a delivery's completion, or once per batch when it saves in
	// batches. Its value (ReachAt) is the offset of the last input the
	// saved state holds: armed as POINT@V it dies after the first save
	// that holds the input ending at V or a later one, whatever the
	// batching.
	StateSaved = "state-saved"
	// RowsWritten: after a batch of rows reached the store (the
	// recorder's Append of a group's batch returned), before its items
	// count as dispatched (recorder). Its value (ReachAt) is the batch's
	// highest input sequence (store.LastSeq): armed as POINT@V it dies
	// after the write of the batch holding input V, whatever the batching.
	RowsWritten = "rows-written"
	// StoreWrite: inside a store's Append: the CSV store writes half of
	// its bytes and dies; SQLite dies between its INSERTs and the COMMIT;
	// PostgreSQL (one query message per Append) dies before sending it.
	// In a store's first Append both write into the temporary file they
	// would rename over the recording (store.StartPath), which then stays
	// empty. Its value is the highest input sequence of the rows
	// (store.LastSeq).
	StoreWrite = "store-write"
	// PointerWritten: after the file source stored an offset into its
	// mapped pointer file, before the flush (engine/filesource).
	PointerWritten = "pointer-written"
	// GroupProgressWritten: after the file source stored a group's
	// progress into a slot of its mapped pointer file, before the flush
	// (engine/filesource). Its value (ReachAt) is the group's offset:
	// armed as POINT@V it dies at the first slot stored at V or past it.
	GroupProgressWritten = "group-progress-written"
	// OutMarked: after the outbox wrote a batch's mark, before the sink's
	// Deliver (outbox), in a run's delivery and in its recovery of what
	// earlier runs left. Its value (ReachAt) is the number of lines the
	// --out file holds once the batch is delivered (the outbox's file sink;
	// for another sink, the batch's number): armed as POINT@V it dies at
	// the first batch that brings the file to V lines or more, however
	// many outputs a batch holds.
	OutMarked = "out-marked"
	// OutWrite: inside the outbox's file sink's append of a batch (outbox):
	// it writes the first half of the batch's bytes (a partial last line)
	// and dies. Its value is OutMarked's: the lines the file holds once the
	// batch is appended whole.
	OutWrite = "out-write"
	// SinkProduced: inside the Kafka sink's Deliver, after the batch's
	// records were produced in its transaction, before EndTransaction
	// (outbox/kafkasink): a transaction left open. Its value (ReachAt)
	// is the batch's number.
	SinkProduced = "sink-produced"
	// SinkCommitted: inside the Kafka sink's Deliver, after its
	// transaction committed, before Deliver returns (outbox/kafkasink):
	// the topic holds the batch, the outbox does not know it. Its value
	// (ReachAt) is the batch's number.
	SinkCommitted = "sink-committed"
	// Convert: inside `blackbox convert`, after a batch of rows reached
	// the destination's temporary file (cmd/cli).
	Convert = "convert"
	// ConvertCopied: inside `blackbox convert`, after every row reached
	// the destination's temporary file, before it is synced, closed and
	// linked into place (cmd/cli).
	ConvertCopied = "convert-copied"
	// GoldenRecorded: inside a golden update, after a case's new
	// recordings were written and synced in its temporary folder, before
	// the folder is renamed to its ready folder, the commit point
	// (golden).
	GoldenRecorded = "golden-recorded"
	// GoldenMoved: inside a golden update, after each recording was
	// renamed from the case's ready folder over the old one: its first
	// reach falls between the two renames of a restart case's pair
	// (run1.csv, then run2.csv) (golden).
	GoldenMoved = "golden-moved"
	// GoldenUpdate: inside a golden update, after a case was updated
	// whole, before the next case (golden).
	GoldenUpdate = "golden-update"
)

// points lists every named point.
var points = []string{StateSaved, RowsWritten, StoreWrite, PointerWritten, GroupProgressWritten, OutMarked, OutWrite, SinkProduced, SinkCommitted,
	Convert, ConvertCopied, GoldenRecorded, GoldenMoved, GoldenUpdate}

// arm is the armed point: immutable but for its counter.
type arm struct {
	point string
	n     int64 // POINT:N: the N-th reach kills
	at    int64 // POINT@V: the first ReachAt with a value >= V kills (n is 0)
	count atomic.Int64
}

// armed is nil unless Env is set; written once, before main.
var armed *arm

func init() {
	v := os.Getenv(Env)
	if v == "" {
		return
	}
	a, err := parse(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "killpoint: %v\n", err)
		os.Exit(2)
	}
	armed = a
}

// parse reads POINT:N or POINT@V.
func parse(v string) (*arm, error) {
	point, num, ok := strings.Cut(v, ":")
	atValue := false
	if !ok {
		if point, num, ok = strings.Cut(v, "@"); !ok {
			return nil, fmt.Errorf("%s=%q: want POINT:N or POINT@V", Env, v)
		}
		atValue = true
	}
	known := false
	for _, p := range points {
		known = known || p == point
	}
	if !known {
		return nil, fmt.Errorf("%s=%q: unknown point %q (want one of %s)", Env, v, point, strings.Join(points, ", "))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s=%q: N (or V) must be a whole number >= 1", Env, v)
	}
	if atValue {
		return &arm{point: point, at: n}, nil
	}
	return &arm{point: point, n: n}, nil
}

// Value returns the value of Env that arms point at its n-th reach, for a
// child process's environment.
func Value(point string, n int64) string { return point + ":" + strconv.FormatInt(n, 10) }

// ValueAt is the value of Env that arms point at the first ReachAt whose
// value is at least v.
func ValueAt(point string, v int64) string { return point + "@" + strconv.FormatInt(v, 10) }

// hit counts a reach of point and reports whether it is the armed one.
func hit(point string) bool {
	a := armed
	if a == nil || a.point != point {
		return false
	}
	return a.n > 0 && a.count.Add(1) == a.n
}

// Reach marks that the process reached point: on the armed reach it kills
// the process and never returns.
func Reach(point string) {
	if armed == nil {
		return
	}
	if hit(point) {
		die()
	}
}

// ReachAt is Reach for a point that has a value (a position): armed as
// POINT@V, it kills the process the first time it is reached with a value of
// at least V; armed as POINT:N, it counts like Reach.
func ReachAt(point string, v int64) {
	a := armed
	if a == nil || a.point != point {
		return
	}
	if a.n == 0 && v >= a.at || hit(point) {
		die()
	}
}

// tear writes the first half of b, moved past a line break it would end
// on (a torn write leaves a partial last line), and kills the process.
func tear(w io.Writer, b []byte) {
	cut := len(b) / 2
	for cut > 0 && cut < len(b) && b[cut-1] == '\n' {
		cut++
	}
	_, _ = w.Write(b[:cut])
	die()
}

// WriteHalfAt marks that the process is about to write b to w at point,
// which has a value v (as ReachAt): on the armed reach (POINT@V: the first
// with a value of at least V; POINT:N: the N-th) it writes the first half
// of b (a torn write: moved past a line break it would end on, so that the
// last line is partial) and kills the process; otherwise it writes nothing
// and the caller writes b.
func WriteHalfAt(point string, v int64, w io.Writer, b []byte) {
	a := armed
	if a == nil || a.point != point {
		return
	}
	if a.n == 0 && v >= a.at || hit(point) {
		tear(w, b)
	}
}

// Armed reports whether point is the armed point: a caller computes a
// value for ReachAt or WriteHalfAt only then.
func Armed(point string) bool {
	a := armed
	return a != nil && a.point == point
}

// die sends SIGKILL to this process and waits for it to land.
func die() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	for {
		time.Sleep(time.Hour) // a sleeping goroutine: never "all goroutines are asleep"
	}
}
