package report

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/store"
)

// listMax is how many items of one answer the page lists; the counts are
// always whole.
const listMax = 10

// position is "epoch 1 offset 42" ("key t/0" between them for a keyed
// position), "-" for none; without the epoch ("offset 42") when it is
// common, the one epoch of every position of the answers (epochOf), which
// the page states once.
func position(p *incident.Position, common *int64) string {
	if p == nil {
		return "-"
	}
	epoch := fmt.Sprintf("epoch %d ", p.Epoch)
	if common != nil && *common == p.Epoch {
		epoch = ""
	}
	if p.Key != "" {
		return fmt.Sprintf("%skey %s offset %d", epoch, p.Key, p.Offset)
	}
	return fmt.Sprintf("%soffset %d", epoch, p.Offset)
}

// epochOf is the epoch of every position the answers show, when they
// share one (a file read from one epoch: its 19-digit epoch is then
// stated once); nil when they show none or several.
func epochOf(a incident.Answers) *int64 {
	var ps []*incident.Position
	for i := range a.Crashes {
		c := &a.Crashes[i]
		if c.LastProcessed != nil {
			ps = append(ps, c.LastProcessed.Position)
		}
		if c.MaybeInFlight != nil {
			ps = append(ps, c.MaybeInFlight.Position)
		}
		if c.Lag != nil {
			ps = append(ps, c.Lag.Committed)
		}
	}
	for i := range a.Redelivered {
		ps = append(ps, &a.Redelivered[i].Position)
	}
	for i := range a.Duplicates {
		ps = append(ps, &a.Duplicates[i].Position)
	}
	var common *int64
	for _, p := range ps {
		switch {
		case p == nil:
		case common == nil:
			common = &p.Epoch
		case *common != p.Epoch:
			return nil
		}
	}
	return common
}

// refs names the rows that prove an answer: "run 1 ledger #12 INLINE; ...".
func refs(rs []incident.Ref) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		who := r.Processor
		if who == "" {
			who = "-"
		}
		parts = append(parts, fmt.Sprintf("run %d %s #%d %s", r.Run, who, r.Index, r.Kind))
	}
	return strings.Join(parts, "; ")
}

// redeliveries counts the re-delivered inputs by outcome.
type redeliveries struct {
	Skipped, Again, Undetermined int
}

func outcomes(rs []incident.Redelivery) redeliveries {
	var c redeliveries
	for _, r := range rs {
		switch r.Outcome {
		case incident.OutcomeSkipped:
			c.Skipped++
		case incident.OutcomeAppliedAgain:
			c.Again++
		default:
			c.Undetermined++
		}
	}
	return c
}

// items sums the counts of losses.
func items(ls []incident.Loss) int64 {
	var n int64
	for _, l := range ls {
		n += l.Count
	}
	return n
}

// same counts the duplicates that repeat the earlier output's bytes.
func same(ds []incident.Duplicate) int {
	n := 0
	for _, d := range ds {
		if d.Same {
			n++
		}
	}
	return n
}

// headOf returns the first listMax elements of the slice s.
func headOf(s any) any {
	v := reflect.ValueOf(s)
	if v.Kind() == reflect.Slice && v.Len() > listMax {
		return v.Slice(0, listMax).Interface()
	}
	return s
}

// more is how many of n elements the page does not list.
func more(n int) int { return max(n-listMax, 0) }

// problemText is one integrity problem on one line.
func problemText(p store.Problem) string {
	var b strings.Builder
	b.WriteString(string(p.Kind))
	if p.Processor != "" {
		fmt.Fprintf(&b, " %s", p.Processor)
		if p.Index > 0 {
			fmt.Fprintf(&b, " #%d", p.Index)
		}
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", p.Line)
	}
	return b.String() + ": " + p.Detail
}
