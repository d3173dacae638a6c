package store

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"
)

// CrashTail returns, of the problems ps of recording r, those that a run
// killed and then restarted shows whatever the crash cut, so that a later
// run of the same source explains them (`diff`, `explain` and `report`
// given consecutive runs): its streams without END (unfinished), its torn
// last line, and, when the line is torn, the orphan rows of the write it
// cut (an input whose OUTPUT rows were cut short: only OUTPUT rows of that
// input follow the orphan in its stream). Nothing else is a crash's: a
// gap, a malformed row, a seq a COMMIT row covers with no row, a FAILED
// row are problems of the run whatever followed it. It reads a stream of r
// for each orphan of a torn recording.
func CrashTail(r Reader, ps []Problem) []Problem {
	torn := false
	for _, p := range ps {
		torn = torn || p.Kind == ProblemTorn
	}
	var out []Problem
	for _, p := range ps {
		if p.Kind == ProblemUnfinished || p.Kind == ProblemTorn || torn && cutShort(r, p) {
			out = append(out, p)
		}
	}
	return out
}

// cutShort reports whether p is an orphan at the very end of its stream:
// only OUTPUT rows of the orphan's own input follow it. In a torn recording
// that is the input whose rows the crash cut short.
func cutShort(r Reader, p Problem) bool {
	if p.Kind != ProblemOrphan || p.Processor == "" {
		return false
	}
	for e, err := range r.Stream(p.Processor) {
		if errors.Is(err, ErrTorn) {
			continue // the torn line itself, set aside
		}
		if err != nil {
			return false
		}
		if e.Index > p.Index && e.Kind != KindOutput {
			return false
		}
	}
	return true
}

// ErrRuns: recordings given as the consecutive runs of one source (a
// crashed run and its restarts, stitched by diff, explain and report) that
// cannot be: a run given twice, runs out of order. A *RunsError says which.
var ErrRuns = errors.New("store: not a list of consecutive runs")

// RunsError is why two recordings of a list of runs cannot be its
// consecutive runs: runs First and Second (0-based, First < Second). It
// wraps ErrRuns. A plain value, safe to share.
type RunsError struct {
	First, Second int
	// Copy: run Second holds the same rows as run First (the same
	// recording given twice, or a copy of it, in any store).
	Copy bool
	// Before: run Second was created (META) before run First.
	Before         bool
	Created, Later time.Time // run First's and run Second's META created
}

func (e *RunsError) Error() string {
	if e.Copy {
		return fmt.Sprintf("%v: run %d holds the same rows as run %d (a run given twice, or a copy of it)", ErrRuns, e.Second+1, e.First+1)
	}
	return fmt.Sprintf("%v: run %d was created at %s, before run %d (created at %s): give the runs in the order they ran",
		ErrRuns, e.Second+1, FormatInstant(e.Later), e.First+1, FormatInstant(e.Created))
}

// Unwrap returns ErrRuns.
func (e *RunsError) Unwrap() error { return ErrRuns }

// CheckRuns checks that rs can be the consecutive runs of one source, in
// the order they ran: no recording holds the same rows as another (the
// same recording twice, or a copy of it: a crash would be counted twice, a
// restart's re-deliveries paired with themselves), and none was created
// (its META's created) before the one given before it. Recordings whose
// META rows differ hold different rows; two whose META rows are the same
// (a fixed clock) are read whole and compared row by row. The error is a
// *RunsError for the first two runs at fault, or a read error.
func CheckRuns(rs []Reader) error {
	for j := 1; j < len(rs); j++ {
		mi, mj := rs[j-1].Meta(), rs[j].Meta()
		if !mi.Created.IsZero() && !mj.Created.IsZero() && mj.Created.Before(mi.Created) {
			return &RunsError{First: j - 1, Second: j, Before: true, Created: mi.Created, Later: mj.Created}
		}
		for i := range j {
			mi := rs[i].Meta()
			if EncodeMeta(mi).Detail != EncodeMeta(mj).Detail {
				continue
			}
			same, err := sameRows(rs[i], rs[j])
			if err != nil {
				return err
			}
			if same {
				return &RunsError{First: i, Second: j, Copy: true, Created: mi.Created, Later: mj.Created}
			}
		}
	}
	return nil
}

// sameRows reports whether a and b yield the same rows, in the same order
// (a row that cannot be read the same problem at the same place).
func sameRows(a, b Reader) (bool, error) {
	next, stop := iter.Pull2(b.Rows())
	defer stop()
	for ea, erra := range a.Rows() {
		eb, errb, ok := next()
		if !ok {
			return false, nil
		}
		if erra != nil || errb != nil {
			var pa, pb *Problem
			if !errors.As(erra, &pa) || !errors.As(errb, &pb) {
				if erra != nil && !errors.As(erra, &pa) {
					return false, erra
				}
				if errb != nil && !errors.As(errb, &pb) {
					return false, errb
				}
				return false, nil
			}
			if pa.Kind != pb.Kind || pa.Processor != pb.Processor || pa.Index != pb.Index {
				return false, nil
			}
			continue
		}
		if !sameEntry(ea, eb) {
			return false, nil
		}
	}
	_, _, more := next()
	return !more, nil
}

func sameEntry(a, b Entry) bool {
	return a.Processor == b.Processor && a.Index == b.Index && a.Kind == b.Kind && a.Source == b.Source && a.Seq == b.Seq &&
		a.Instant.Equal(b.Instant) && a.Epoch == b.Epoch && a.Key == b.Key && a.Offset == b.Offset && a.N == b.N &&
		bytes.Equal(a.Payload, b.Payload) && a.Detail == b.Detail &&
		slices.EqualFunc(a.Reads, b.Reads, time.Time.Equal)
}
