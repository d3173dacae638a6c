package kafkasource

import "errors"

var (
	// ErrOptions is a source built with unusable options (no broker, no
	// topic, no group). Callers of New, and of Run when kgo refuses
	// Options.ClientOptions, match it with errors.Is.
	ErrOptions = errors.New("kafkasource: options")
	// ErrRunning is a second Run of a source while one runs, or a Run
	// after Close. Callers of Run match it with errors.Is.
	ErrRunning = errors.New("kafkasource: source already running or closed")
	// ErrCommit wraps a failed offset commit (the request or a
	// partition's error code). The commit is retried at the next poll.
	// The error of engine.Intake.PollAcks and the Logger's warning wrap
	// it; callers match it with errors.Is.
	ErrCommit = errors.New("kafkasource: offset commit failed")
	// ErrRewind is a backwards seek the source cannot apply: refused
	// before anything changed (CheckRewind: the engine's
	// ErrSeekUnsupported wraps it), or, from Rewind, a partition lost
	// after the check (Run then returns it). Callers match it with
	// errors.Is.
	ErrRewind = errors.New("kafkasource: backwards seek not possible")
	// ErrPayload is a recorded payload that is not a Record's JSON.
	// Callers of Decode match it with errors.Is.
	ErrPayload = errors.New("kafkasource: payload is not a record")
)
