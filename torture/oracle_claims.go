package torture

// The oracle's checks of the COMMIT rows' claims (invariant 5): nothing a
// COMMIT row covers is delivered again.

import (
	"encoding/json"
	"strconv"
	"time"
)

// checkClaims checks that no position a COMMIT row covers is delivered
// again (invariant 5). For a file: by a later run, the same epoch at an
// offset at or below the commit, unless a recorded move back after the
// COMMIT row lowered the claim below it (docs/GUARANTEES.md, "Seek"). For Kafka: the same partition, by any
// member of the group in any run, after the commit (a delivery whose
// instant is past the first row written after the COMMIT row: the commit
// was made by then), unless a recorded move back of the group made after
// the commit and before the delivery lowered the partition's claim below
// it; a deleted topic starts its offsets again, and the claims before it
// lapse.
func (o *oracle) checkClaims() {
	if o.sr.kafka != nil {
		o.checkKafkaClaims()
		return
	}
	type claim struct {
		run    int
		store  string
		offset int64
	}
	claims := map[string]claim{} // feed|epoch -> highest committed
	for _, r := range o.recorded() {
		rec := o.recs[r.store]
		for _, in := range rec.inputs() {
			if c, ok := claims["input|"+strconv.FormatInt(in.epoch, 10)]; ok && c.run < r.index && in.offset <= c.offset {
				o.fail(InvClaims, "run %d (%s) delivered the file's offset %d (epoch %d) again, behind the COMMIT row of run %d (%s) at %d",
					r.index, r.store, in.offset, in.epoch, c.run, c.store, c.offset)
				break
			}
		}
		// The run's claims, in the order its rows were written: a COMMIT
		// row raises its epoch's; a recorded move back (the CONTROL row of
		// a seek whose after is below its before) lowers it to the
		// target's position (the source's commit came down to it), and the
		// COMMIT rows of seqs delivered before it (commits made before the
		// move back, reported after its row) raise it no more.
		first := map[int64]input{} // seq -> the run's input of that seq
		for _, in := range rec.inputs() {
			if _, ok := first[in.seq]; !ok {
				first[in.seq] = in
			}
		}
		var delivered, before int64 // the highest seq delivered so far; at the last move back
		for _, row := range rec.rows {
			switch {
			case row.kind == "DELIVERY":
				delivered = max(delivered, row.seq)
			case row.kind == "CONTROL":
				var c ctlRow
				if json.Unmarshal([]byte(row.detail), &c) != nil || !c.movedBack() {
					continue
				}
				epoch, at, known := movedTo(rec, first, c.After, delivered)
				if !known {
					// The run delivered nothing at or before the target
					// (an earlier seek skipped it all) and read nothing
					// again: where the source came down to is not known,
					// so the run's claims are lowered to nothing (never a
					// false violation; sweep seed 1796283069025893109).
					for k, cl := range claims {
						if cl.run == r.index {
							delete(claims, k)
						}
					}
				}
				k := row.source + "|" + strconv.FormatInt(epoch, 10)
				if cl, ok := claims[k]; known && ok && at < cl.offset {
					claims[k] = claim{run: r.index, store: r.store, offset: at}
				}
				before = max(delivered, c.Before) // the seqs published before it: delivered, or skipped by an earlier seek
			case row.kind == "COMMIT" && row.key == "" && row.seq > before:
				k := row.source + "|" + strconv.FormatInt(row.epoch, 10)
				if c, ok := claims[k]; !ok || row.offset > c.offset {
					claims[k] = claim{run: r.index, store: r.store, offset: row.offset}
				}
			}
		}
	}
}

// movedBack reports whether rec holds a recorded move back: the CONTROL
// row of a seek whose after is below its before.
func (rec *recording) movedBack() bool {
	for _, row := range rec.rows {
		var c ctlRow
		if row.kind == "CONTROL" && json.Unmarshal([]byte(row.detail), &c) == nil && c.movedBack() {
			return true
		}
	}
	return false
}

