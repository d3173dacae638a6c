package store

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Completed is what a COMPLETED row says (docs/FORMAT.md, "Kinds"): the
// items Seq to Seq+Items-1 of feed Feed, of the source's position space
// Epoch and Key at offsets From (the first item's) to Last (the last
// item's), were not handed to the row's processor in this run: its group
// completed them in an earlier run (the progress the source kept for it,
// engine.Intake.SkipCompleted). Not an input and not a loss. A plain value.
type Completed struct {
	Feed  string
	Seq   int64
	Items int64
	Epoch int64
	Key   string
	From  int64
	Last  int64
}

// completedDetail is the JSON of a COMPLETED row's detail column.
type completedDetail struct {
	Last *int64 `json:"last"`
}

// Entry returns c as the COMPLETED row of processor's stream at index.
func (c Completed) Entry(processor string, index int64) Entry {
	b, err := json.Marshal(completedDetail{Last: &c.Last})
	if err != nil { // an int
		panic(err)
	}
	return Entry{Processor: processor, Index: index, Kind: KindCompleted, Source: c.Feed, Seq: c.Seq, Epoch: c.Epoch,
		Key: c.Key, Offset: c.From, N: c.Items, Detail: string(b)}
}

// CompletedOf reads a COMPLETED row. It refuses, with an error wrapping
// ErrMalformed, a row of no feed, a seq below 1, no item (n 0), seqs past
// the largest integer, and a detail that is not the JSON a writer writes
// (an object whose one field "last" is an offset at or after the row's).
func CompletedOf(e Entry) (Completed, error) {
	bad := func(why string, args ...any) (Completed, error) {
		return Completed{}, fmt.Errorf("%w: COMPLETED row: %s", ErrMalformed, fmt.Sprintf(why, args...))
	}
	switch {
	case e.Source == "":
		return bad("no feed")
	case e.Seq < 1:
		return bad("seq %d (want 1 or more)", e.Seq)
	case e.N < 1:
		return bad("n %d (want 1 or more)", e.N)
	case e.Seq > maxInt64-(e.N-1):
		return bad("seqs %d and %d more past the largest integer", e.Seq, e.N-1)
	}
	var d completedDetail
	dec := json.NewDecoder(bytes.NewReader([]byte(e.Detail)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return bad("detail: %v", err)
	}
	if dec.More() {
		return bad("detail: more than one JSON value")
	}
	switch {
	case d.Last == nil:
		return bad("detail: no last offset")
	case *d.Last < e.Offset:
		return bad("last offset %d before the first, %d", *d.Last, e.Offset)
	}
	return Completed{Feed: e.Source, Seq: e.Seq, Items: e.N, Epoch: e.Epoch, Key: e.Key, From: e.Offset, Last: *d.Last}, nil
}

// String is the run for a person: `3 items of feed "in" (seqs 4-6, epoch 7
// offsets 120 to 180): completed in an earlier run`.
func (c Completed) String() string {
	items := "1 item"
	seqs := fmt.Sprintf("seq %d", c.Seq)
	if c.Items > 1 {
		items = fmt.Sprintf("%d items", c.Items)
		seqs = fmt.Sprintf("seqs %d-%d", c.Seq, c.Seq+c.Items-1)
	}
	at := fmt.Sprintf("epoch %d", c.Epoch)
	if c.Key != "" {
		at += " key " + c.Key
	}
	return fmt.Sprintf("%s of feed %q (%s, %s offsets %d to %d): completed in an earlier run", items, c.Feed, seqs, at, c.From, c.Last)
}
