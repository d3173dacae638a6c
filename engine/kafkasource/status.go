package kafkasource

import (
	"cmp"
	"slices"
)

// Status is where a Source stands: what Source.Status returns.
type Status struct {
	// Generation is the group generation of the last assignment, -1
	// before one.
	Generation int64
	// Partitions are every partition the source has owned, by topic and
	// partition.
	Partitions []PartitionStatus
	// CommitFailures counts failed commits (each retried); LastError is
	// the last one while it is not resolved.
	CommitFailures int64
	LastError      string
	// Fenced counts acknowledgements not committed because their
	// partition was revoked or lost after they were published.
	Fenced int64
}

// PartitionStatus is one partition's standing.
type PartitionStatus struct {
	Topic     string
	Partition int32
	// Epoch is the position space of its records: TopicEpoch of the ID
	// of the topic's incarnation they were read from (0: not known, or a
	// cluster without topic IDs).
	Epoch int64
	Owned bool
	// Committed is the committed offset (the next record to read), -1
	// when this source has not committed nor read it; Processed the
	// acknowledged position (offset+1 of the last processed record of the
	// contiguous prefix), Published the position of the last record
	// published, HighWatermark the partition's end at the last fetch (-1
	// unknown).
	Committed, Processed, Published, HighWatermark int64
	// Lag is HighWatermark minus Committed (-1 when either is unknown).
	Lag    int64
	Paused bool
	// Lost counts the records of the partition deleted (retention,
	// DeleteRecords) before the group read them: a loss.
	Lost int64
	// Truncated counts the times the group's commit was found past the
	// partition's log end (LossTruncated): each a loss of records past
	// the commit, how many unknown.
	Truncated int64
	// Fenced counts the partition's records this source published and
	// processed but never committed (all its ownerships): records still
	// queued when the partition was revoked or lost, or of an incarnation
	// of the topic since deleted. The partition's next owner reads them
	// again: they are processed twice, possibly after the next owner
	// committed them. Status.Fenced is their sum.
	Fenced int64
}

// Status returns the source's status; safe to call at any time.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Generation: -1, CommitFailures: s.commitFailures.Load(), LastError: s.lastError, Fenced: s.fenced.Load()}
	if s.cl != nil || len(s.parts) > 0 {
		st.Generation = s.gen
	}
	for _, p := range s.parts {
		ps := PartitionStatus{Topic: p.topic, Partition: p.partition, Epoch: p.epoch, Owned: p.owned, Committed: p.committed,
			Processed: p.acked, Published: p.published, HighWatermark: p.hwm, Lag: -1, Paused: p.paused, Lost: p.lost, Truncated: p.truncated, Fenced: p.fenced}
		if p.hwm >= 0 && p.committed >= 0 {
			ps.Lag = p.hwm - p.committed
		}
		st.Partitions = append(st.Partitions, ps)
	}
	slices.SortFunc(st.Partitions, func(a, b PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return st
}