// movedTo is the position (epoch, offset) a move back to seq to, recorded
// in rec after its inputs up to seq delivered, lowered the file
// source's commit to: the input of seq to; for a seq the run did not
// deliver (one an earlier seek skipped), just below the first input read
// again after the row (the line after it); with none (the run ended
// before it read again), the last input the run delivered before it (a
// claim lowered a little too far: never a false violation). known is
// false when the run holds none of these (it delivered nothing before the
// target and read nothing again).
func movedTo(rec *recording, first map[int64]input, to, delivered int64) (epoch, offset int64, known bool) {
	if in, ok := first[to]; ok {
		return in.epoch, in.offset, true
	}
	for _, in := range rec.inputs() { // storage order: the first past delivered is the first read again
		if in.seq > delivered {
			return in.epoch, in.offset - 1, true
		}
	}
	var last input
	for _, in := range rec.inputs() {
		if in.seq < to && in.seq > last.seq {
			last = in
		}
	}
	return last.epoch, last.offset, last.seq > 0
}

// claimMargin is how long after the last row written before a Kafka
// COMMIT row a delivery of what it covers must come to be surely after the
// commit: more than the batches of rows a group writes at once take, less
// than a rebalance (a revocation, a session) takes.
const claimMargin = 300 * time.Millisecond

// kafkaMove is a recorded move back of a Kafka feed's group (the CONTROL
// row of a seek whose after is below its before): the engine moved each
// partition with records after the target back to its last record at or
// before it (engine/rewind.go), and the source lowered the partition's
// commit to it.
type kafkaMove struct {
	store     string
	row       int   // the CONTROL row's index in the store's rows
	delivered int64 // the highest seq the run delivered before the row
	// before is the highest seq the feed had published before the row:
	// delivered, or skipped by an earlier seek (the row's before). A
	// COMMIT row of a seq up to it is a commit made before the move back,
	// wherever it is written (a skipped range is committed at the next
	// poll, which applies the move back after it: seed
	// 1796283069025892410).
	before int64
	to     map[string]int64 // partition|epoch -> the offset the commit came down to
	// own marks the partitions of to whose target the run's inputs do not
	// show (to -1): only the run's own claims are lowered (a move back
	// never goes below where the run began reading).
	own map[string]bool
}

// kafkaMoves reads rec's recorded moves back: each target seq mapped, from
// the run's inputs, to each partition's last record at or before it.
func kafkaMoves(store string, rec *recording) []kafkaMove {
	var moves []kafkaMove
	var delivered int64
	for i, row := range rec.rows {
		switch row.kind {
		case "DELIVERY":
			delivered = max(delivered, row.seq)
		case "CONTROL":
			var c ctlRow
			if json.Unmarshal([]byte(row.detail), &c) != nil || !c.movedBack() {
				continue
			}
			m := kafkaMove{store: store, row: i, delivered: delivered, before: max(delivered, c.Before), to: map[string]int64{}, own: map[string]bool{}}
			last := map[string]int64{} // partition|epoch -> the seq of its record in m.to
			for _, in := range rec.inputs() {
				k := in.key + "|" + strconv.FormatInt(in.epoch, 10)
				if s, ok := last[k]; in.seq <= c.After && (!ok || in.seq > s) {
					last[k], m.to[k] = in.seq, in.offset
				}
			}
			// A partition the run committed or read with no record at or
			// before the target among its inputs: the engine moved it to a
			// record an earlier seek skipped (a DROPPED row, no position),
			// or not at all; the oracle cannot tell where: its run's claims
			// of it are lowered to nothing (never a false violation).
			for _, r := range rec.rows {
				if (r.kind == "COMMIT" && r.key != "") || r.kind == "DELIVERY" {
					k := r.key + "|" + strconv.FormatInt(r.epoch, 10)
					if _, ok := m.to[k]; !ok {
						m.to[k], m.own[k] = -1, true
					}
				}
			}
			moves = append(moves, m)
		}
	}
	return moves
}

