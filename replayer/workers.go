package replayer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store"
)

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
// core.ParseWorkerStream), in the order each processor is first met.
func logicals(sides [2][]store.Reader) []*logical {
	var out []*logical
	byName := map[string]*logical{}
	for si, rs := range sides {
		seen := map[string]bool{}
		for ri, r := range rs {
			for _, s := range r.Processors() {
				name, _, isWorker := core.ParseWorkerStream(s)
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
					_, wx, okx := core.ParseWorkerStream(x)
					_, wy, oky := core.ParseWorkerStream(y)
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
