package report_test

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/report"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// active is what a page must never hold, whatever the recording holds: an
// element that runs or fetches something, an event handler, a URL in CSS.
var active = regexp.MustCompile(`(?i)<script|<img|<iframe|<object|<embed|<link|<[a-z][^>]*\s(src|href|srcset|action|on[a-z]+)=|url\(|@import`)

// FuzzReport builds the page of a CSV recording of any bytes, with
// explain's answers: it never fails but on bad usage, and the page holds
// nothing active.
func FuzzReport(f *testing.F) {
	for _, p := range []string{"../golden/testdata/ledger-restart/run1.csv", "../golden/testdata/ledger-drop/recording.csv",
		"../golden/testdata/alerts-journal/recording.csv", "../golden/testdata/ledger-fail/recording.csv"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := csvstore.NewReader(bytes.NewReader(data), int64(len(data)), "fuzz.csv")
		if err != nil {
			return // not a recording: refused at open
		}
		fs, err := incident.Explain([]incident.Recording{{File: "fuzz.csv", Reader: r}}, incident.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := report.Build(context.Background(), []report.Run{{Name: "fuzz.csv", Reader: r}}, report.Options{Findings: fs})
		if err != nil {
			t.Fatal(err)
		}
		var page bytes.Buffer
		if err := rep.WriteHTML(&page); err != nil {
			t.Fatal(err)
		}
		if loc := active.FindIndex(page.Bytes()); loc != nil {
			t.Fatalf("the page holds %q", page.Bytes()[loc[0]:loc[1]])
		}
	})
}
