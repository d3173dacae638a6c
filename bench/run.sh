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
# The hand-off and the file source alternate with their floors, one count
# at a time, so that each ratio compares figures taken moments apart on
# this shared machine.
for _ in $(seq "$COUNT"); do
	COUNT=1 run . 2000000x 'ChannelHandoff|Publish$|TryPublishPause$|HostHandle' ./engine/
done
run . 2s 'ScaleItems' ./engine/
run . 3x 'Groups' ./engine/
for _ in $(seq "$COUNT"); do
	COUNT=1 run . 1x 'Source/once-earliest|Scanner|PlainHandoff' ./engine/filesource/ -args -filesource.mb=200
done
run . 3x 'ConsumeProcessCommit' ./engine/kafkasource/
run . 200000x 'Append|Floor' ./store/csvstore/ ./store/sqlitestore/
run . 1000000x 'RecordCSV|ReplayCSV' ./replayer/
run . 200000x 'RecordSQLite|ReplaySQLite' ./replayer/
run bench/peers 1000000x '.' ./
$GO run ./bench/report -o docs/PERFORMANCE.md \
	-command "make bench (bench/run.sh, COUNT=$COUNT)" "$out/bench.txt"
