package incident

// redelivered answers 4 and 6: inputs of a later run at the position of an
// earlier run's input. Each is paired with the latest earlier run that
// delivered it; its outputs with those of the latest earlier delivery that
// emitted some.
func (x *explainer) redelivered(p pair, a *Answers) {
	// seen is what the maps keep of an input: the fields its Input and
	// its OUTPUT rows' Refs need, its position being the key.
	type seen struct {
		run     int
		stream  string
		seq     int64
		index   int64
		outs    int64
		failed  int64
		epoch   int64 // its position's
		indexed bool
	}
	rec := func(s seen, pos Position) inputRec {
		pos.Epoch = s.epoch
		return inputRec{stream: s.stream, seq: s.seq, index: s.index, outs: s.outs, failed: s.failed,
			indexed: s.indexed, delivery: true, pos: pos}
	}
	type at struct {
		pos Position
		s   seen
	}
	latest, emitted := map[Position]seen{}, map[Position]seen{}
	for i, d := range x.runs {
		var here []at
		later := i < len(x.runs)-1 // a later run may deliver its inputs again
		for in := range d.inputs.all() {
			if in.pair != p || !in.delivery {
				continue
			}
			if later {
				here = append(here, at{in.pos, seen{d.run, in.stream, in.seq, in.index, in.outs, in.failed, in.pos.Epoch, in.indexed}})
			}
			e, ok := latest[place(in.pos)]
			if !ok {
				continue
			}
			earlier := rec(e, in.pos)
			rd := Redelivery{Position: in.pos, Earlier: x.input(x.runs[e.run-1], &earlier), Again: x.input(d, &in)}
			prev, out := emitted[place(in.pos)]
			switch {
			case in.outs > 0:
				rd.Outcome = OutcomeAppliedAgain
			case out:
				rd.Outcome = OutcomeSkipped
			default:
				rd.Outcome = OutcomeUndetermined
			}
			rd.MovedBack = x.movedBack(p, e.run, d.run, in.pos)
			a.Redelivered = append(a.Redelivered, rd)
			notAgain := out && d.outbox && x.runs[prev.run-1].outbox
			for k := int64(1); out && k <= in.outs; k++ {
				dup := Duplicate{Position: in.pos, K: k, Again: in.output(d.run, k), NotDelivered: notAgain} // fill reads the rest
				if notAgain {
					a.NotAgain++
				}
				if k <= prev.outs {
					pr := rec(prev, in.pos)
					r := pr.output(prev.run, k)
					dup.Earlier = &r
				}
				a.Duplicates = append(a.Duplicates, dup)
			}
		}
		for _, h := range here { // a position twice in one run: its first
			at := place(h.pos)
			if e, ok := latest[at]; !ok || e.run != d.run {
				latest[at] = h.s
			}
			if h.s.outs > 0 {
				if e, ok := emitted[at]; !ok || e.run != d.run {
					emitted[at] = h.s
				}
			}
		}
	}
}

// movedBack is the CONTROL row of the last recorded move back of p's feed
// in runs from..again-1 whose target is an input of that run before pos in
// its position space (nil: none): the reason run again delivers pos again.
// A move back whose target the run holds no input of (a seq a seek
// skipped) explains nothing.
func (x *explainer) movedBack(p pair, from, again int, pos Position) *Ref {
	var found *Ref
	for run := from; run < again; run++ {
		d := x.runs[run-1]
		for i := range d.movesBack {
			m := &d.movesBack[i]
			if m.feed != p.feed {
				continue
			}
			if !m.resolved { // the target's position, looked up once
				m.resolved = true
				for in := range d.inputs.all() {
					if in.pair.feed == m.feed && in.delivery && in.seq == m.to {
						m.at, m.known = in.pos, true
						break
					}
				}
			}
			if m.known && sameSpace(m.at, pos) && m.at.Offset < pos.Offset {
				found = &m.ref
			}
		}
	}
	return found
}
