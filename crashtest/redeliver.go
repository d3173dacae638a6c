package crashtest

import (
	"fmt"

	"github.com/blackbox-audit/blackbox/store"
)

// inputOffsets are the source offsets of the positioned inputs (their
// DELIVERY rows) a recording holds, in every stream: none for a killed
// run that created no recording. A killed recording's rows that cannot be
// read (a torn tail) are skipped.
func inputOffsets(path string, none bool) (map[int64]bool, error) {
	if none {
		return map[int64]bool{}, nil
	}
	r, err := openStore(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	offs := map[int64]bool{}
	for e, err := range r.Rows() {
		if err == nil && e.Kind == store.KindDelivery {
			offs[e.Offset] = true
		}
	}
	return offs, nil
}

// checkRedelivered fills, for each kill, the lines processed before it
// but not committed (Lag: the inputs the runs so far recorded past the
// pointer after the kill) and the lines the restart delivered again
// (Redelivered: its recorded inputs that an earlier run recorded too). The
// restart resumes at the pointer, so it re-delivers at most the lag: more
// is a failure. stores are the runs' recordings, the last one's included.
func (s *setup) checkRedelivered(rep *Report, stores []string) error {
	offs := make([]map[int64]bool, len(stores))
	for i, p := range stores {
		var err error
		if offs[i], err = inputOffsets(p, i < len(rep.Kills) && rep.Kills[i].NoRecording); err != nil {
			return err
		}
	}
	seen := map[int64]bool{}
	for i := range rep.Kills {
		k := &rep.Kills[i]
		for o := range offs[i] {
			seen[o] = true
		}
		k.Lag, k.Redelivered = redelivered(seen, offs[i+1], k.Pointer)
		if k.Redelivered > k.Lag {
			rep.Failures = append(rep.Failures, fmt.Sprintf("kill %d: the restart delivered %d lines again, more than the %d processed before it past the pointer (offset %d)",
				k.Run, k.Redelivered, k.Lag, k.Pointer))
		}
	}
	return nil
}

// redelivered counts the inputs processed so far (seen) past pointer (the
// commit lag), and the inputs of the next run that were seen (delivered
// again).
func redelivered(seen, next map[int64]bool, pointer int64) (lag, again int64) {
	for off := range seen {
		if off > pointer {
			lag++
		}
	}
	for off := range next {
		if seen[off] {
			again++
		}
	}
	return lag, again
}
