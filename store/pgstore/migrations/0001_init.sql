-- Version 1: the runs (one row a recording, with its writer's lease) and
-- their rows (the columns of a CSV recording, and id: the row's place in
-- its run's storage order). A row names its run by the run's integer key
-- (run), not its text id: the key and the indexes that lead with it stay
-- small. No foreign key: its check would cost a lookup of the run for
-- every row inserted; an Append inserts rows only for the lease row it
-- updated, and pruning a run deletes its rows with it.
CREATE TABLE blackbox_runs (
	run        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id     text        NOT NULL UNIQUE,
	generation bigint      NOT NULL,
	member     text        NOT NULL,
	grp        text        NOT NULL,
	started    timestamptz NOT NULL,
	ended      timestamptz,
	nrows      bigint      NOT NULL DEFAULT 0
);
CREATE TABLE blackbox_rows (
	run       bigint NOT NULL,
	id        bigint NOT NULL,
	processor text   COLLATE "C" NOT NULL,
	idx       bigint NOT NULL,
	kind      text   NOT NULL,
	source    text   COLLATE "C" NOT NULL,
	seq       bigint NOT NULL,
	instant   text   NOT NULL,
	epoch     bigint NOT NULL,
	"key"     bytea  NOT NULL,
	"offset"  bigint NOT NULL,
	n         bigint NOT NULL,
	payload   text   NOT NULL,
	detail    bytea  NOT NULL,
	reads     text   NOT NULL,
	PRIMARY KEY (run, id)
);
CREATE INDEX blackbox_rows_stream ON blackbox_rows (run, processor, id);
CREATE INDEX blackbox_rows_journal ON blackbox_rows (run, source, seq) WHERE kind = 'JOURNAL';
