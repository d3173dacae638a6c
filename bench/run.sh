#!/usr/bin/env bash
# make bench: run the benchmark suite (several counts), then print the table
# of every blackbox figure beside its floor or peer, and write it into
# docs/PERFORMANCE.md. Ratios, not absolute times, are the claims: this
# machine is shared and noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
COUNT=${COUNT:-3}
out=bench/out
mkdir -p "$out"
rm -f "$out"/*.txt
run() { # dir benchtime pattern pkgs...
	local dir=$1 bt=$2 pat=$3
	shift 3
	(cd "$dir" && $GO test -run '^$' -bench "$pat" -benchtime "$bt" -count "$COUNT" "$@") | tee -a "$out/bench.txt"
}
# The group as it was before parallel workers (issue #16): one worker must
# cost at most 1.1x of it on the publish-to-dispatch benchmark. Its tree is
# extracted from git to a temporary directory; BASELINE= (empty) skips it.
BASELINE=${BASELINE-bc5d8ba}
base=""
if [ -n "$BASELINE" ] && git cat-file -e "$BASELINE^{commit}" 2>/dev/null; then
	base=$(mktemp -d)
	trap 'rm -rf "$base"' EXIT
	git archive "$BASELINE" | tar -x -C "$base"
fi
baseline() { # benchtime pattern: the baseline's engine benchmarks, named baseline/engine
	[ -n "$base" ] || return 0
	(cd "$base" && $GO test -run '^$' -bench "$2" -benchtime "$1" -count 1 ./engine/) |
		sed 's|^pkg: github.com/blackbox-audit/blackbox/engine$|pkg: baseline/engine|' | tee -a "$out/bench.txt"
}
# The hand-off and the file source alternate with their floors, one count
# at a time, so that each ratio compares figures taken moments apart on
# this shared machine; the publish path alternates with the baseline's.
for _ in $(seq "$COUNT"); do
	COUNT=1 run . 2000000x 'ChannelHandoff|Publish$|TryPublishPause$|HostHandle' ./engine/
	baseline 2000000x 'Publish$'
done
# The workers: one run of the binary measures every worker count, and each
# count's ratio to one worker is taken within that run.
for _ in $(seq "$COUNT"); do
	COUNT=1 run . 1x 'Workers(IO|IOFloor|CPU|CPUFloor)$' ./engine/
done
run . 1s 'WorkersCPULoop' ./engine/
run . 2s 'ScaleItems' ./engine/
run . 3x 'Groups' ./engine/
for _ in $(seq "$COUNT"); do
	COUNT=1 run . 1x 'Source/once-earliest|Scanner|PlainHandoff' ./engine/filesource/ -args -filesource.mb=200
done
# Kafka: 10 fresh groups per measurement, at least 5 counts (a minute):
# a group's join and first fetch weigh on a single short measurement.
COUNT=$((COUNT > 5 ? COUNT : 5)) run . 10x 'ConsumeProcessCommit' ./engine/kafkasource/
run . 200000x 'Append|Floor' ./store/csvstore/ ./store/sqlitestore/
# The recorder behind a real engine writing to a CSV file and an SQLite
# database in batches (group commit, issue 17); each run also times its
# floor on the same rows in the same batches (floor-rows/s): encoding/csv
# writing each batch with one write, a bare prepared INSERT with one
# transaction per batch.
run . 1000000x 'Throughput/record/csv$' ./recorder/
run . 100000x 'Throughput/record/sqlite$' ./recorder/
# The same into a run of a throwaway PostgreSQL server (internal/pgtest:
# fsync off; the bench's session synchronous_commit=on: a commit waits for
# its WAL to be written, not synced, as SQLite's synchronous=NORMAL writes
# its WAL frames unsynced), beside the SQLite figure (issue 30). Skipped
# where no server can be started.
run . 100000x 'Throughput/record/postgres$' ./recorder/
run . 3000x 'Append' ./store/pgstore/
# The latency the outbox adds to an output (issue 31): the ledger saving
# its state every 100ms, paced lines, a live sink against the outbox.
run . 3x 'Latency' ./outbox/
# The outbox's cost (issue 31): the same committed ledger run to CSV
# without the outbox (the floor) and with it, alternated each iteration.
run . 3x 'Cost' ./outbox/
# ReplayCSV also times its floor on the same recording in the same run:
# encoding/csv merely reading its rows (floor-inputs/s).
run . 1000000x 'RecordCSV|ReplayCSV' ./replayer/
run . 200000x 'RecordSQLite|ReplaySQLite' ./replayer/
run bench/peers 1000000x '.' ./
# The binary itself, end to end over 300,000 lines (record, replay, the
# ledger with --state) and at 10K, 100K and 1M lines: one pass (child
# processes, each row's wall time and peak RSS).
bin=$(mktemp -d)
$GO build -o "$bin/blackbox" ./cmd/blackbox
$GO run ./bench/e2e -bin "$bin/blackbox" | tee -a "$out/bench.txt"
rm -rf "$bin"
$GO run ./bench/report -o docs/PERFORMANCE.md \
	-command "make bench (bench/run.sh, COUNT=$COUNT)" "$out/bench.txt"
