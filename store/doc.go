// Package store is the recording model of blackbox: the Entry rows, the
// Reader and Writer interfaces, the integrity Problems a reader reports, the
// integrity Checker, an in-memory store and Copy between stores.
//
// Backends do I/O, this package does the logic. A backend (csvstore,
// sqlitestore) provides a Backend (Append, Sync, Close, a storage-order
// Scan, Journal; optionally a StreamSeeker) and registers a Driver
// (Register, from its init: it never panics) that sniffs a file's head and
// opens or creates one. Open picks the backend of a file by its head,
// Create by its extension (or by name); a backend that keeps recordings in
// a server (pgstore) claims URL schemes instead (Driver.Schemes,
// URLBackend), and Open and Create hand it such a URL untouched. Recording is the one checked reader
// over every Backend: it decodes META, runs the Checker in the first pass
// over the rows (Rows, Scan, Streams) and keeps what it found, so that
// Problems and Processors answer without reading again and replay, explain
// and report read a recording once. internal/storetest is the conformance
// suite every backend runs. docs/FORMAT.md is the public contract of the
// recording format.
//
// What every backend shares, so that they agree row for row:
//   - Validate: what a row may hold (no line break in a name, a known kind,
//     no negative seq, offset or n, no DROPPED of no item); every Append
//     checks every row with it before writing any, every reader reports a
//     row that fails it as malformed;
//   - EncodePayload, DecodePayload (PayloadText, PayloadBytes for a given
//     format version): the binary-safe text of a payload, which may be any
//     bytes;
//   - Kind.In, ValidateIn: the kinds a format version holds (STATE rows
//     only in Format, LOST rows in Format and FormatV4, COMMIT rows in
//     those and FormatV3), checked by every writer; Lost, LostOf: a LOST
//     row's fields; State, StateOf: a STATE row's;
//   - CheckRowSize, MaxRowSize: the longest row (its CSV line), refused by
//     every writer (*SizeError, ErrTooLarge) so that every reader reads it;
//   - Lock: the exclusive OS lock a writer holds on its file (ErrLocked);
//   - FormatInstant, ParseInstant, FormatReads, ParseReads: the text of
//     instants and clock readings;
//   - EncodeMeta, DecodeMeta: the META row (Format, still reading
//     FormatV4, FormatV3, FormatV2 and FormatV1), and the refusal (ErrFormat) of another format or version
//     or of a META detail with a repeated key; Meta.ExpectedStreams;
//   - Checker: the integrity rules, run over the rows in storage order when
//     a recording is opened, in memory bounded by the number of processors,
//     feeds and gaps, not rows; with what the rows prove (a seq a COMMIT row
//     covers with no row, a FAILED row past which a stream is not
//     reproducible): the one rule every verdict (verify, replay, diff,
//     explain, report) reads;
//   - CrashTail, CheckRuns: which problems of a run its restart explains,
//     and whether recordings can be consecutive runs (ErrRuns);
//
// Errors are sentinels (ErrReadOnly, ErrHoldsRecording, ErrFormat, ErrName,
// ErrClosed, ErrLocked, ErrTooLarge, and one per problem kind) tested with
// errors.Is, and typed errors (*Problem, *FieldError, *SizeError, and
// *FileError: the file an error of csvstore, sqlitestore or Lock is about)
// extracted with errors.As. A store that cannot be read reports an unreadable Problem
// (Unreadable), so an empty list of Problems always means complete.
package store
