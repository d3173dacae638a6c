// Package docs holds the project's public contracts as Markdown: the
// architecture, the guarantees, the recording format, the CLI. It has no
// code; its tests keep what the code can check true to the code: the import
// table of ARCHITECTURE.md is generated from `go list` (go test ./docs
// -update rewrites it), its package tree names every package, and every
// source file a document cites exists.
package docs
