package core

import (
	"strconv"
	"strings"
)

// The names of a processor's instances and the batch bound are part of the
// recording format (docs/FORMAT.md, "Worker streams"): the engine writes
// them, the store, the replayer and explain read them. They live here, once.

// WorkerStream is the name of a processor's instance on a worker of a group
// of several workers: "processor#w<worker>", workers counted from 0, the
// worker a decimal number without leading zeros. It names the worker's
// stream in a recording (and, in the CLI, the worker's state file);
// ParseWorkerStream reads it.
func WorkerStream(processor string, worker int) string {
	return processor + "#w" + strconv.Itoa(worker)
}

// ParseWorkerStream parses the name of a worker's stream, as WorkerStream
// writes it. ok is false for any other name (a processor of a group of one
// worker, or a recording made before workers existed). It is the one parser
// of that name; safe for concurrent use.
func ParseWorkerStream(stream string) (processor string, worker int, ok bool) {
	i := strings.LastIndex(stream, "#w")
	if i <= 0 {
		return "", 0, false
	}
	digits := stream[i+2:]
	if digits == "" || len(digits) > 1 && digits[0] == '0' || strings.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) {
		return "", 0, false
	}
	w, err := strconv.Atoi(digits)
	if err != nil {
		return "", 0, false
	}
	return stream[:i], w, true
}

// BaseStream is the processor a stream belongs to: the processor of a
// worker's stream (ParseWorkerStream), the stream itself otherwise.
func BaseStream(stream string) string {
	if p, _, ok := ParseWorkerStream(stream); ok {
		return p
	}
	return stream
}

// MaxBatch is how many items a group (or one of its workers) takes from one
// queue before it looks at its other queues and its timers: the most items
// whose rows a recording observer writes together (one flush), so the most
// a crash can cut at once in one group. explain bounds what a crashed run
// may have had in flight by it (for a recording made when it was 64, a
// bound looser than needed: a "may", never a miss). 256 rather than 64: a
// transaction of SQLite, or a write of CSV, per 256 items instead of 64
// made the alerts run to SQLite about 12% faster (docs/PERFORMANCE.md),
// while a batch of fast items still ends within a millisecond or so.
const MaxBatch = 256
