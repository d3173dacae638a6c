// Command report turns `go test -bench` output into the performance tables
// of docs/PERFORMANCE.md: each blackbox figure beside its floor or peer,
// measured in the same run, and their ratio against the bar. The main
// table goes between the TABLE markers, the parallel workers' (issue #16)
// between the WORKERS markers, the binary end to end (bench/e2e, issue
// #17) between the E2E markers; a floor may be a constant (an absolute
// bar: a rate to reach, a memory ceiling). A paired row's ratio is the median of the
// ratios of each run of the benchmark binary (bench/run.sh runs them one
// count at a time); the output of the tree at BASELINE is read under the
// package name baseline/engine.
//
//	go run ./bench/report -o docs/PERFORMANCE.md bench/out/*.txt
package main
