-- Version 2: no index blackbox_rows_stream (run, processor, id). Its
-- upkeep, a B-tree insert a row on top of the primary key's, was a sixth
-- of the server's time of an Append and a fifth of the recording
-- throughput. A processor's stream is read through the primary key (run,
-- id), the run's rows in id order filtered by processor, as a CSV
-- recording's stream is read. The run's own rows (processor '': META,
-- COMMIT, CONTROL, JOURNAL ...), a handful beside the processors' in most
-- runs, keep an index of their own, partial, so that reading them
-- (diff's commits, replay's control rows) does not scan the run.
DROP INDEX IF EXISTS blackbox_rows_stream;
CREATE INDEX IF NOT EXISTS blackbox_rows_run ON blackbox_rows (run, id) WHERE processor = '';
