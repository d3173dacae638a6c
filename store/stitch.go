package store

import "errors"

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
