package core

import "fmt"

// Position is where an item sits in its source: Key names a partition (a
// Kafka partition; "" for a file), Offset the place just after the item (for
// a file, the byte offset after the line's terminator). Positions increase
// within an epoch and key.
type Position struct {
	Key    string `json:"key"`
	Offset int64  `json:"offset"`
}

func (p Position) String() string {
	if p.Key == "" {
		return fmt.Sprintf("%d", p.Offset)
	}
	return fmt.Sprintf("%s@%d", p.Key, p.Offset)
}

// Delivery is the context of one positioned item: which feed delivered it,
// its publish sequence in this run, and where it came from in its source.
// A processor reads it through Cycle.Delivery; it is nil for an item without
// a source position (a push publish, a timer). A Delivery is immutable while
// handlers and completions see it; it is valid until the delivery is
// complete (the engine reuses it for the next item): copy the value to keep
// it.
type Delivery struct {
	Feed string `json:"feed"`
	// Sequence is this run's publish number of the item, from 1. It restarts
	// with every run: never store it across a restart.
	Sequence int64 `json:"seq"`
	// Epoch names the source's position space. It changes when the source
	// is reset or replaced (a new pointer file, a replaced input file), so
	// positions of different epochs are never compared.
	Epoch    int64    `json:"epoch"`
	Position Position `json:"position"`
	// Attempt counts the failed attempts of this item so far: 0 on the
	// first attempt, 1 on the first retry.
	Attempt int `json:"attempt"`
}

// AlreadyApplied reports whether state saved through (epoch, pos) already
// contains this delivery: the same epoch and key, and an offset at or before
// the saved one. It is false for a nil Delivery and across epochs, so after a
// source reset the application re-applies rather than silently skipping.
func (d *Delivery) AlreadyApplied(epoch int64, pos Position) bool {
	return d != nil && d.Epoch == epoch && d.Position.Key == pos.Key && d.Position.Offset <= pos.Offset
}

// Completion is a callback run once a positioned delivery is complete: after
// every processor of the group handled the item and all its reentrant cycles,
// before the item counts as dispatched (so before the source may commit it).
// See Cycle.OnComplete.
type Completion interface {
	Complete(d *Delivery) error
}

// CompletionFunc adapts a function to Completion. A func value cannot be
// compared, so a CompletionFunc is never de-duplicated: register a pointer
// (or another comparable value) to have repeated registrations kept once
// (see Cycle.OnComplete).
type CompletionFunc func(d *Delivery) error

// Complete calls f(d).
func (f CompletionFunc) Complete(d *Delivery) error { return f(d) }

// BatchCompletion is an optional capability of a Completion: one that needs
// only its delivery's recorded rows written before it runs, not the
// processor's state as of right after its item (a completion that records
// the delivery's position in a state saved later, say). When every
// completion an item registered is a BatchCompletion, the engine may keep
// the item in its group's batch (group commit) instead of writing the
// batch at once: the completions then run once the batch's rows are
// written, in item order, each with its own Delivery, after later items of
// the batch were handled; then the item counts as dispatched. Any other
// completion keeps the item's completions running right after its item.
// BatchCompletion says nothing of concurrency: that is the Completion's.
type BatchCompletion interface {
	Completion
	// BatchCompletion marks the capability; it is never called.
	BatchCompletion()
}
