// Package console is a run's operator window: the HTTP side of `blackbox
// run --listen`. A Window serves, on its own http.ServeMux, the run's
// Prometheus metrics (read from the engine's status at scrape time), its
// liveness (the run loop's heartbeat) and readiness, its status JSON, the
// bindings an operator can act on, and the control endpoints (pause,
// resume, clear, release, seek, kill), each guarded by a bearer token and
// each recorded as a CONTROL row of the recording before it is answered.
//
// wire.go is the contract its clients (blackbox ctl, blackbox top) read;
// docs/OPERATIONS.md documents every path, series and answer.
package console
