// Package kafkasink is an outbox sink (core.EffectSink) that produces each
// output to a Kafka topic, exactly once across crashes: what `blackbox run
// --sink kafka://BROKERS/TOPIC` delivers through.
//
// # How
//
// The sink is one franz-go producer with a transactional id that stays the
// same across the restarts of its outbox. Each batch the outbox delivers
// is one Kafka transaction: BeginTransaction, the batch's records,
// EndTransaction(TryCommit), then one record of it read back,
// read_committed: Deliver returns only once a reader sees the batch (a
// transaction that ended by an abort all the same, as franz-go v1.22.3
// can end one it lost track of, or whose produce failed, is made again,
// 3 times in all). Every record carries headers: the
// transactional id (HeaderOutbox), the batch number (HeaderBatch), the
// output's core.EffectKey as JSON (HeaderKey) and its processor stream
// (HeaderStream); its value is the output as the recording holds it, its
// key the input's position key (a Kafka input's "topic/partition"; a
// file input's feed; for an output without a source position, its
// stream), so the outputs of one input key stay in one partition, in the
// outbox's order.
//
// The sink is core.Transactional: Delivered reads the tail of every
// partition of the topic with read_committed isolation and returns the
// highest batch number among its own committed records. After a crash the
// outbox (outbox.Open) asks it whether the batch the crash interrupted
// committed, and delivers that batch again only if it did not: each output
// is in the topic once, for a read_committed reader.
//
// Open initialises the transactional id before anything is asked: the
// brokers fence the killed process's producer (its late writes are
// refused) and abort its open transaction at once, so Delivered and
// read_committed readers never wait for the transaction timeout.
//
// # What a reader gets
//
// A read_committed consumer of the topic sees every output of the run
// once per source position (the outbox's exactly once: docs/GUARANTEES.md,
// "Effects"), across any number of crashes of the process, and never an
// output that no recording holds or whose input a source that commits did
// not commit (the outbox delivers only those). A read_uncommitted consumer may
// also see the records of aborted transactions (a crash's batch, which
// the restart writes again). The guarantee is per transactional id: two
// outboxes (marks files) must never share one; the first run of an outbox
// (new marks) must find no batch of its id in the topic (`blackbox run`
// refuses one that does: the marks were lost, or another outbox uses the
// id). Records deleted by retention are forgotten by Delivered: keep the
// topic's retention longer than a run's downtime.
//
// # Why not the source's offsets in the transaction
//
// franz-go's GroupTransactSession commits a consumer group's offsets in
// the producer's transaction. The engine cannot use it: it commits a Kafka
// source's offsets itself, per partition only through the contiguous
// prefix of processed inputs, and only once their rows and the processors'
// state are durable (record before effect); a GroupTransactSession owns
// the consumer and commits what was polled at the end of each
// transaction. Here the commit comes first and the outbox delivers an
// output only after it: the outbox's marks and the sink's watermark
// (Delivered) make the chain source, recording, topic exactly once.
//
// A Sink is not safe for concurrent use (the outbox calls it from one
// goroutine at a time). Close closes its producer.
package kafkasink
