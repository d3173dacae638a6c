package engine

// Loss is input a source counted as lost: input it could not or would
// not publish (a line longer than its maximum, the unread end of a file it
// can no longer find, records deleted by retention before they were read).
// A plain value.
type Loss struct {
	// Reason names what happened, one lower-case word per kind of loss
	// ("oversized", "unread", "retention" ...): FeedStatus.Losses counts by
	// it.
	Reason string
	// Items is how many items were lost when the source can count them (a
	// skipped line: 1; a deleted range of Kafka records: its length); 0
	// when it cannot (the unread bytes of a file that is gone).
	Items int64
	// Epoch and Key place the loss in the source's position space (Key: a
	// Kafka partition, "" for a file); From and To are the lost range of
	// offsets, [From, To) (a file's bytes, a partition's offsets). To is 0
	// when the end is unknown.
	Epoch    int64
	Key      string
	From, To int64
	// Detail identifies the input for a reader (a file's path and
	// identity); human-readable, one line.
	Detail string
}

// AddLoss reports a loss of the source's input: the feed is not lossless
// from then on, FeedStatus.Losses counts it under l.Reason (one per call;
// Items are not summed: some losses cannot be counted in items), and each
// group subscribed to the feed is told of it (Observer.Lost) where it
// happened in its queue: after the items the source published before the
// call, before the ones it publishes after (the recorder writes a LOST row
// there in every stream of the group). Call it from the source's goroutine,
// in the order of its publishes: a loss between two items is reported
// between them; not from a Journal (it takes the feed's lock).
func (in *Intake) AddLoss(l Loss) { in.f.addLoss(l) }

// addLoss is Intake.AddLoss.
func (f *Feed) addLoss(l Loss) {
	f.mu.Lock()
	for _, b := range f.targets {
		b.markLoss(f.seq, l)
	}
	targets := f.targets
	f.mu.Unlock()
	f.lossMu.Lock()
	if f.losses == nil {
		f.losses = map[string]int64{}
	}
	f.losses[l.Reason]++
	f.lossMu.Unlock()
	for _, b := range targets {
		b.group.notify()
	}
}

// lossCounts is a copy of the losses counted by reason, nil when none.
func (f *Feed) lossCounts() map[string]int64 {
	f.lossMu.Lock()
	defer f.lossMu.Unlock()
	if len(f.losses) == 0 {
		return nil
	}
	out := make(map[string]int64, len(f.losses))
	for k, v := range f.losses {
		out[k] = v
	}
	return out
}
