package torture

// The oracle of the control dimension (control.go): the recording holds
// exactly the actions the window said it did, a release or a seek is a
// recorded loss with the operator's reason, explain lists the actions.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/engine"
)

// InvControl: every control action the window answered done (200 applied)
// is a CONTROL row of the run's recording, with the token's name, the
// reason and the positions the answer gave, in order, and no other row
// is (a refusal, a dry run write none; the window's own end of a pause is
// a resume by console); each answer is the one the request must get; a
// refused request changes nothing; a release or a seek is recorded as a
// loss (DROPPED rows with the operator's reason, within its range) and the
// run does not say lossless; explain lists the actions; a run killed by its
// operator exits 3, not settled.
const InvControl = 9

// ctlRow is a CONTROL row as docs/FORMAT.md writes it, read by the
// oracle's own reader.
type ctlRow struct {
	Feed   string    `json:"-"`
	Group  string    `json:"group"`
	Action string    `json:"action"`
	Who    string    `json:"who"`
	Reason string    `json:"reason"`
	Before int64     `json:"before"`
	After  int64     `json:"after"`
	Until  time.Time `json:"until,omitzero"`
}

// String is the row as the oracle compares it: the window's end of a pause
// without its positions (the group's position when the deadline passed:
// an item in flight at the pause may have completed since).
func (c ctlRow) String() string {
	pos := fmt.Sprintf(" %d->%d", c.Before, c.After)
	if c.Who == console.Operator {
		pos = ""
	}
	s := fmt.Sprintf("%s %s %s/%s%s %q", c.Who, c.Action, c.Feed, c.Group, pos, c.Reason)
	if !c.Until.IsZero() {
		s += " until " + c.Until.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// movedBack reports whether c is a recorded move back: a seek whose after
// (the target) is below its before (the group's position at the seek).
func (c ctlRow) movedBack() bool { return c.Action == string(console.ActionSeek) && c.After < c.Before }

// checkControl checks run r's control actions against its recording.
func (o *oracle) checkControl(r *outcome) {
	cr := r.ctl
	if cr == nil {
		return
	}
	name := fmt.Sprintf("run %d", r.index)
	for _, p := range cr.problems {
		o.fail(InvControl, "%s: %s", name, p)
	}
	if cr.addr == "" {
		return // it never listened: refused (checkExit judges that) or a problem above
	}
	if cr.killed && (r.exit != 3 || r.status == nil || r.status.Settled) {
		o.fail(InvControl, "%s was killed by its operator: exit %s, status %+v, want exit 3, not settled", name, r.exitText(), r.status)
	}
	rec := o.recs[r.store]
	if rec == nil {
		if len(cr.results) > 0 {
			o.fail(InvControl, "%s was sent control actions but left no recording to check them in", name)
		}
		return
	}
	got := o.checkControlRows(r, name, rec)
	o.checkOperatorLoss(r, name, rec)
	o.checkExplainControls(r, name, got)
}

// checkControlRows checks that rec's CONTROL rows are the ones r's answers
// say the window wrote, and returns them.
func (o *oracle) checkControlRows(r *outcome, name string, rec *recording) []ctlRow {
	cr := r.ctl
	var got []ctlRow
	for _, row := range rec.rows {
		if row.kind != "CONTROL" {
			continue
		}
		var c ctlRow
		if err := json.Unmarshal([]byte(row.detail), &c); err != nil {
			o.fail(InvControl, "%s: %s line %d: a CONTROL row whose detail is not its JSON: %v", name, r.store, row.line, err)
			continue
		}
		c.Feed = row.source
		got = append(got, c)
	}
	var at int64 // the group's position after the last action: positions only move forwards
	for _, c := range got {
		if c.Action == string(console.ActionKill) {
			continue
		}
		if c.Who == console.Operator && c.Before != c.After {
			o.fail(InvControl, "%s: the window's end of a pause %s moves the position", name, c)
		}
		if c.Before < at || (c.After < c.Before && !c.movedBack()) {
			o.fail(InvControl, "%s: the CONTROL row %s moves the position backwards (the group was done through %d)", name, c, at)
		}
		at = max(at, c.Before, c.After) // after a move back the position counts on from the feed's last seq
	}
	want := wantControl(cr)
	if !slices.Equal(rowStrings(got), rowStrings(want)) {
		o.fail(InvControl, "%s: the recording's CONTROL rows are\n    %s\n  the window's answers say\n    %s\n  (%s)", name,
			strings.Join(rowStrings(got), "\n    "), strings.Join(rowStrings(want), "\n    "), resultsText(cr))
	}
	return got
}

// wantControl is the CONTROL rows the answers say the run wrote: each
// action applied, and after a pause with a deadline the window's resume.
func wantControl(cr *ctlRun) []ctlRow {
	var want []ctlRow
	ended := 0
	for _, x := range cr.results {
		if !x.applied() {
			continue
		}
		c := ctlRow{Feed: x.req.Feed, Group: x.req.Group, Action: string(x.action), Who: ctlWho, Reason: x.req.Reason,
			Before: x.ans.Before, After: x.ans.After}
		if x.action == console.ActionKill {
			c.Feed, c.Group, c.Before, c.After = "", "", 0, 0
		}
		if x.req.Until != nil {
			c.Until = *x.req.Until
		}
		want = append(want, c)
		if x.kind == ctlPauseUntil && ended < len(cr.ended) {
			// The window ends it: a resume by console.
			want = append(want, ctlRow{Feed: c.Feed, Group: c.Group, Action: string(console.ActionResume), Who: console.Operator,
				Reason: "the pause ended (its deadline passed)"})
			ended++
		}
	}
	return want
}

func rowStrings(rows []ctlRow) []string {
	out := make([]string, len(rows))
	for i, c := range rows {
		out[i] = c.String()
	}
	return out
}

func resultsText(cr *ctlRun) string {
	var out []string
	for _, x := range cr.results {
		out = append(out, x.String())
	}
	return strings.Join(out, "; ")
}

// checkOperatorLoss: an applied release or seek that took items is a loss
// of the run: the DROPPED rows carrying its reason (after the engine's
// ReleasedReason or SkippedReason) cover sequences within (before,
// after], a seek's exactly its plan's unprocessed count, and the run does
// not say lossless; no DROPPED row carries an operator's reason no applied
// action gave.
func (o *oracle) checkOperatorLoss(r *outcome, name string, rec *recording) {
	took := map[string]ctlResult{} // the DROPPED detail an applied action's items carry
	lossy := false
	for _, x := range r.ctl.results {
		if !x.applied() {
			continue
		}
		switch x.action {
		case console.ActionRelease:
			took[engine.ReleasedReason+x.req.Reason] = x
			lossy = true // a queue holding nothing is refused (422)
		case console.ActionSeek:
			took[engine.SkippedReason+x.req.Reason] = x
			if p := x.ans.Plan; p != nil && !p.Redelivery && (p.Unprocessed > 0 || p.Processed > 0) { // a move back loses nothing
				lossy = true
			}
		}
	}
	seqs := map[string]map[int64]bool{} // reason -> the seqs its DROPPED rows cover (each worker stream is told)
	for _, row := range rec.rows {
		if row.kind != "DROPPED" {
			continue
		}
		var d struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(row.detail), &d); err != nil {
			o.fail(InvControl, "%s: %s line %d: a DROPPED row whose detail is not its JSON: %v", name, r.store, row.line, err)
			continue
		}
		if !strings.HasPrefix(d.Reason, engine.ReleasedReason) && !strings.HasPrefix(d.Reason, engine.SkippedReason) {
			continue
		}
		x, ok := took[d.Reason]
		if !ok {
			o.fail(InvControl, "%s: %s line %d: a DROPPED row %q that no applied release or seek took", name, r.store, row.line, d.Reason)
			continue
		}
		last := row.seq + max(row.n, 1) - 1
		if row.seq <= x.ans.Before || last > x.ans.After {
			o.fail(InvControl, "%s: %s line %d: DROPPED seqs %d-%d of %s, outside its range (%d, %d]", name, r.store, row.line,
				row.seq, last, x, x.ans.Before, x.ans.After)
		}
		if seqs[d.Reason] == nil {
			seqs[d.Reason] = map[int64]bool{}
		}
		for q := row.seq; q <= last; q++ {
			seqs[d.Reason][q] = true
		}
	}
	for detail, x := range took {
		if x.action == console.ActionSeek && x.ans.Plan != nil && int64(len(seqs[detail])) != x.ans.Plan.Unprocessed {
			o.fail(InvControl, "%s: %s skipped %d unprocessed items by its plan; DROPPED rows with its reason cover %d seqs",
				name, x, x.ans.Plan.Unprocessed, len(seqs[detail]))
		}
	}
	if lossy && r.status != nil && r.status.Lossless {
		o.fail(InvControl, "%s says lossless after its operator released or skipped items (%s)", name, resultsText(r.ctl))
	}
}

// checkExplainControls: explain lists the run's operator actions, the
// CONTROL rows in order (who, what, why).
func (o *oracle) checkExplainControls(r *outcome, name string, rows []ctlRow) {
	b, code := o.blackbox("explain", r.store, "--json")
	var doc struct {
		Runs []struct {
			Controls []struct {
				Action string `json:"action"`
				Who    string `json:"who"`
				Reason string `json:"reason"`
			} `json:"controls"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Runs) != 1 {
		o.fail(InvControl, "explain %s --json: exit %d, no JSON of one run (%v): %s", r.store, code, err, firstLine(string(b)))
		return
	}
	var got, want []string
	for _, c := range doc.Runs[0].Controls {
		got = append(got, c.Who+" "+c.Action+" "+c.Reason)
	}
	for _, c := range rows {
		want = append(want, c.Who+" "+c.Action+" "+c.Reason)
	}
	if !slices.Equal(got, want) {
		o.fail(InvControl, "%s: explain lists the operator actions %q, the recording holds %q", name, got, want)
	}
}
