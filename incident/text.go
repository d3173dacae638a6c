package incident

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/store"
)

// textLimit is how many entries of one list (re-deliveries, duplicates,
// losses, items in flight) WriteText shows; it says how many more there
// are. The JSON holds them all.
const textLimit = 20

// WriteText writes the Findings for a person: the runs, then per processor
// and feed the six answers with the rows that prove them (a row is written
// rRUN STREAM:INDEX, or rRUN KIND:INDEX for a META, JOURNAL, COMMIT, STATE
// or CONTROL row), each run's loss state changes (STATE rows) and operator
// actions (CONTROL rows),
// the recordings' own losses, what is on disk, and the verdict. A list
// longer than 20 entries (textLimit) shows its first 20 and says how many
// more there are.
func (f *Findings) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	for _, r := range f.Runs {
		state := "unknown (not read to its end)"
		switch {
		case r.Ended && r.Killed != "":
			state = fmt.Sprintf("killed (END: %q)", r.Killed)
		case r.Ended:
			state = "ended (END)"
		case r.Crashed:
			state = "crashed"
		}
		fmt.Fprintf(b, "run %d  %s  %s  %s  %d rows: %s\n", r.Run, r.File, r.Format, state, r.Rows, counts(r.Counts))
		if len(r.States) > 0 {
			fmt.Fprintf(b, "  loss state changes: %d\n", len(r.States))
			for i := range limit(r.States, b, "    ") {
				fmt.Fprintf(b, "    %s\n", stateChange(&r.States[i]))
			}
		}
		if len(r.Controls) > 0 {
			fmt.Fprintf(b, "  operator actions: %d\n", len(r.Controls))
			for i := range limit(r.Controls, b, "    ") {
				fmt.Fprintf(b, "    %s\n", controlAction(&r.Controls[i]))
			}
		}
	}
	for i := range f.Answers {
		a := &f.Answers[i]
		fmt.Fprintf(b, "\n%s <- feed %s\n", a.Processor, a.Feed)
		for j := range a.Crashes {
			writeCrash(b, &a.Crashes[j])
		}
		writeRedelivered(b, a.Redelivered)
		writeNotHandedAgain(b, a.NotHandedAgain)
		if len(a.Lost) == 0 {
			fmt.Fprintf(b, "  5 lost: nothing\n")
		} else {
			fmt.Fprintf(b, "  5 lost: %d\n", len(a.Lost))
			for i := range limit(a.Lost, b, "    ") {
				fmt.Fprintf(b, "    %s\n", loss(&a.Lost[i]))
			}
		}
		writeDuplicates(b, a.Duplicates, a.NotAgain)
	}
	if len(f.Losses) > 0 {
		fmt.Fprintf(b, "\nlost in the recordings: %d\n", len(f.Losses))
		for i := range limit(f.Losses, b, "  ") {
			fmt.Fprintf(b, "  %s\n", loss(&f.Losses[i]))
		}
	}
	if d := f.OnDisk; d != nil {
		fmt.Fprintf(b, "\non disk (feed %s)\n", d.Feed)
		if d.Pointer != nil {
			fmt.Fprintf(b, "  pointer: %s = %s\n", position(*d.Pointer), named(d.PointerInput))
		}
		if d.State != nil {
			fmt.Fprintf(b, "  state: %d applied through %s = %s\n", d.State.Applied, position(d.State.Position), named(d.StateInput))
		}
	}
	verdict := "nothing lost"
	if f.Lost {
		verdict = "something was lost"
	}
	if !f.Complete {
		verdict += "; not complete: a recording has a problem no restart explains (a row that cannot be read, a gap, a recorded failure, an unfinished last run ...)"
	}
	fmt.Fprintf(b, "\nverdict: %s\n", verdict)
	return b.Flush()
}

