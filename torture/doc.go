// Package torture is the torture harness (docs/TORTURE.md): it generates
// scenarios from a seed (runs of a blackbox binary with other flags,
// rotations and truncations of the input, kills at random moments and at
// named points, faults, operations on a Kafka topic, crash tests, the
// engine driven in-process), runs them, and checks what they left with an
// oracle of its own.
//
// Its API is what `blackbox torture` (internal/blackboxcli) and go test
// ./torture call: Run runs a session as Config says and returns a Report,
// whose Failures carry the broken invariants (Violation, its Invariant one
// of the Inv constants) and the command that reproduces each; Limits
// (ParseLimits reads --limit) shrink the scenarios, Only restricts them;
// AllDimensions are the dimensions every 200 consecutive seeds cover. App
// (AppName) is the harness's own app: the binary the scenarios run must
// know it. The scenario model (what a seed generates) is internal.
package torture
