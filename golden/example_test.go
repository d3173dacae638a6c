package golden_test

import (
	"fmt"

	"github.com/blackbox-audit/blackbox/golden"
)

// Verify every golden case of a folder, as `blackbox golden check` does.
func ExampleVerify() {
	ok, report, err := golden.Verify("testdata", builtins()...)
	if err != nil {
		panic(err)
	}
	fmt.Print(report)
	fmt.Println("ok:", ok)
	// Output:
	// ok   alerts-journal/recording.csv
	// ok   alerts-threshold/recording.csv
	// ok   ledger-drop/recording.csv: ledger lost 5 items (recorded)
	// ok   ledger-fail/recording.csv: ledger stops at its recorded failure (index 8)
	// ok   ledger-plain/recording.csv
	// ok   ledger-restart/run1.csv
	// ok   ledger-restart/run2.csv
	// ok   ledger-tick/recording.csv
	// ok   ledger-transfer/recording.csv
	// ok: true
}
