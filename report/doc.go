// Package report renders what a crash did as one self-contained HTML page:
// the page a person opens after an incident. It is the library of
// `blackbox report`.
//
// Build reads the recordings of a crashed run and its restarts, in the order
// they ran (as `blackbox diff` and `blackbox explain` stitch them), once
// each, streaming: memory does not grow with their length. It returns a
// Report; WriteHTML writes it. The page shows, in order:
//
//   - the six answers of incident.Findings (Options.Findings: what
//     `blackbox explain` answers), per feed and processor: the last input
//     processed before each crash, what was in flight, the commit lag, what
//     a restart delivered again, what was lost, the outputs emitted twice;
//     and the losses of the recordings themselves;
//   - per processor stream (a worker's stream NAME#wK is a stream of its
//     own), a timeline of the runs side by side: the stream's inputs,
//     counted one after the other through the runs, are cut into at most
//     Options.Buckets buckets (DefaultBuckets, 120) of a power of two
//     inputs each, however long the recordings; lanes count per bucket the
//     inputs, outputs and commits (COMMIT rows of the feeds the stream
//     reads, at the input the stream was at) and show every drop and
//     failure; a line marks each crash (a run whose stream has no END),
//     each restart (a later run's first input) and, with replays
//     (Options.Replays, one replayer.Report per run), each first
//     divergence;
//   - with replays, every first divergence with its outputs and diff;
//   - a table per run: its streams' counts (inputs, outputs, commits, items
//     dropped, failed inputs, first and last instants, END or not), its
//     rows per kind (from the Findings) and its integrity problems. A run
//     that cannot be read through (an I/O error) has an unreadable problem.
//
// The page holds inline CSS and inline SVG only: no script, no image, no
// font and nothing fetched from anywhere, so it opens from a file, an
// e-mail or a ticket. Its layout fits a laptop's width and a phone's
// (tables turn into cards under 640 pixels; nothing is wider than the
// page). Elements carry data-* attributes (data-answer, data-count,
// data-run, data-mark ...) naming what they show, for tests and tools.
// The page holds no time but the recordings' own and no map order: the
// same recordings give the same bytes.
//
// A Report is a plain value, safe for concurrent reads once Build returned
// it; Build and WriteHTML may be called from several goroutines on
// different values.
package report
