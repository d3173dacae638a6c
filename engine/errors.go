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
	// *RefusedError gives the reason.
	ErrRefused = errors.New("engine: publish refused")
	// ErrStopped: the engine (or feed) is stopped.
	ErrStopped = errors.New("engine: stopped")
	// ErrUnknown: a feed, group or processor name the engine does not have.
	ErrUnknown = errors.New("engine: unknown name")
)

// ConfigError is a configuration rejected by New. It names the feed, group
// and key at fault; errors.Is(err, ErrConfig) holds.
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

// RefuseReason says why a blocking publish was refused.
type RefuseReason string

// The refusal reasons.
const (
	RefusedDeadline  RefuseReason = "deadline"
	RefusedShutdown  RefuseReason = "shutdown"
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
