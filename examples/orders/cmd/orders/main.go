// Command orders is the blackbox command line with the orders app added
// (beside the built-in apps): `orders run --app orders ...`, `orders
// replay`, `orders golden verify` and the rest work with it.
package main

import (
	"os"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/examples/orders"
)

func main() { os.Exit(cli.Main(os.Args[1:], cli.WithName("orders"), cli.WithApps(orders.App()))) }
