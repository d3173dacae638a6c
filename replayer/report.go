package replayer

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/blackbox-audit/blackbox/store"
)

// WriteText writes the report for a person to read: the verdict, then per
// processor its counts, first divergence, losses and stop, then the
// integrity problems. The text holds no time and no map order: the same
// report always gives the same bytes.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	verdict := []string{choose(r.Identical, "identical", "DIVERGED"), choose(r.Complete, "complete", "INCOMPLETE"),
		choose(r.Lossless, "lossless", "LOSSY")}
	fmt.Fprintf(bw, "replay: %s\n", strings.Join(verdict, ", "))
	for i := range r.Processors {
		writeProcessor(bw, &r.Processors[i])
	}
	for _, h := range r.Released {
		fmt.Fprintf(bw, "the operator's %s of group %q on feed %q took %s that still held the commit (their rows stand; what applied them may not have been saved): %s\n",
			h.Action, h.Group, h.Feed, plural(h.Processed, "processed item"), h.Reason)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(bw, "integrity problems: %d\n", len(r.Problems))
		for i := range r.Problems {
			fmt.Fprintf(bw, "  %s\n", problemText(&r.Problems[i]))
		}
	}
	return bw.Flush()
}

func writeProcessor(w io.Writer, p *ProcessorReport) {
	state := "identical"
	if p.Divergences > 0 {
		state = plural(p.Divergences, "divergence")
	}
	fmt.Fprintf(w, "processor %q (app %q): %s replayed, %s compared, %s\n", p.Processor, p.App,
		plural(p.Inputs, "input"), plural(p.Outputs, "output"), state)
	for _, o := range p.Overridden {
		if o.Unrecorded {
			fmt.Fprintf(w, "  option %s=%s given: the recording holds none\n", o.Key, o.Given)
			continue
		}
		fmt.Fprintf(w, "  option %s=%s given: overrides the recorded %s=%s\n", o.Key, o.Given, o.Key, o.Recorded)
	}
	if d := p.First; d != nil {
		writeDivergence(w, d)
	}
	for _, l := range p.Losses {
		if l.Source != nil {
			fmt.Fprintf(w, "  loss at index %d: %s\n", l.Index, l.Source)
			continue
		}
		approx := ""
		if l.Approximate {
			approx = " (approximate)"
		}
		fmt.Fprintf(w, "  loss at index %d: feed %q lost %s, seq %d-%d%s: %s\n", l.Index, l.Feed, plural(l.Count, "item"),
			l.First, l.Last, approx, l.Reason)
	}
	if p.Stop != "" {
		fmt.Fprintf(w, "  stopped (%s): %s\n", p.StopKind, p.Stop)
	}
}

func writeDivergence(w io.Writer, d *Divergence) {
	what := fmt.Sprintf("feed %q seq %d", d.Source, d.Seq)
	if d.Source == "" {
		what = "timer " + fmt.Sprint(d.Seq)
	}
	fmt.Fprintf(w, "  first divergence at index %d (%s): %s\n", d.Index, d.Kind, what)
	if del := d.Delivery; del != nil {
		fmt.Fprintf(w, "    delivery: feed %q seq %d epoch %d position %s attempt %d\n", del.Feed, del.Sequence, del.Epoch,
			del.Position, del.Attempt)
	}
	fmt.Fprintf(w, "    input: %s\n", d.Input)
	writeOutputs(w, d.Want, d.Got, d.Diff)
}

