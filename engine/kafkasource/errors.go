package kafkasource

import "errors"

var (
	// ErrOptions is a source built with unusable options (no broker, no
	// topic, no group).
	ErrOptions = errors.New("kafkasource: options")
	// ErrRunning is a second Run of a source while one runs, or a Run
	// after Close.
	ErrRunning = errors.New("kafkasource: source already running or closed")
	// ErrCommit wraps a failed offset commit (the request or a
	// partition's error code). The commit is retried at the next poll.
	ErrCommit = errors.New("kafkasource: offset commit failed")
	// ErrPayload is a recorded payload that is not a Record's JSON.
	ErrPayload = errors.New("kafkasource: payload is not a record")
)
