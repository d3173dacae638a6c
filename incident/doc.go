// Package incident answers what a crash did, from the recordings of the
// crashed run and its restarts alone (and, when given, the pointer and state
// files on disk now). It is the library of `blackbox explain`.
//
// Explain reads the recordings in the order they ran and answers, per feed
// and processor, with the rows that prove each answer (Findings):
//
//  1. the last input fully processed before each crash (its position, line
//     and time): the input of the highest seq whose rows were all written;
//  2. what was in flight when it died: items the feed journalled and handed
//     to the group whose input rows were never written (known for a
//     journalled feed only);
//  3. how far the commit was behind processing at the crash, in items and
//     bytes: the inputs processed past the run's last COMMIT row;
//  4. what a restart delivered again (an input at the position of an
//     earlier run's input), and whether the app skipped it
//     (core.Delivery.AlreadyApplied: no output where the earlier one had
//     some) or applied it again (outputs);
//  5. what was lost: DROPPED and FAILED rows, the torn and unfinished tail
//     of the last run, index gaps and every other integrity problem, and
//     inputs in no run (seqs a source committed, or a run that ended
//     published, with no row; a pointer or state past every recorded input);
//  6. the outputs emitted twice for one input across the runs.
//
// Findings.Lost says whether anything was lost; Findings.Complete is false
// when a recording or one of its rows could not be read, so that nothing is
// said to be safe about what could not be seen.
//
// Explain reads each recording once (its Scan, which checks it in the same
// pass), keeping about a dozen bytes per input, then once more
// the recordings holding the rows it reports. See docs/EXPLAIN.md for how
// each answer is found, and what it costs.
package incident
