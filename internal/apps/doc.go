// Package apps holds the built-in processors of blackbox, used by the CLI,
// the demo and the golden recordings: ledger (stateful, with consumer-side
// offsets) and alerts (a stateless threshold filter). Their inputs are text
// lines (string) of a file feed named "input"; their outputs are JSON-ready
// structs with a fixed field order, so recordings are byte-stable.
//
// Line format:
//
//	account,amount             apply a signed integer amount to an account
//	transfer,from,to,amount    move a positive amount (two reentrant events)
//	tick                       set a timer that emits a summary of the ledger
//	fail                       an input that always fails (ErrFailLine)
//
// Fields are separated by commas; space around a field is ignored.
package apps
