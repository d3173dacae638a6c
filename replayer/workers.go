package replayer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/blackbox-audit/blackbox/store"
)

// ParseWorkerName parses the name of a worker's stream, as
// engine.WorkerName writes it: "processor#w<worker>", worker a decimal
// number without leading zeros counted from 0. ok is false for any other
// name (a processor of a group of one worker, or a recording made before
// workers existed). It is store.ParseWorkerStream, the one parser of that
// name, where the format lives; safe for concurrent use.
func ParseWorkerName(stream string) (processor string, worker int, ok bool) {
	return store.ParseWorkerStream(stream)
}

// logical is a processor as Diff compares it: the streams of one
// processor, its own and those of its workers, merged.
type logical struct {
	name string
	// streams[s][r] are the streams of the processor in run r of side s:
	// its own stream first, then its workers' in worker order.
	streams [2][][]string
	// workers[s] counts the distinct worker streams of side s.
	workers [2]int
}

// logicals groups the streams of both sides' runs by processor (see
// ParseWorkerName), in the order each processor is first met.
func logicals(sides [2][]store.Reader) []*logical {
	var out []*logical
	byName := map[string]*logical{}
	for si, rs := range sides {
		seen := map[string]bool{}
		for ri, r := range rs {
			for _, s := range r.Processors() {
				name, _, isWorker := ParseWorkerName(s)
				if !isWorker {
					name = s
				}
				l := byName[name]
				if l == nil {
					l = &logical{name: name, streams: [2][][]string{make([][]string, len(sides[0])), make([][]string, len(sides[1]))}}
					byName[name] = l
					out = append(out, l)
				}
				l.streams[si][ri] = append(l.streams[si][ri], s)
				if isWorker && !seen[s] {
					seen[s] = true
					l.workers[si]++
				}
			}
		}
	}
	for _, l := range out {
		for _, runs := range l.streams {
			for _, ss := range runs {
				slices.SortFunc(ss, func(x, y string) int {
					_, wx, okx := ParseWorkerName(x)
					_, wy, oky := ParseWorkerName(y)
					if !okx || !oky {
						return cmp.Compare(b2i(okx), b2i(oky)) // the processor's own stream first
					}
					return cmp.Compare(wx, wy)
				})
			}
		}
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// workersText says how many worker streams were merged on each side:
// "" when none, else "4 workers in A, 8 workers in B".
func workersText(a, b int) string {
	var parts []string
	if a > 0 {
		parts = append(parts, fmt.Sprintf("%s in A", plural(int64(a), "worker")))
	}
	if b > 0 {
		parts = append(parts, fmt.Sprintf("%s in B", plural(int64(b), "worker")))
	}
	return strings.Join(parts, ", ")
}