// checkKafkaClaims is checkClaims for a Kafka feed. A recorded move back
// (kafkaMoves) lowers the claims made before it (the COMMIT rows of
// earlier runs, and of its run before its row or of seqs delivered before
// it) to each partition's target, for the deliveries after it (of a later
// run, or of its run's seqs past those it had delivered).
func (o *oracle) checkKafkaClaims() {
	type claim struct {
		store  string
		offset int64
		epoch  int64     // the position space: a topic deleted and created within a run has another
		by     time.Time // the commit was made by then
		row    int       // the COMMIT row's index in the store's rows
		seq    int64     // the last seq it covers
	}
	type era struct{ recs []*outcome }
	// Runs between topic deletions share their offsets.
	var eras []era
	for _, r := range o.sr.runs {
		if len(eras) == 0 || o.sr.topicDeletedBefore(r.index) {
			eras = append(eras, era{})
		}
		for _, x := range []*outcome{r, r.member} {
			if x != nil && !x.refused && o.recs[x.store] != nil {
				eras[len(eras)-1].recs = append(eras[len(eras)-1].recs, x)
			}
		}
	}
	for _, e := range eras {
		var claims []claim
		var moves []kafkaMove
		keys := map[int]string{}
		pos := map[string]int{} // store -> its run's place in the era (a member shares its run's)
		for _, x := range e.recs {
			if _, ok := pos[x.store]; !ok {
				pos[x.store] = len(pos)
			}
			moves = append(moves, kafkaMoves(x.store, o.recs[x.store])...)
			rows := o.recs[x.store].rows
			for i, row := range rows {
				if row.kind != "COMMIT" || row.key == "" {
					continue
				}
				// The COMMIT row is written with the first rows written after
				// the commit was made, so every row before it was processed
				// before; with workers the rows after it may have been
				// processed before the commit too (a worker's batch written
				// later). A delivery well past the last instant before the
				// row (a rebalance's worth) was surely made after it.
				var last time.Time
				for _, prev := range rows[:i] {
					if prev.instant.After(last) {
						last = prev.instant
					}
				}
				if last.IsZero() {
					continue
				}
				by := last.Add(claimMargin)
				keys[len(claims)] = row.key
				claims = append(claims, claim{store: x.store, offset: row.offset, epoch: row.epoch, by: by, row: i, seq: row.seq})
			}
		}
		// offset is c's claim for a delivery in of store: lowered by each
		// move back made after c and before in.
		offset := func(c claim, store string, in input) int64 {
			off := c.offset
			for _, m := range moves {
				madeBefore := pos[c.store] < pos[m.store] || c.store == m.store && (c.row < m.row || c.seq <= m.before)
				deliveredAfter := pos[store] > pos[m.store] || store == m.store && in.seq > m.delivered
				k := in.key + "|" + strconv.FormatInt(in.epoch, 10)
				if to, ok := m.to[k]; ok && madeBefore && deliveredAfter && (!m.own[k] || c.store == m.store) {
					off = min(off, to)
				}
			}
			return off
		}
		for _, x := range e.recs {
			// A member processes the records of a partition it had
			// queued when the partition was revoked (the revocation
			// waits only --revoke-timeout for them), possibly after the
			// next owner committed them: they are fenced, never
			// committed, and the member's run prints how many
			// (docs/GUARANTEES.md, "a rebalance revokes a partition").
			// So many deliveries of a partition behind another member's
			// claim are those; one more is a claim broken.
			fenced := partitionsOf(x.output)
			behind := map[string]int64{}
			for _, in := range o.recs[x.store].inputs() {
				for ci, c := range claims {
					if keys[ci] != in.key || in.epoch != c.epoch || in.at.IsZero() || !in.at.After(c.by) {
						continue
					}
					if off := offset(c, x.store, in); in.offset > off {
						continue
					}
					if c.store != x.store {
						if behind[in.key]++; behind[in.key] <= fenced[in.key] {
							break
						}
					}
					o.fail(InvClaims, "%s delivered %s offset %d at %s, after %s's COMMIT row claimed it committed (offset %d, made by %s, lowered to %d by the moves back recorded); its run fenced %d of %s",
						x.store, in.key, in.offset, in.at.Format("15:04:05.000"), c.store, c.offset, c.by.Format("15:04:05.000"), offset(c, x.store, in), fenced[in.key], in.key)
					return
				}
			}
		}
	}
}
