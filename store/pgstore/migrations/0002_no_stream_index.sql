-- Version 2: no index blackbox_rows_stream (run, processor, id). Its
-- upkeep, a B-tree insert a row on top of the primary key's, was a sixth
-- of the server's time of an Append and a fifth of the recording
-- throughput. A stream is read through the primary key (run, id), the
-- run's rows in id order filtered by processor, as a CSV recording's
-- stream is read.
DROP INDEX IF EXISTS blackbox_rows_stream;
