// Package golden keeps golden recordings: a folder of cases, each an input
// and the recording of an app run over it, that a test replays to prove a
// change of code changed no output.
//
// A case is a sub-folder holding:
//
//   - case.json, its settings (Case): the app, the queue size, the overload
//     policy, whether the feed is journalled, app options, and the
//     restart_after and drop variants;
//   - input.txt, the input lines;
//   - recording.csv (or run1.csv and run2.csv for a restart case), the
//     recordings, committed with the code: a diff of them is a review of
//     what a change did to the outputs.
//
// Check (from a test) and Verify (from the CLI) replay every recording with
// the replayer and fail on any divergence, integrity problem or unexpected
// stop; a recorded failure (FAILED row) and recorded losses (DROPPED rows)
// are part of a case, not failures. Update re-records every case from its
// input through the real engine (engine/filesource, strategy once-earliest,
// and the recorder) with deterministic clocks, so the same input and code
// always give the same bytes; timers are due on a clock that jumps from one
// timer to the next, so a recording never waits for one (see Update). The usual test:
//
//	var update = flag.Bool("update", false, "re-record the golden cases")
//
//	func TestGolden(t *testing.T) {
//		if *update {
//			if err := golden.Update("testdata", apps...); err != nil {
//				t.Fatal(err)
//			}
//		}
//		golden.Check(t, "testdata", apps...)
//	}
//
// where apps are the core.App values the cases name (a case finds its app
// by name; its options go to the app's New at record and at replay). The
// package knows no app of its own: testdata/ holds the cases of the
// built-in apps (ledger and alerts), which its tests pass in.
//
// Update replaces a case's recordings together: it records into a
// temporary folder inside the case folder, renames that folder to ReadyDir
// once its recordings are complete and fsynced, then moves them into
// place. A killed Update leaves the old recordings, or ReadyDir, which
// Check and Verify report as a failed case ("an interrupted update") and
// the next Update finishes.
//
// The functions of this package are safe to call concurrently on different
// folders; an Update holds a lock (flock) on its folder, so a second Update
// of the same folder fails at once (ErrBusy).
package golden
