package store

import (
	"slices"
	"time"
)

// Format is the name and version written in every new recording's META
// row. Version 6 added the CONTROL and COMPLETED kinds, version 5 the STATE kind, version
// 4 the LOST kind, version 3 the COMMIT kind.
const Format = "blackbox-recording/6"

// FormatV5 is the version before CONTROL rows, still read and verified: a
// CONTROL row in it is malformed (the set of kinds is closed within a
// version).
const FormatV5 = "blackbox-recording/5"

// FormatV4 is the version before STATE rows, still read and verified: a
// STATE row in it is malformed (the set of kinds is closed within a
// version).
const FormatV4 = "blackbox-recording/4"

// FormatV3 is the version before LOST rows, still read and verified: a
// LOST row in it is malformed (the set of kinds is closed within a
// version).
const FormatV3 = "blackbox-recording/3"

// FormatV2 is the version before COMMIT rows, still read and verified: a
// COMMIT row in it is malformed (the set of kinds is closed within a
// version).
const FormatV2 = "blackbox-recording/2"

// FormatV1 is the previous version, still read and verified: its META has
// no stream list (the keys of Apps stand for it) and its payloads are
// stored verbatim (no binary-safe encoding).
const FormatV1 = "blackbox-recording/1"

// Kind is the kind of a row of a recording. The set is closed: a reader
// refuses a kind it does not know rather than misread it.
type Kind string

// The row kinds of docs/FORMAT.md.
const (
	KindMeta     Kind = "META"
	KindStart    Kind = "START"
	KindDelivery Kind = "DELIVERY"
	KindIndexed  Kind = "INDEXED"
	KindInline   Kind = "INLINE"
	KindTimer    Kind = "TIMER"
	KindOutput   Kind = "OUTPUT"
	KindDropped  Kind = "DROPPED"
	KindFailed   Kind = "FAILED"
	KindEnd      Kind = "END"
	KindJournal  Kind = "JOURNAL"
	// KindCommit: the source committed a position (Format and FormatV3,
	// not FormatV2 or FormatV1).
	KindCommit Kind = "COMMIT"
	// KindLost: the source lost input before the next input of the
	// processor's stream (Format and FormatV4): a line longer than the
	// maximum, the unread end of a file that is gone, records deleted by
	// retention.
	KindLost Kind = "LOST"
	// KindState: the loss state of a group's binding to a feed changed
	// (UP, DEGRADED, LATCHED: State), a row of no processor (Format only).
	KindState Kind = "STATE"
	// KindControl: an operator acted on the run (pause, resume, clear,
	// release, seek, kill: Control), a row of no processor (Format only).
	KindControl Kind = "CONTROL"
	// KindCompleted: items the processor's group completed in an earlier
	// run were not handed to it (Completed), a stream row (Format only).
	KindCompleted Kind = "COMPLETED"
)

// Kinds lists every row kind in the order of docs/FORMAT.md.
var Kinds = []Kind{KindMeta, KindStart, KindDelivery, KindIndexed, KindInline,
	KindTimer, KindOutput, KindDropped, KindFailed, KindEnd, KindJournal, KindCommit, KindLost, KindState, KindControl, KindCompleted}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// In reports whether a recording of format may hold rows of kind k: every
// valid kind in Format ("" stands for it), every one but CONTROL and
// COMPLETED in FormatV5, every one but CONTROL and STATE in FormatV4, every one but STATE and LOST in FormatV3, every one but
// STATE, LOST and COMMIT in FormatV2 and FormatV1.
func (k Kind) In(format string) bool {
	switch k {
	case KindControl, KindCompleted:
		return format == Format || format == ""
	case KindState:
		return format == Format || format == FormatV5 || format == ""
	case KindLost:
		return format == Format || format == FormatV5 || format == FormatV4 || format == ""
	case KindCommit:
		return format == Format || format == FormatV5 || format == FormatV4 || format == FormatV3 || format == ""
	}
	return k.Valid()
}

// IsGlobal reports whether rows of kind k belong to no processor: META,
// JOURNAL, COMMIT, STATE and CONTROL rows, which count their index among
// themselves.
func (k Kind) IsGlobal() bool {
	return k == KindMeta || k == KindJournal || k == KindCommit || k == KindState || k == KindControl
}

// IsInput reports whether k is a row a processor handles: INDEXED, INLINE
// or TIMER. OUTPUT rows belong to the input row before them.
func (k Kind) IsInput() bool {
	return k == KindIndexed || k == KindInline || k == KindTimer
}

// LastSeq is the highest feed sequence among the items rows record (their
// DELIVERY, INDEXED, INLINE and JOURNAL rows), 0 when they record none: the
// value at which the stores' write kill point is reached (a test arms it to
// die in the write of a given input, whatever the batch it is in).
func LastSeq(rows []Entry) int64 {
	var v int64
	for i := range rows {
		switch rows[i].Kind {
		case KindDelivery, KindIndexed, KindInline, KindJournal:
			v = max(v, rows[i].Seq)
		}
	}
	return v
}

// Entry is one logical row of a recording. Every store holds exactly these
// fields, so a recording converts between stores row for row. Which fields a
// kind uses is the table of docs/FORMAT.md; unused fields are zero.
//
// Index counts 1, 2, 3 ... per processor with no gap. META, JOURNAL,
// COMMIT and STATE rows belong to no processor: their Processor is "" and
// their Index counts the store's META, JOURNAL, COMMIT and STATE rows from
// 1 in the same way.
//
// Instants are kept in UTC with nanosecond precision; the zero time means
// "no instant".
type Entry struct {
	Processor string
	Index     int64
	Kind      Kind
	Source    string // feed, sink (OUTPUT) or "" (TIMER)
	Seq       int64  // feed sequence, output number k, timer number
	Instant   time.Time
	Epoch     int64
	Key       string
	Offset    int64
	N         int64  // outputs (inputs), attempt (DELIVERY), count (DROPPED; LOST, 0: unknown), inputs (END)
	Payload   []byte // any bytes (stored as EncodePayload gives them)
	Detail    string
	Reads     []time.Time // clock readings of the input's cycles, in order
}

// Meta is the decoded META row: what a recording says about itself.
// OptionSink is the META option that says what became of a run's outputs
// (docs/FORMAT.md): "live" (core.SinkLive), or the guarantee of the outbox
// that delivered them ("exactly-once", "idempotent", "at-least-once");
// absent when they went nowhere but the recording.
const OptionSink = "sink"

type Meta struct {
	Format  string            `json:"format"`
	Created time.Time         `json:"created"`
	Apps    map[string]string `json:"apps"`    // processor name -> app name
	Options map[string]string `json:"options"` // recorder options (durability, codec, sink: OptionSink)
	// Streams lists, sorted, the processor streams the recording must hold
	// (Format; absent in FormatV1, see ExpectedStreams).
	Streams []string `json:"streams"`
	// AppOptions maps a processor stream to the options its app's New
	// (core.App.New) was given, but those the app names Live (they point
	// at live side effects: a replay must not be given them): a replay
	// builds the stream's processor with them. A stream it does not list
	// was recorded without saying (a recording of an earlier version, or
	// of a caller that did not tell the recorder): its options are not
	// known. Absent (nil) when no stream's are.
	AppOptions map[string]map[string]string `json:"appOptions,omitempty"`
}