// writeOutputs writes the outputs wanted and got, and their diff if any.
func writeOutputs(w io.Writer, want, got []string, diff string) {
	writeList(w, "want", want)
	writeList(w, "got", got)
	if diff != "" {
		fmt.Fprintf(w, "    diff:\n")
		for line := range strings.SplitSeq(diff, "\n") {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
}

func writeList(w io.Writer, name string, outs []string) {
	if len(outs) == 0 {
		fmt.Fprintf(w, "    %s: no output\n", name)
		return
	}
	for i, o := range outs {
		label := name + ":"
		if i > 0 {
			label = strings.Repeat(" ", len(label))
		}
		fmt.Fprintf(w, "    %-5s %s\n", label, o)
	}
}

// problemText is a Problem without its file name (a report names one
// recording; the JSON has no file either).
func problemText(p *store.Problem) string {
	q := *p
	q.File, q.Line = "", 0
	s := strings.TrimPrefix(q.Error(), ": ")
	if p.Line > 0 {
		s = fmt.Sprintf("row %d: %s", p.Line, s)
	}
	return s
}

func choose(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// WriteText writes the diff for a person to read: the verdict and why,
// then per processor its counts and listed inputs, then the recordings'
// integrity problems. The text holds no time and no map order.
func (d *DiffReport) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	verdict := strings.ToUpper(string(d.Verdict))
	if d.Verdict == DiffSame {
		verdict = string(d.Verdict)
	}
	fmt.Fprintf(bw, "diff: %s\n", verdict)
	for _, why := range d.Why {
		fmt.Fprintf(bw, "  why: %s\n", why)
	}
	for i := range d.Processors {
		p := &d.Processors[i]
		c := p.Counts
		different := fmt.Sprintf("%d different", c.Different)
		if c.Changed > 0 {
			different += fmt.Sprintf(" (%s)", plural(c.Changed, "changed input"))
		}
		fmt.Fprintf(bw, "processor %s: %s in A, %s in B, %d common: %d only in A, %d only in B, %s, %d processed twice, %d with duplicate outputs",
			p.title(), plural(p.InputsA, "input"), plural(p.InputsB, "input"), p.Common, c.OnlyA, c.OnlyB, different, c.Twice, c.DuplicateOutputs)
		if c.Repeated > 0 {
			fmt.Fprintf(bw, ", %d processed more often than its runs explain", c.Repeated)
		}
		fmt.Fprintln(bw)
		for _, e := range p.EpochChanges {
			fmt.Fprintf(bw, "  epoch change: %s\n", e)
		}
		for _, n := range p.Notes {
			fmt.Fprintf(bw, "  note: %s\n", n)
		}
		if p.OptionsA != nil && p.OptionsB != nil && !maps.Equal(p.OptionsA, p.OptionsB) {
			fmt.Fprintf(bw, "  note: the app was built with other options: A %s, B %s\n", OptionsText(p.OptionsA), OptionsText(p.OptionsB))
		}
		writeRefs(bw, "only in A", p.OnlyA, c.OnlyA)
		writeRefs(bw, "only in B", p.OnlyB, c.OnlyB)
		for _, x := range p.Different {
			fmt.Fprintf(bw, "  %s: %s\n", choose(x.Changed, "changed", "different"), refText(&x.InputRef))
			if x.B != nil {
				fmt.Fprintf(bw, "    in B: %s\n", refText(x.B))
			}
			writeOutputs(bw, x.Want, x.Got, x.Diff)
		}
		if n := c.Different - int64(len(p.Different)); n > 0 {
			fmt.Fprintf(bw, "  different: %d more not listed\n", n)
		}
		writeRefs(bw, "processed twice, once per run", p.Twice, c.Twice)
		writeRefs(bw, "re-delivery emitted its outputs again", p.DuplicateOutputs, c.DuplicateOutputs)
		writeRefs(bw, "processed more often than its runs explain", p.Repeated, c.Repeated)
		writeRefs(bw, "outputs cut, not compared", p.Cut, c.Cut)
		for _, l := range p.Lost {
			fmt.Fprintf(bw, "  lost: %s\n", l)
		}
		if n := c.Lost - int64(len(p.Lost)); n > 0 {
			fmt.Fprintf(bw, "  lost: %d more not listed\n", n)
		}
	}
	if len(d.Problems) > 0 {
		fmt.Fprintf(bw, "integrity problems: %d", len(d.Problems))
		if d.Expected > 0 {
			fmt.Fprintf(bw, " (%d expected: the unfinished streams of a run stitched with its restart)", d.Expected)
		}
		fmt.Fprintln(bw)
		for i := range d.Problems {
			fmt.Fprintf(bw, "  %s\n", d.Problems[i].Error())
		}
	}
	return bw.Flush()
}

func writeRefs(w io.Writer, what string, refs []InputRef, count int64) {
	for i := range refs {
		fmt.Fprintf(w, "  %s: %s\n", what, refText(&refs[i]))
	}
	if n := count - int64(len(refs)); n > 0 {
		fmt.Fprintf(w, "  %s: %d more not listed\n", what, n)
	}
}

func refText(r *InputRef) string {
	var s string
	switch {
	case r.Key == "timer" && r.Feed == "" && r.Stream != "":
		s = fmt.Sprintf("timer #%d of %s (number %d in run %d)", r.Offset, r.Stream, r.Seq, r.Run)
	case r.Key == "timer" && r.Feed == "":
		s = fmt.Sprintf("timer #%d (number %d in run %d)", r.Offset, r.Seq, r.Run)
	case r.Offset != 0 || r.Key != "":
		pos := fmt.Sprint(r.Offset)
		if r.Key != "" {
			pos = fmt.Sprintf("%s@%d", r.Key, r.Offset)
		}
		s = fmt.Sprintf("feed %q position %s (run %d%s seq %d epoch %d)", r.Feed, pos, r.Run, streamText(r.Stream), r.Seq, r.Epoch)
	default:
		s = fmt.Sprintf("feed %q seq %d (run %d%s)", r.Feed, r.Seq, r.Run, streamText(r.Stream))
	}
	if r.Side != "" {
		s = "side " + r.Side + " " + s
	}
	if r.Input != "" {
		s += ": " + r.Input
	}
	return s
}

// streamText names a worker's stream in refText: " ledger#w3", or "".
func streamText(stream string) string {
	if stream == "" {
		return ""
	}
	return " " + stream
}

// OptionsText is an app's options as replay, diff and golden print them:
// KEY=VALUE, sorted by key, space-separated; "none" for none.
func OptionsText(o map[string]string) string {
	if len(o) == 0 {
		return "none"
	}
	kv := make([]string, 0, len(o))
	for _, k := range slices.Sorted(maps.Keys(o)) {
		kv = append(kv, k+"="+o[k])
	}
	return strings.Join(kv, " ")
}
