// Package kafkasource is the engine's Kafka source: a consumer group on
// franz-go (kgo) whose committed offsets are never ahead of processing.
//
// # Records and positions
//
// Each record of an assigned partition is published as a *Record (topic,
// partition, offset, key, value, headers; Options.Item may publish
// something else built from it, as `blackbox run --kafka` publishes the
// value as a line) at core.Position{Key: "topic/partition", Offset:
// offset+1}: the position is the next record to read, so a committed
// position is exactly the Kafka commit. The epoch is the incarnation of
// the record's topic, TopicEpoch of the topic ID the fetch names (Kafka
// 3.1+; else the metadata's; 0 without topic IDs): the same for every
// member, generation and restart reading it, another for a topic deleted
// and created again, whose offsets start at 0 again. (epoch, key, offset)
// identifies a record, as (epoch, offset) does a file's line.
// PartitionKey as engine.GroupConfig.Key (or core.App.Key) keeps a
// partition's records in order on one worker.
// Decode rebuilds a *Record from its recorded JSON, for a replay with no
// broker.
//
// # Commits
//
// The source registers an engine.Committer: the engine tells it, in publish
// order, the items every queue has dispatched (the acknowledgement window),
// so per partition the highest acknowledged position is the contiguous
// processed prefix. Each poll commits, per owned partition, that position
// when it is past the committed one (CommitOffsetsSync, bounded by
// CommitTimeout): never past a pending record, never a lower offset than
// the one committed. While published records wait for their commit, a
// poll waits for records at most CommitInterval (default 2ms), so what is
// processed after the fetches run dry is committed that soon. Nothing is committed before a record is processed; no
// autocommit. A failed commit is warned through the Logger (once per
// distinct failure), counted in Status, and retried at every poll until it
// succeeds (the engine polls again even when nothing new was acknowledged).
// A commit that timed out may still land after a later one and move an
// offset back: the committed offsets are read back every VerifyInterval
// (and at every poll for 2×CommitTimeout after such a failure) and any
// offset found behind is committed again. Each commit's metadata names
// the topic ID (commitTag). The group's commit of a partition is none when
// it is no position of the partition's log: past its end, or naming another
// topic ID (a commit of a deleted topic landed on the topic created again,
// as brokers before Kafka 4.2 allow: the partition starts at its log start,
// no loss). A commit past the end (the client resets to the log start; the
// source reads from there as a group that never committed and commits what
// it processes) is a loss (below).
//
// # Each group's progress
//
// The commit of a partition is its slowest group's. The committer is also
// an engine.GroupCommitter: a commit's metadata carries, after the topic
// ID, the progress of the feed's groups ahead of it (" groups=" and
// comma-separated name=offset pairs, the names query-escaped, the offset
// the next record to read), up to about 4,000 bytes (Kafka's
// offset.metadata.max.bytes is 4,096 by default; a group past it keeps
// none, warned once). A commit is sent again at the same offset when only
// that progress moved, once the partition's ownership committed once. At
// an assignment, the progress a commit of the topic's current incarnation
// carries (its topic ID checked as above) is told to the feed
// (engine.Intake.SkipCompleted): a feed that honours it does not hand a
// group the records it completed. Without topic IDs no progress is kept.
// A version before this one does not recognise the longer metadata as its
// tag: it takes such a commit as it is (no incarnation check).
//
// # Backwards seeks
//
// The committer is an engine.Rewinder: Engine.Seek moves one group back to
// a record, re-delivered to that group only: the engine asks one Rewind per
// partition of the feed's records after the target, each to the
// partition's last record at or before it. The source first commits the
// partition at the target
// (CommitOffsetsSync; a lower commit, a slower group's, is kept), the
// metadata carrying every other group at least at the progress it had and
// the sought group at the target, so a restart from then on hands the
// sought group every record after the target and the others none they
// completed; then it has the client read the partition from the target
// (kgo SetOffsets, which drops the fetches buffered or in flight) and
// drops the partition's polled records not yet published. A failed commit
// is retried at the next poll (the feed takes nothing meanwhile). During
// a revocation the commit is made and nothing is read again: the next
// owner reads from it. A partition lost after the seek was checked (the
// session expired, the topic deleted) ends Run with ErrRewind.
//
// The committer is also an engine.RewindChecker: it refuses, before the
// engine changes anything (ErrRewind, in the engine's ErrSeekUnsupported),
// a partition this member does not own now or is revoking, a target
// published before its current ownership (a rebalance since) or of another
// epoch (the topic created again), other groups on a cluster without
// topic IDs (no group's own progress is kept), a commit of the partition
// whose outcome is unknown (it could land past the move back), a target
// ahead of where the partition is read now (one an earlier move back has
// not read again yet: committing there would pass over the records in
// between, and Rewind would refuse it once the engine had changed
// everything), and a move back whose commit metadata could pass the 4,000
// bytes it may hold. It reads a copy of what it checks, which the source
// refreshes where those change (never per record; how far each partition
// is read, once per published batch): it is safe while the source runs.
//
// # Overload, rebalances and lost sessions
//
// The default policy is PAUSE: when the feed refuses a record, the
// remaining polled records are kept and offered again (the source waits on
// Intake.Ready), and nothing more is polled; when the feed has taken
// nothing for PollInterval, the owned partitions' fetches are paused
// (PauseFetchPartitions) until the kept records are published. No record
// is dropped unless the feed's policy is a drop.
//
// The client blocks rebalances while polled records are being published
// (BlockRebalanceOnPoll). On a revocation the source hands the revoked
// partitions' polled records that are not published yet back at once
// (they are dropped, never published: the new owner reads them from the
// commit), waits, bounded by RevokeTimeout (default 2s: a member joining
// the group waits for every revocation), for their records already queued
// to be processed, commits their processed prefix and stops owning them:
// records of theirs still queued are fenced (their acknowledgements, of
// items published before the partition's current ownership, known by the
// feed's sequence number when it was assigned (Intake.Seq), or of a
// partition not owned, are never committed) and
// the new owner reads them again from the commit. The committer is an
// engine.CommitReporter: the engine claims a commit (Observer.Committed,
// a COMMIT row) only for a position the source really committed, never
// for fenced records. A lost partition (the session expired) commits
// nothing. A member that dies without leaving the group (SIGKILL) holds its
// partitions until its session (SessionTimeout, default 45s) expires; a
// session the brokers refuse keeps the member out of the group, the feed
// BEHIND with the group's error as its detail.
//
// # Losses and partitions no one reads
//
// Records deleted (retention, DeleteRecords) before the group read them
// are a loss: a fetch whose log start offset is past the partition's next
// offset (the group's commit, 0 for a group that never committed, then the
// offset after the last record fetched) shows them (the client resumes at
// the log start), as do the start offsets read twice a second apart for a
// partition with nothing left to fetch; the source reports each range with
// Intake.AddLoss (reason LossRetention, the partition, the offsets) and
// counts it in Status. A group's commit past its partition's log end (the
// broker lost records: an unclean leader election; or a commit naming no
// topic ID, of a topic of the same name deleted since) means the records
// the log held past the commit, which the group never read, are gone, and
// how many cannot be known: seen when a fetch returns records below the
// commit, or when the end offset of a partition with no record left is
// read below it, it is reported with Intake.AddLoss (reason LossTruncated,
// the partition, From the commit, Items 0: unknown; the detail names the
// log end), warned, and counted in Status (Truncated). Once a second (and once more when Run ends) the
// source reads its topics' partitions with a metadata request of its own:
// a partition no member of the group is assigned (one added to the topic)
// leaves the feed BEHIND, naming it, and refreshes the client's metadata so
// that the group's leader rebalances to assign it. A topic whose
// incarnation the client consumes is gone (deleted, or created again under
// another topic ID) is retired: the records of its partitions this member
// owned and had not read are a loss (reason LossDeleted), the partitions
// are no longer owned (their queued records' acknowledgements fenced), and
// the topic is purged from the client and added again (franz-go never
// consumes another incarnation of a topic it consumed): the group assigns
// whatever exists under the name next, read from its start. A deleted
// topic leaves nothing to read: the feed may be CAUGHT_UP, naming it, so a
// bounded run ends. With Options.Drain (a bounded run), the partitions of
// other members must be committed to their end too: until then the feed is
// BEHIND, naming the records not committed.
//
// Status reports per partition the committed offset, the processed and
// published positions, the high watermark, the lag (high watermark minus
// committed), whether it is paused and the records it lost; the feed is
// CAUGHT_UP once every owned partition is published to its high watermark
// and every partition of the topics is owned by a member, BEHIND otherwise
// (with the reason: joining, paused, records to read, a partition no one
// reads, a topic that does not exist, records another member has not
// committed (Drain), a fetch error, or a broker gone away: while the
// client's last request or connection to a broker failed, the detail names
// the broker and the error, until a request succeeds again; franz-go
// retries them itself, so the run resumes once the broker is back).
//
// Close the source after the engine stopped: the engine's final commit
// goes through the source's client; Close leaves the group (its revocation
// commits the processed prefix).
//
// A Source is safe for concurrent use; it runs one Run at a time.
package kafkasource
