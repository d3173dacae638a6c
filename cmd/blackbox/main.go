package main

import (
	"os"

	"github.com/blackbox-audit/blackbox/cmd/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], cli.WithTorture())) }
