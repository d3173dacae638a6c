package report

import (
	"fmt"
	"strconv"
	"strings"
)

// The geometry of a timeline's SVG, in its viewBox units. The SVG is drawn
// with preserveAspectRatio="none" and a CSS height of svgHeight pixels, so
// it stretches to the page's width and keeps its height.
const (
	svgWidth  = 1000
	laneH     = 20
	svgHeight = laneH * 7
	minBar    = 2 // the narrowest bar drawn
)

// lane is one row of a timeline's chart.
type lane struct {
	Name  string // CSS class and label
	Title string
	Path  string // the bars, one SVG path
}

// markView is one vertical line of a timeline: a crash, a restart or a
// divergence.
type markView struct {
	Mark
	X string
}

// spanView is one run's part of the runs lane.
type spanView struct {
	Span
	X, W  string
	Title string
}

// chart is a timeline as the template draws it.
type chart struct {
	Lanes []lane
	Spans []spanView
	Marks []markView
	H     int
}

// num formats a viewBox coordinate: at most two decimals, no trailing
// zeros, so that the page is byte-stable and small.
func num(f float64) string {
	s := strconv.FormatFloat(f, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Chart lays the timeline out: one lane for the runs, then one per count
// of the buckets (inputs, outputs, commits drawn to scale; drops, the
// source's losses and failures drawn full height wherever there are any).
func (t Timeline) chart() chart {
	axis := float64(max(t.Inputs, 1)) // the inputs the axis spans
	x := func(at int64) float64 { return min(float64(at)/axis, 1) * svgWidth }
	// bar is where bucket i is drawn: its inputs' part of the axis, at
	// least minBar wide (a bucket of rows after the last input sits at
	// the end).
	bar := func(i int) (x0, w float64) {
		x0, x1 := x(int64(i)*t.Per), x(int64(i+1)*t.Per)
		x0 = min(x0, svgWidth-minBar)
		return x0, max(x1-x0, minBar)
	}
	c := chart{H: svgHeight}
	for _, s := range t.Spans {
		w := x(s.To) - x(s.From)
		state := "stopped cleanly (END)"
		if !s.Ended {
			state = "did not stop cleanly (no END)"
		}
		c.Spans = append(c.Spans, spanView{Span: s, X: num(x(s.From)), W: num(max(w, minBar)),
			Title: fmt.Sprintf("run %d: inputs %d to %d, %s", s.Run, s.From+1, s.To, state)})
	}
	type count struct {
		name, what string
		get        func(Bucket) int64
		scaled     bool
	}
	counts := []count{
		{"inputs", "inputs", func(b Bucket) int64 { return b.Inputs }, true},
		{"outputs", "outputs", func(b Bucket) int64 { return b.Outputs }, true},
		{"commits", "commits", func(b Bucket) int64 { return b.Commits }, true},
		{"drops", "items dropped", func(b Bucket) int64 { return b.Dropped }, false},
		{"losses", "losses of the source (LOST rows)", func(b Bucket) int64 { return b.Lost }, false},
		{"failures", "failed inputs", func(b Bucket) int64 { return b.Failed }, false},
	}
	for li, k := range counts {
		var top, total int64
		for _, b := range t.Buckets {
			top = max(top, k.get(b))
			total += k.get(b)
		}
		y0 := float64((li + 1) * laneH)
		var p strings.Builder
		for i, b := range t.Buckets {
			v := k.get(b)
			if v == 0 {
				continue
			}
			h := float64(laneH - 2)
			if k.scaled {
				h = max(h*float64(v)/float64(top), 1)
			}
			x0, w := bar(i)
			fmt.Fprintf(&p, "M%s %sh%sv%sh-%sz", num(x0), num(y0+laneH-1-h), num(w), num(h), num(w))
		}
		title := fmt.Sprintf("%s: %d", k.what, total)
		if top > 0 {
			title += fmt.Sprintf(", at most %d in a bar of %s", top, plural(t.Per, "input"))
		}
		c.Lanes = append(c.Lanes, lane{Name: k.name, Title: title, Path: p.String()})
	}
	for _, m := range t.Marks {
		c.Marks = append(c.Marks, markView{Mark: m, X: num(min(max(x(m.At), 1), svgWidth-1))})
	}
	return c
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