// writeCrash writes the answers 1, 2 and 3 for crash c: the last input
// processed, the inputs in flight, the commit lag.
func writeCrash(b *bufio.Writer, c *Crash) {
	switch {
	case c.Stopped && c.Killed != "":
		fmt.Fprintf(b, "  kill of run %d (%q), items left unprocessed (never committed: the next run delivers them)\n", c.Run, c.Killed)
	case c.Stopped:
		fmt.Fprintf(b, "  clean stop of run %d, items left unprocessed (its drain ran out of time)\n", c.Run)
	default:
		fmt.Fprintf(b, "  crash of run %d\n", c.Run)
	}
	if c.LastProcessed == nil {
		fmt.Fprintf(b, "    1 last processed: none\n")
	} else {
		fmt.Fprintf(b, "    1 last processed: %s\n", input(c.LastProcessed))
	}
	switch {
	case !c.InFlightKnown && len(c.InFlight) == 0:
		fmt.Fprintf(b, "    2 in flight: not known (the feed is not journalled: items read and not recorded leave no row)\n")
	case len(c.InFlight) == 0:
		fmt.Fprintf(b, "    2 in flight: none\n")
	default:
		fmt.Fprintf(b, "    2 in flight: %d\n", len(c.InFlight))
		for i := range limit(c.InFlight, b, "      ") {
			fmt.Fprintf(b, "      %s\n", input(&c.InFlight[i]))
		}
	}
	if c.MaybeInFlight != nil {
		fmt.Fprintf(b, "    2 maybe in flight (one batch: %d inputs of a later run past it, %d outputs; the first): %s\n",
			c.MaybeInFlightInputs, c.MaybeInFlightOutputs, input(c.MaybeInFlight))
	}
	switch l := c.Lag; {
	case l == nil:
		fmt.Fprintf(b, "    3 commit lag: not known (nothing processed, or a recording before COMMIT rows and no restart)\n")
	case len(l.Keys) > 0:
		fmt.Fprintf(b, "    3 commit lag: %d items, %d offsets, over %d keys:\n", l.Items, l.Bytes, len(l.Keys))
		for i := range l.Keys {
			fmt.Fprintf(b, "      %s: %s\n", l.Keys[i].Key, lagText(&l.Keys[i].Lag))
		}
	default:
		fmt.Fprintf(b, "    3 commit lag: %s\n", lagText(l))
	}
}

// writeNotHandedAgain writes, when a run did not hand the processor items
// its group completed in an earlier run, how many and each row.
func writeNotHandedAgain(b *bufio.Writer, all []NotHandedAgain) {
	if len(all) == 0 {
		return
	}
	var n int64
	for _, h := range all {
		n += h.Completed.Items
	}
	fmt.Fprintf(b, "  %d items not handed again: completed in an earlier run\n", n)
	for i := range limit(all, b, "    ") {
		h := &all[i]
		fmt.Fprintf(b, "    run %d: %s %s\n", h.Run, h.Completed, refs(h.Rows))
	}
}

// writeRedelivered writes the answer 4: the inputs delivered again, each
// with its outcome, and how many had each outcome.
func writeRedelivered(b *bufio.Writer, rds []Redelivery) {
	if len(rds) == 0 {
		fmt.Fprintf(b, "  4 redelivered: none\n")
		return
	}
	n := map[string]int{}
	for _, r := range rds {
		n[r.Outcome]++
	}
	fmt.Fprintf(b, "  4 redelivered: %d (%d skipped, %d applied again, %d undetermined)\n", len(rds),
		n[OutcomeSkipped], n[OutcomeAppliedAgain], n[OutcomeUndetermined])
	for i := range limit(rds, b, "    ") {
		r := &rds[i]
		why := ""
		if r.MovedBack != nil {
			why = " (moved back by the operator: " + strings.Trim(refs([]Ref{*r.MovedBack}), "()") + ")"
		}
		fmt.Fprintf(b, "    %s: run %d seq %d, again run %d seq %d: %s%s %s\n", position(r.Position), r.Earlier.Run, r.Earlier.Seq,
			r.Again.Run, r.Again.Seq, r.Outcome, why, refs(append(slices.Clone(r.Earlier.Rows), r.Again.Rows...)))
	}
}

