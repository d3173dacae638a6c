package filesource

// Status is what a Source tells of its input beyond its feed's status
// (engine.FeedStatus): what it skipped or read again that is neither a
// line nor a loss. Its losses (a line longer than Options.MaxLine, a file
// it could not find again to read to its end) are the feed's
// (FeedStatus.Losses, LossOversized and LossUnread). It
// marshals to the "source" object of `blackbox run --status`. A plain
// value.
type Status struct {
	// HoleBytes counts NUL bytes skipped as a hole a stale writer left at
	// the start of a truncated file (it kept its old offset): not data,
	// not a loss.
	HoleBytes int64 `json:"holeBytes"`
	// Replaced counts the times the input was found replaced, truncated or
	// rewritten in place, then read from its start under a new epoch: not
	// a loss by itself (the unread end of the old file, when no copy holds
	// it, is one: LossUnread).
	Replaced int64 `json:"replaced"`
}

// Status reports what the source skipped or read again since its last Run
// began (after Run returned: during that Run). Safe for concurrent use.
func (s *Source) Status() Status {
	return Status{HoleBytes: s.holeBytes.Load(), Replaced: s.replaced.Load()}
}

// The reasons of the losses the file source reports (engine.Loss.Reason,
// written in LOST rows): keys of engine.FeedStatus.Losses.
const (
	// LossOversized: a line longer than the maximum, skipped (Items 1,
	// From and To the line's byte range).
	LossOversized = "oversized"
	// LossUnread: a file the source can no longer find, not read to its
	// end (Items 0: unknown; From the offset it was read to, To 0: its end
	// is unknown).
	LossUnread = "unread"
)
