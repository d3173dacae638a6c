// Package store is the recording model of blackbox: the Entry rows, the
// Reader and Writer interfaces every backend implements, the integrity
// Problems a reader reports, an in-memory store, Copy between stores and the
// integrity Checker shared by every backend.
//
// Backends live in subpackages (csvstore, sqlitestore); storetest is the one
// conformance suite run against each. docs/FORMAT.md is the public contract of
// the recording format.
package store
