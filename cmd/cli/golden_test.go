package cli_test

import (
	"testing"

	"github.com/blackbox-audit/blackbox/golden"
)

// TestGoldenUpper is a golden test of your own app: testdata/golden holds
// one folder per case (case.json naming the app, input.txt, and the
// recording). It fails when a code change alters any output;
// go test -run TestGoldenUpper -update re-records the cases.
func TestGoldenUpper(t *testing.T) {
	dir := "testdata/golden"
	if *update {
		if err := golden.Update(dir, upperApp); err != nil {
			t.Fatal(err)
		}
	}
	golden.Check(t, dir, upperApp)
}