// writeDuplicates writes the answer 6: the outputs emitted again, each
// with whether it was the same output.
func writeDuplicates(b *bufio.Writer, all []Duplicate, notAgain int64) {
	also := ""
	if notAgain > 0 {
		also = fmt.Sprintf(" (%d outputs emitted again, not delivered again: the runs' outbox delivered each input's once)", notAgain)
	}
	dups := slices.DeleteFunc(slices.Clone(all), func(d Duplicate) bool { return d.NotDelivered })
	if len(dups) == 0 {
		fmt.Fprintf(b, "  6 emitted twice: none%s\n", also)
		return
	}
	fmt.Fprintf(b, "  6 emitted twice: %d outputs%s\n", len(dups), also)
	for i := range limit(dups, b, "    ") {
		d := &dups[i]
		same := "the same output"
		if !d.Same {
			same = "a different output"
		}
		rs := []Ref{d.Again}
		if d.Earlier != nil {
			rs = []Ref{*d.Earlier, d.Again}
		}
		fmt.Fprintf(b, "    %s: %s #%d %s: %s %s\n", position(d.Position), d.Sink, d.K, same, short(d.Payload), refs(rs))
	}
}

// limit returns the first TextLimit entries of s, and writes how many it
// leaves out.
func limit[T any](s []T, w io.Writer, indent string) []T {
	if len(s) <= textLimit {
		return s
	}
	defer fmt.Fprintf(w, "%s... and %d more (--json lists them all)\n", indent, len(s)-textLimit)
	return s[:textLimit]
}

func counts(c map[string]int64) string {
	var parts []string
	seen := map[string]bool{}
	for _, k := range store.Kinds {
		if n := c[string(k)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
		seen[string(k)] = true
	}
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if !seen[k] {
			parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
		}
	}
	return strings.Join(parts, ", ")
}

func position(p Position) string {
	if p.Key != "" {
		return fmt.Sprintf("epoch %d key %s offset %d", p.Epoch, p.Key, p.Offset)
	}
	return fmt.Sprintf("epoch %d offset %d", p.Epoch, p.Offset)
}

func input(in *Input) string {
	s := fmt.Sprintf("run %d seq %d", in.Run, in.Seq)
	if in.Position != nil {
		s += " at " + position(*in.Position)
	}
	if !in.Time.IsZero() {
		s += " " + in.Time.UTC().Format(time.RFC3339Nano)
	}
	return s + " " + short(in.Line) + " " + refs(in.Rows)
}

func named(in *Input) string {
	if in == nil {
		return "no input of any run"
	}
	return input(in)
}

// controlAction is a CONTROL row for a person: `2030-01-01T00:00:00Z
// alice: pause feed "in" group "g" (position 4 -> 4) ...: reason rRUN
// CONTROL:INDEX`.
func controlAction(c *ControlAction) string {
	ct := store.Control{Feed: c.Feed, Group: c.Group, Action: c.Action, Who: c.Who, Reason: c.Reason, At: c.At,
		Before: c.Before, After: c.After, Until: c.Until}
	return ct.String() + " " + refs([]Ref{c.Row})
}

// stateChange is a STATE row for a person: `feed "in" group "g": UP ->
// LATCHED at ...: reason rRUN STATE:INDEX`.
func stateChange(c *StateChange) string {
	st := store.State{Feed: c.Feed, Group: c.Group, From: c.From, To: c.To, Reason: c.Reason, At: c.At, Observed: c.Observed}
	return st.String() + " " + refs([]Ref{c.Row})
}

func loss(l *Loss) string {
	s := l.Kind
	if l.Run > 0 {
		s += fmt.Sprintf(" in run %d", l.Run)
	}
	if l.Count > 0 {
		s += fmt.Sprintf(": %d items", l.Count)
	}
	return s + ": " + l.Detail + " " + refs(l.Rows)
}

func short(s string) string {
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return fmt.Sprintf("%q", s)
}

func refs(rs []Ref) string {
	if len(rs) == 0 {
		return ""
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		who := r.Processor
		if who == "" {
			who = string(r.Kind)
		}
		parts[i] = fmt.Sprintf("r%d %s:%d", r.Run, who, r.Index)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// lagText is one commit lag's answer.
func lagText(l *Lag) string {
	if l.Committed == nil {
		return fmt.Sprintf("%d items, nothing committed in the run %s", l.Items, refs(l.Rows))
	}
	return fmt.Sprintf("%d items, %d bytes: committed %s (seq %d), from the %s %s",
		l.Items, l.Bytes, position(*l.Committed), l.CommitSeq, l.From, refs(l.Rows))
}
