// Package store is the recording model of blackbox: the Entry rows, the
// Reader and Writer interfaces every backend implements, the integrity
// Problems a reader reports, an in-memory store, Copy between stores and the
// integrity Checker shared by every backend.
//
// Backends live in subpackages (csvstore, sqlitestore); storetest is the one
// conformance suite run against each. docs/FORMAT.md is the public contract of
// the recording format.
//
// What every backend shares, so that they agree row for row:
//   - Validate: what a row may hold (no line break in a name or payload, a
//     known kind); every Append checks every row with it before writing any,
//     every reader reports a row that fails it as malformed;
//   - FormatInstant, ParseInstant, FormatReads, ParseReads: the text of
//     instants and clock readings;
//   - EncodeMeta, DecodeMeta: the META row, and the refusal (ErrFormat) of
//     another format or version;
//   - Checker: the integrity rules, run over the rows in storage order when
//     a recording is opened, in memory bounded by the number of processors,
//     feeds and gaps, not rows.
//
// Errors are sentinels (ErrReadOnly, ErrHoldsRecording, ErrFormat, ErrName,
// ErrPayload, ErrClosed, and one per problem kind) tested with errors.Is, and
// typed errors (*Problem, *FieldError) extracted with errors.As.
package store
