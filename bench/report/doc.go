// Command report turns `go test -bench` output into the performance table
// of docs/PERFORMANCE.md: each blackbox figure beside its floor or peer,
// measured in the same run, and their ratio against the bar.
//
//	go run ./bench/report -o docs/PERFORMANCE.md bench/out/*.txt
package main
