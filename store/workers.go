package store

import (
	"strconv"
	"strings"
)

// ParseWorkerStream parses the name of a worker's stream, as
// engine.WorkerName writes it (docs/FORMAT.md, "Worker streams"): "processor#w<worker>", worker a decimal number without leading
// zeros counted from 0. ok is false for any other name (a processor of a
// group of one worker, or a recording made before workers existed). It is
// the one parser of that name; safe for concurrent use.
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
