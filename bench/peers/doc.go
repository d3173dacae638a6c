// Package peers measures blackbox's engine beside a peer on the same
// workload, in a module of its own so that the main module never depends on
// the peer: publish 1M small messages, a handler that acknowledges each.
//
//	cd bench/peers && go test -run '^$' -bench . -benchtime 1000000x
package peers
