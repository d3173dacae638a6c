package report

import (
	"bufio"
	_ "embed"
	"html/template"
	"io"

	"github.com/blackbox-audit/blackbox/incident"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.css
	pageCSS string
)

// page is the template of the report: one self-contained HTML file, its
// CSS inline, its charts inline SVG, no script and no external asset.
var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"css":        func() template.CSS { return template.CSS(pageCSS) },
	"chart":      func(t Timeline) chart { return t.chart() },
	"even":       func(n int) bool { return n%2 == 0 },
	"position":   position,
	"epochOf":    epochOf,
	"refs":       refs,
	"outcomes":   outcomes,
	"items":      items,
	"same":       same,
	"more":       more,
	"head":       func(s any) any { return headOf(s) },
	"instant":    instant,
	"problem":    problemText,
	"restartLag": func() string { return incident.LagFromRestart },
}).Parse(pageHTML))

// WriteHTML writes the report as one self-contained HTML page. The page
// holds no time but the recordings' own instants and no map order: the
// same report always gives the same bytes.
func (r *Report) WriteHTML(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if err := page.Execute(bw, r); err != nil {
		return err
	}
	return bw.Flush()
}
