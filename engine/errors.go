package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors of the engine, for errors.Is.
var (
	// ErrConfig: the engine's configuration is invalid; the *ConfigError
	// names the feed, group and key.
	ErrConfig = errors.New("engine: bad configuration")
	// ErrRefused: a BLOCK_WITH_DEADLINE publish was refused; the
	// *RefusedError gives the reason. Callers of Feed.Publish match it
	// with errors.Is.
	ErrRefused = errors.New("engine: publish refused")
	// ErrStopped: the engine (or feed) is stopped (Release: Stop began).
	ErrStopped = errors.New("engine: stopped")
	// ErrUnknown: a feed, group or processor name the engine does not have.
	// Callers of Hold, HoldParts, Subscribe, Unsubscribe, Fence, Unfence
	// and Release match it with errors.Is.
	ErrUnknown = errors.New("engine: unknown name")
	// ErrObserver: an observer hook failed (the recorder could not write) and
	// its group stopped taking items; the *ObserverError says which.
	ErrObserver = errors.New("engine: observer failed")
	// ErrNilContext: a nil context.Context was passed to a function that
	// takes one (Start, Stop, WaitSettled, RunSettled, Feed.Publish).
	// Callers match it with errors.Is.
	ErrNilContext = errors.New("engine: nil context")
	// ErrNotDurable: a CheckpointUser could not make its state durable
	// (its saves kept failing) and said so (Checkpoint.Fail): its group
	// stopped taking items; the *DurableError says which.
	ErrNotDurable = errors.New("engine: state not durable")
	// ErrHoldReplaced: Checkpoint.DurableThrough was called on the handle
	// of a hold that a later Hold (or HoldParts) of the same feed and group
	// replaced: it moves nothing; only the live hold's handles do.
	// Callers of DurableThrough match it with errors.Is.
	ErrHoldReplaced = errors.New("engine: hold replaced by a later Hold")
)

// ObserverError is an observer hook's error that failed a group: the group
// took no more items and the item it was dispatching (if any) was not
// dispatched, so it is delivered again by the next run. errors.Is(err,
// ErrObserver) holds, and errors.Is/As reach the hook's error. It is
// immutable and safe for concurrent use.
type ObserverError struct {
	Group     string
	Hook      string // "Started", "BeforeComplete", "CompletionFailed" or "Stopped"
	Processor string // the processor concerned, "" for a hook of the group
	Feed      string // the item held back, "" when there was none
	Seq       int64
	Err       error
}

func (e *ObserverError) Error() string {
	s := fmt.Sprintf("engine: group %q stopped: observer %s", e.Group, e.Hook)
	if e.Processor != "" {
		s += fmt.Sprintf(" of processor %q", e.Processor)
	}
	if e.Feed != "" {
		s += fmt.Sprintf(" (item of feed %q seq %d not dispatched)", e.Feed, e.Seq)
	}
	return s + ": " + e.Err.Error()
}

// Is reports whether target is ErrObserver.
func (e *ObserverError) Is(target error) bool { return target == ErrObserver }

// Unwrap returns the hook's error.
func (e *ObserverError) Unwrap() error { return e.Err }

// DurableError is a holder's report that it cannot make its state durable
// (Checkpoint.Fail): its saves keep failing, so nothing it handled from
// the last durable save on may be committed. The group failed as on an
// ObserverError: it took no more items, and its feeds commit nothing past
// what the holders made durable. errors.Is(err, ErrNotDurable) holds, and
// errors.Is/As reach the holder's error (which names its state). It is
// immutable and safe for concurrent use.
type DurableError struct {
	Group string
	Feed  string // the feed of the checkpoint that failed
	Err   error
}

func (e *DurableError) Error() string {
	return fmt.Sprintf("engine: group %q stopped: its state of feed %q cannot be made durable: %v", e.Group, e.Feed, e.Err)
}

// Is reports whether target is ErrNotDurable.
func (e *DurableError) Is(target error) bool { return target == ErrNotDurable }

// Unwrap returns the holder's error.
func (e *DurableError) Unwrap() error { return e.Err }

// ConfigError is a configuration rejected by New. It names the feed, group
// and key at fault; errors.Is(err, ErrConfig) holds. Callers of New get it
// with errors.As.
type ConfigError struct {
	Feed  string
	Group string
	Key   string
	Err   error
}

func (e *ConfigError) Error() string {
	s := "engine: config"
	if e.Feed != "" {
		s += fmt.Sprintf(" feed %q", e.Feed)
	}
	if e.Group != "" {
		s += fmt.Sprintf(" group %q", e.Group)
	}
	if e.Key != "" {
		s += " key " + e.Key
	}
	return s + ": " + e.Err.Error()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// RefuseReason says why a blocking publish was refused: the type of
// RefusedError.Reason.
type RefuseReason string

// The refusal reasons, the values of RefusedError.Reason.
const (
	// RefusedDeadline: the policy's deadline passed with a blocking
	// queue still full.
	RefusedDeadline RefuseReason = "deadline"
	// RefusedShutdown: Engine.Stop began while the publish waited.
	RefusedShutdown RefuseReason = "shutdown"
	// RefusedCancelled: the publish's context was done while it waited.
	RefusedCancelled RefuseReason = "cancelled"
)

// RefusedError is a BLOCK_WITH_DEADLINE publish that delivered to no queue:
// nothing was numbered, journalled or queued, so the caller may retry
// without duplicating. errors.Is(err, ErrRefused) holds.
type RefusedError struct {
	Feed   string
	Queue  string // the queue that lacked room
	Reason RefuseReason
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("engine: publish to feed %q refused (%s): queue %s full", e.Feed, e.Reason, e.Queue)
}

func (e *RefusedError) Unwrap() error { return ErrRefused }
