// Command blackbox records, replays and audits event processing: run an app
// over a file and record it (run), prove a recording's outputs identical
// (replay), check its integrity (verify), look inside it (inspect), compare
// two runs (diff), convert it between CSV and SQLite (convert), keep golden
// recordings (golden), kill a run and check what survives (crashtest), or
// see it all at once (demo).
//
// docs/CLI.md describes every command, its flags, exit codes and JSON. This
// package only wires package cli (github.com/blackbox-audit/blackbox/cmd/cli),
// which holds the commands, so that you can build your own binary with your
// own processors:
//
//	func main() {
//		os.Exit(cli.Main(os.Args[1:], cli.WithApps(mine)))
//	}
package main
