-- Version 1: the runs (one row a recording, with its writer's lease) and
-- their rows (the columns of a CSV recording, and id: the row's place in
-- its run's storage order).
CREATE TABLE blackbox_runs (
	run_id     text        PRIMARY KEY,
	generation bigint      NOT NULL,
	member     text        NOT NULL,
	grp        text        NOT NULL,
	started    timestamptz NOT NULL,
	ended      timestamptz,
	nrows      bigint      NOT NULL DEFAULT 0
);
CREATE TABLE blackbox_rows (
	run_id    text   NOT NULL REFERENCES blackbox_runs ON DELETE CASCADE,
	id        bigint NOT NULL,
	processor text   NOT NULL,
	idx       bigint NOT NULL,
	kind      text   NOT NULL,
	source    text   NOT NULL,
	seq       bigint NOT NULL,
	instant   text   NOT NULL,
	epoch     bigint NOT NULL,
	"key"     bytea  NOT NULL,
	"offset"  bigint NOT NULL,
	n         bigint NOT NULL,
	payload   text   NOT NULL,
	detail    bytea  NOT NULL,
	reads     text   NOT NULL,
	PRIMARY KEY (run_id, id)
);
CREATE INDEX blackbox_rows_stream ON blackbox_rows (run_id, processor, id);
CREATE INDEX blackbox_rows_journal ON blackbox_rows (run_id, source, seq) WHERE kind = 'JOURNAL';
