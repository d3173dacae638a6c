package main

import (
	"os"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/internal/blackboxcli"
)

func main() { os.Exit(cli.Main(os.Args[1:], blackboxcli.Options()...)) }
