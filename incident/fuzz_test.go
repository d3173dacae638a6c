package incident_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// FuzzExplain: Explain reads any bytes a CSV recording may hold, as one run
// or as a crashed run followed by itself, without a panic; its Findings
// encode as JSON and as text; and a recording with a problem it cannot
// read is never complete with nothing lost.
func FuzzExplain(f *testing.F) {
	for _, p := range []string{"../store/csvstore/testdata/example.csv", "../store/csvstore/testdata/v2.csv", "../store/csvstore/testdata/v1.csv",
		"../cmd/cli/testdata/explain.txt"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		open := func() incident.Recording {
			r, err := csvstore.NewReader(bytes.NewReader(b), int64(len(b)), "fuzz.csv")
			if err != nil {
				t.Skip() // not a recording: refused at open
			}
			return incident.Recording{File: "fuzz.csv", Reader: r}
		}
		for _, recs := range [][]incident.Recording{{open()}, {open(), open()}} {
			fd, err := incident.Explain(recs, incident.Options{Pointer: &incident.Position{Offset: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := json.Marshal(fd); err != nil {
				t.Fatal(err)
			}
			if err := fd.WriteText(io.Discard); err != nil {
				t.Fatal(err)
			}
			for _, r := range fd.Runs {
				for _, p := range r.Problems {
					if (p.Kind == "malformed" || p.Kind == "unreadable") && fd.Complete {
						t.Fatalf("complete with a %s problem", p.Kind)
					}
				}
			}
			for _, r := range recs {
				r.Reader.Close()
			}
		}
	})
}
