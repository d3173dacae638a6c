package incident_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// FuzzExplain: Explain reads any bytes a CSV recording may hold without a
// panic; its Findings encode as JSON and as text; a recording is complete
// exactly when it has no problem (as verify says); and the recording
// given twice, as a crashed run followed by itself, is refused (the same
// rows: store.ErrRuns).
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
		twice := []incident.Recording{open(), open()}
		if _, err := incident.Explain(twice, incident.Options{}); !errors.Is(err, store.ErrRuns) {
			t.Fatalf("a recording given twice: %v, want store.ErrRuns", err)
		}
		recs := []incident.Recording{open()}
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
		if problems := len(fd.Runs[0].Problems); fd.Complete != (problems == 0) {
			t.Fatalf("complete %v with %d problems", fd.Complete, problems)
		}
		for _, r := range append(recs, twice...) {
			r.Reader.Close()
		}
	})
}
