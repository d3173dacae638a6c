package replayer

import (
	"errors"
	"fmt"

	"github.com/blackbox-audit/blackbox/store"
)

// space is a position space of a feed: a key of it (a Kafka partition,
// "" for a file) in an epoch.
type space struct {
	feed, key string
	epoch     int64
}

// committed is what a run's COMMIT rows say: per position space, the
// highest position its source committed. nil for a run whose format has
// no COMMIT rows (FormatV2, FormatV1): what it committed is not known.
type committed map[space]int64

// commits reads the COMMIT rows of each run of a side (its rows of no
// processor, read once a run): committed per run. A row that cannot be
// read is skipped (Problems lists it, and the side is not complete).
func (d *differ) commits(side string, rs []store.Reader) ([]committed, error) {
	out := make([]committed, len(rs))
	for i, r := range rs {
		if !store.KindCommit.In(r.Meta().Format) {
			continue
		}
		c := committed{}
		for e, err := range r.Stream("") {
			if err != nil {
				var pb *store.Problem
				if errors.As(err, &pb) {
					continue
				}
				return nil, fmt.Errorf("replayer: diff: reading the COMMIT rows of side %s run %d: %w", side, i+1, err)
			}
			if e.Kind != store.KindCommit {
				continue
			}
			k := space{e.Source, e.Key, e.Epoch}
			if o, ok := c[k]; !ok || e.Offset > o {
				c[k] = e.Offset
			}
		}
		out[i] = c
	}
	return out, nil
}

// sideRuns is what Diff knows of a side's runs when it judges a
// re-delivery (sideAgg.add): which were killed (killedRuns), what each
// committed, and whether the runs ran one after another (consecutive: a
// crashed run and its restarts) or at the same time (concurrent: the
// members of a consumer group, DiffOptions.Concurrent).
type sideRuns struct {
	killed     []bool
	commits    []committed
	concurrent bool
}

// covers says whether dl's run committed dl's input (a COMMIT row of its
// feed, key and epoch at its position or past it), and whether that is
// known: a delivery with a position (a DELIVERY row) in a run whose format
// has COMMIT rows.
func (sr *sideRuns) covers(dl *delivery) (cov, known bool) {
	c := sr.commits[dl.run-1]
	if !dl.hasDel || dl.kind == store.KindTimer || c == nil {
		return false, false
	}
	o, ok := c[space{dl.src, dl.del.Key, dl.del.Epoch}]
	return ok && o >= dl.del.Offset, true
}

// explained reports whether dl, a delivery of an input s has had before,
// is one the side's runs explain (else it is Repeated); cov and known are
// sr.covers(dl).
//
// Twice in one run is never explained. Where what the runs committed is
// known (positioned inputs, formats with COMMIT rows), a source delivers
// again only what was not committed: in consecutive runs, the input is
// explained when the run of its previous delivery did not commit it; in
// concurrent runs (a group's members, whose order in time the recordings
// do not give), when at most one of the runs that delivered it committed
// it (that one took it last: a member that committed it before the
// partition moved would have moved the group's commit past it, and no
// later owner reads it again). Otherwise (no position, or no COMMIT rows)
// only a killed run's inputs are delivered again, by the next run.
func (sr *sideRuns) explained(s *sideAgg, dl *delivery, cov, known bool) bool {
	prev := int(s.last) - 1
	switch {
	case s.last == int32(dl.run):
		return false
	case !known || sr.commits[prev] == nil:
		return sr.killed[prev]
	case sr.concurrent:
		n := s.covers
		if cov {
			n++
		}
		return n <= 1
	}
	return !s.lastCov
}
