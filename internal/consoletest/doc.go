// Package consoletest is a fake operator window (console's wire contract,
// console/wire.go) for the tests of its clients: console.Client, blackbox
// ctl and blackbox top. It keeps bindings, answers every control action
// with the HTTP statuses of console.Answer's contract (400, 401, 404, 409,
// 422, 503), plans and applies seeks by their hash, serves recorded
// /status bodies in turn, and keeps every control request it received, so
// a test can assert what was (and was not) applied.
//
// It is imported only by tests. The real window is package console's
// server (run --listen); the end-to-end tests in cmd/cli drive that.
package consoletest
